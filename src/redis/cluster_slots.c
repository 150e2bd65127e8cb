/* SPDX-License-Identifier: MIT */
/* Redis Cluster's slots: CRC16 of a key's hash tag, the slot map read from CLUSTER
 * SLOTS (nested arrays: first slot, last slot, then the master as [endpoint, port,
 * node ID, metadata] and its replicas), and MOVED / ASK redirections. */
#include "redis/cluster_slots.h"

#include <string.h>

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0, no reflection), a byte at a
 * time: what Redis Cluster's keyHashSlot uses. */
static const guint16 crc16_table[256] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7, 0x8108, 0x9129, 0xa14a, 0xb16b,
    0xc18c, 0xd1ad, 0xe1ce, 0xf1ef, 0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6,
    0x9339, 0x8318, 0xb37b, 0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de, 0x2462, 0x3443, 0x0420, 0x1401,
    0x64e6, 0x74c7, 0x44a4, 0x5485, 0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d,
    0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4, 0xb75b, 0xa77a, 0x9719, 0x8738,
    0xf7df, 0xe7fe, 0xd79d, 0xc7bc, 0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
    0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b, 0x5af5, 0x4ad4, 0x7ab7, 0x6a96,
    0x1a71, 0x0a50, 0x3a33, 0x2a12, 0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a,
    0x6ca6, 0x7c87, 0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41, 0xedae, 0xfd8f, 0xcdec, 0xddcd,
    0xad2a, 0xbd0b, 0x8d68, 0x9d49, 0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70,
    0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a, 0x9f59, 0x8f78, 0x9188, 0x81a9, 0xb1ca, 0xa1eb,
    0xd10c, 0xc12d, 0xf14e, 0xe16f, 0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
    0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e, 0x02b1, 0x1290, 0x22f3, 0x32d2,
    0x4235, 0x5214, 0x6277, 0x7256, 0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
    0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405, 0xa7db, 0xb7fa, 0x8799, 0x97b8,
    0xe75f, 0xf77e, 0xc71d, 0xd73c, 0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634,
    0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9, 0xb98a, 0xa9ab, 0x5844, 0x4865, 0x7806, 0x6827,
    0x18c0, 0x08e1, 0x3882, 0x28a3, 0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
    0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92, 0xfd2e, 0xed0f, 0xdd6c, 0xcd4d,
    0xbdaa, 0xad8b, 0x9de8, 0x8dc9, 0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1,
    0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8, 0x6e17, 0x7e36, 0x4e55, 0x5e74,
    0x2e93, 0x3eb2, 0x0ed1, 0x1ef0};

static guint crc16(const char *bytes, gsize len)
{
    guint crc = 0;
    for (gsize i = 0; i < len; i++)
        crc = ((crc << 8) ^ crc16_table[((crc >> 8) ^ (guchar)bytes[i]) & 0xff]) & 0xffff;
    return crc;
}

guint sluice__cluster_key_slot(const char *key, gsize len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        const char *tag = open + 1;
        const char *close = memchr(tag, '}', key + len - tag);
        if (close && close > tag) /* "{}" is no tag: the whole key is hashed */
            return crc16(tag, close - tag) & (SLUICE__CLUSTER_SLOTS - 1);
    }
    return crc16(key, len) & (SLUICE__CLUSTER_SLOTS - 1);
}

static gboolean is_slot(const redisReply *r)
{
    return r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer < SLUICE__CLUSTER_SLOTS;
}

/* A node's [endpoint, port, id, ...] into range; NULL, or what is wrong. */
static const char *parse_node(const redisReply *node, const char *asked_host,
                              sluice__cluster_range *range)
{
    if (node->type != REDIS_REPLY_ARRAY || node->elements < 2)
        return "a master that is not [endpoint, port, ...]";
    const redisReply *endpoint = node->element[0], *port = node->element[1];
    if (endpoint->type != REDIS_REPLY_NIL && endpoint->type != REDIS_REPLY_STRING)
        return "an endpoint that is not a string";
    if (port->type != REDIS_REPLY_INTEGER || port->integer < 1 || port->integer > 65535)
        return "a port that is not a number from 1 to 65535";
    gboolean unknown =
        endpoint->type == REDIS_REPLY_NIL || endpoint->len == 0 || strcmp(endpoint->str, "?") == 0;
    range->host = unknown ? g_strdup(asked_host) : g_strndup(endpoint->str, endpoint->len);
    range->port = (int)port->integer;
    if (node->elements > 2 && node->element[2]->type == REDIS_REPLY_STRING)
        range->id = g_strndup(node->element[2]->str, node->element[2]->len);
    return NULL;
}

gboolean sluice__cluster_slots_parse(const redisReply *reply, const char *asked_host,
                                     sluice__cluster_slots *out, char **why)
{
    memset(out, 0, sizeof *out);
    if (reply->type == REDIS_REPLY_ERROR) {
        *why = g_strdup_printf("CLUSTER SLOTS: %s", reply->str);
        return FALSE;
    }
    if (reply->type != REDIS_REPLY_ARRAY) {
        *why = g_strdup("CLUSTER SLOTS: not an array");
        return FALSE;
    }
    out->ranges = g_new0(sluice__cluster_range, MAX(reply->elements, 1));
    for (gsize i = 0; i < reply->elements; i++) {
        const redisReply *r = reply->element[i];
        const char *wrong = NULL;
        if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || !is_slot(r->element[0]) ||
            !is_slot(r->element[1]) || r->element[0]->integer > r->element[1]->integer)
            wrong = "a range that is not [first slot, last slot, master, ...]";
        else
            wrong = parse_node(r->element[2], asked_host, &out->ranges[out->n_ranges]);
        if (wrong) {
            *why = g_strdup_printf("CLUSTER SLOTS: %s", wrong);
            sluice__cluster_slots_clear(out);
            return FALSE;
        }
        out->ranges[out->n_ranges].first = (guint)r->element[0]->integer;
        out->ranges[out->n_ranges].last = (guint)r->element[1]->integer;
        out->n_ranges++;
    }
    return TRUE;
}

void sluice__cluster_slots_clear(sluice__cluster_slots *slots)
{
    for (guint i = 0; i < slots->n_ranges; i++) {
        g_free(slots->ranges[i].host);
        g_free(slots->ranges[i].id);
    }
    g_free(slots->ranges);
    memset(slots, 0, sizeof *slots);
}

void sluice__cluster_map_init(sluice__cluster_map *map)
{
    sluice__cluster_map_set(map, 0, SLUICE__CLUSTER_SLOTS - 1, SLUICE__CLUSTER_NO_NODE);
}

void sluice__cluster_map_set(sluice__cluster_map *map, guint first, guint last, gint node)
{
    g_return_if_fail(first <= last && last < SLUICE__CLUSTER_SLOTS);
    for (guint slot = first; slot <= last; slot++)
        g_atomic_int_set(&map->owner[slot], node);
}

gboolean sluice__cluster_redirect_parse(const char *text, gsize len, sluice__cluster_redirect *out)
{
    const char *p = text, *end = text + len;
    if (len > 6 && memcmp(text, "MOVED ", 6) == 0) {
        out->kind = SLUICE__CLUSTER_MOVED;
        p += 6;
    } else if (len > 4 && memcmp(text, "ASK ", 4) == 0) {
        out->kind = SLUICE__CLUSTER_ASK;
        p += 4;
    } else {
        return FALSE;
    }
    guint slot = 0;
    const char *digits = p;
    while (p < end && g_ascii_isdigit(*p) && slot < SLUICE__CLUSTER_SLOTS)
        slot = slot * 10 + (guint)(*p++ - '0');
    if (p == digits || p >= end || *p != ' ' || slot >= SLUICE__CLUSTER_SLOTS)
        return FALSE;
    const char *address = p + 1, *colon = NULL; /* the last colon: IPv6 has more */
    for (const char *q = address; q < end; q++)
        if (*q == ':')
            colon = q;
    if (!colon || (gsize)(colon - address) >= sizeof out->host || colon + 1 == end)
        return FALSE;
    gint64 port = 0;
    for (const char *q = colon + 1; q < end; q++) {
        if (!g_ascii_isdigit(*q) || (port = port * 10 + (*q - '0')) > 65535)
            return FALSE;
    }
    if (port < 1)
        return FALSE;
    memcpy(out->host, address, colon - address);
    out->host[colon - address] = '\0';
    out->slot = slot;
    out->port = (int)port;
    return TRUE;
}
