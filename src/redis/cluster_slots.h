/* SPDX-License-Identifier: MIT */
/* Redis Cluster's slots: the slot of a key, which master serves each slot (from a
 * CLUSTER SLOTS reply, kept up to date by MOVED), and the redirections a node
 * answers with. */
#ifndef SLUICE_REDIS_CLUSTER_SLOTS_H
#define SLUICE_REDIS_CLUSTER_SLOTS_H

#include <glib.h>
#include <hiredis/hiredis.h>

#define SLUICE__CLUSTER_SLOTS   16384
#define SLUICE__CLUSTER_NO_NODE (-1)

/* The slot Redis Cluster puts key (len bytes) in: CRC16 (XMODEM) of its hash tag,
 * the bytes between its first `{` and the first `}` after it when there are any,
 * else of the whole key; modulo 16384. Reads the key once, allocates nothing. */
guint sluice__cluster_key_slot(const char *key, gsize len);

/* One range of a CLUSTER SLOTS reply and the master that serves it. */
typedef struct {
    guint first, last; /* inclusive */
    char *host;        /* the node's preferred endpoint, or the asked host */
    int port;
    char *id; /* its node ID, or NULL when the reply gives none */
} sluice__cluster_range;

typedef struct {
    sluice__cluster_range *ranges;
    guint n_ranges;
} sluice__cluster_slots;

/* Reads a CLUSTER SLOTS reply into out (free with sluice__cluster_slots_clear). A
 * master whose endpoint is unknown (NULL, "" or "?") is at asked_host, the host
 * the reply came from. FALSE and a sentence in *why when it is not such a reply
 * (an error reply: its text). */
gboolean sluice__cluster_slots_parse(const redisReply *reply, const char *asked_host,
                                     sluice__cluster_slots *out, char **why);
void sluice__cluster_slots_clear(sluice__cluster_slots *slots);

/* Which node serves each slot: an index the caller gives meaning to (its table of
 * nodes), or SLUICE__CLUSTER_NO_NODE. Readers need no lock: each entry is read
 * and written atomically, so a reader sees the old owner or the new one. */
typedef struct {
    gint owner[SLUICE__CLUSTER_SLOTS];
} sluice__cluster_map;

/* Every slot served by no node. */
void sluice__cluster_map_init(sluice__cluster_map *map);
/* Slots first..last (inclusive, below 16384) are served by node. */
void sluice__cluster_map_set(sluice__cluster_map *map, guint first, guint last, gint node);

static inline gint sluice__cluster_map_owner(const sluice__cluster_map *map, guint slot)
{
    return g_atomic_int_get(&map->owner[slot]);
}

/* A -MOVED or -ASK reply: "MOVED 3999 127.0.0.1:6381" ("ASK ...", an IPv6 host
 * without brackets, an empty host for the node that answered). */
typedef enum {
    SLUICE__CLUSTER_MOVED,
    SLUICE__CLUSTER_ASK,
} sluice__cluster_redirect_kind;

typedef struct {
    sluice__cluster_redirect_kind kind;
    guint slot;
    char host[256]; /* "" when the reply names none: the node that answered */
    int port;
} sluice__cluster_redirect;

/* TRUE and *out when the error text (a reply's str, without the '-') is a MOVED
 * or ASK redirection; FALSE for any other text. */
gboolean sluice__cluster_redirect_parse(const char *text, gsize len, sluice__cluster_redirect *out);

#endif
