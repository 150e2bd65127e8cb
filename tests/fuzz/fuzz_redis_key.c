/* SPDX-License-Identifier: MIT */
/* libFuzzer harness of the Redis key builder: every (name, key) gives keys with
 * exactly one hash tag, and decoding the key gives the name and key back (so
 * different callers never share a key). */
#include <string.h>

#include <glib.h>

#include "fuzz.h"
#include "redis/key.h"

#define PREFIX "p:"

/* The bytes redis_key.h says are escaped. */
static gboolean escaped_byte(guchar c)
{
    return c == '%' || c == '{' || c == '}' || c <= ' ' || c == 0x7f;
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Reads one escaped byte at *p into out; FALSE unless it is in the one form the
 * builder writes (so each byte string has exactly one encoding). */
static gboolean unescape_one(const char **p, GString *out)
{
    guchar c = (guchar) * *p;
    if (c == '%') {
        int hi = hex_value((*p)[1]), lo = hi < 0 ? -1 : hex_value((*p)[2]);
        if (lo < 0 || !escaped_byte((guchar)(hi * 16 + lo)))
            return FALSE;
        g_string_append_c(out, (char)(hi * 16 + lo));
        *p += 3;
        return TRUE;
    }
    if (c == '\0' || escaped_byte(c))
        return FALSE;
    g_string_append_c(out, (char)c);
    *p += 1;
    return TRUE;
}

/* Parses PREFIX{LEN:NAME:KEY} or PREFIX{LEN:NAME#HEX} back; FALSE when state is
 * not in that form. *digest is set (and *key NULL) for a hashed key. */
static gboolean decode(const char *state, GString *name, GString *key, GString *digest)
{
    const char *p = state + strlen(PREFIX);
    if (!g_str_has_prefix(state, PREFIX) || *p++ != '{' || !g_ascii_isdigit(*p))
        return FALSE;
    if (*p == '0' && g_ascii_isdigit(p[1]))
        return FALSE; /* one spelling of each length */
    gsize len = 0;
    for (; g_ascii_isdigit(*p); p++) {
        if (len > 100000)
            return FALSE;
        len = len * 10 + (gsize)(*p - '0');
    }
    if (*p++ != ':')
        return FALSE;
    while (name->len < len)
        if (!unescape_one(&p, name))
            return FALSE;
    if (name->len != len)
        return FALSE;
    char sep = *p++;
    if (sep == ':') {
        while (*p != '}')
            if (!unescape_one(&p, key))
                return FALSE;
    } else if (sep == '#') {
        for (; *p != '}'; p++) {
            if (!g_ascii_isdigit(*p) && !(*p >= 'a' && *p <= 'f'))
                return FALSE;
            g_string_append_c(digest, *p);
        }
        if (digest->len != 64)
            return FALSE;
    } else {
        return FALSE;
    }
    return p[0] == '}' && p[1] == '\0';
}

static gsize count_char(const char *s, char c)
{
    gsize n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

/* Checks the keys of (name, key) and returns its state key (g_free it). */
static char *check(const char *name, const char *key)
{
    sluice__redis_keys keys;
    sluice__redis_keys_build(&keys, PREFIX, name, key);
    const char *state = keys.state;

    /* exactly one balanced hash tag, right after the prefix, the same in both keys */
    FUZZ_ASSERT(count_char(state, '{') == 1 && count_char(state, '}') == 1, "%s", state);
    FUZZ_ASSERT(state[strlen(PREFIX)] == '{' && g_str_has_suffix(state, "}"), "%s", state);
    FUZZ_ASSERT(strlen(state) > strlen(PREFIX) + 2, "empty tag: %s", state);
    FUZZ_ASSERT(g_str_has_prefix(keys.seq, state) && strcmp(keys.seq + strlen(state), ":seq") == 0,
                "%s", keys.seq);

    /* the key names the caller, and only it */
    g_autoptr(GString) n = g_string_new(NULL), k = g_string_new(NULL), d = g_string_new(NULL);
    FUZZ_ASSERT(decode(state, n, k, d), "not in the documented form: %s", state);
    FUZZ_ASSERT(strcmp(n->str, name) == 0, "name %s decoded from %s", name, state);
    gsize key_len = key ? strlen(key) : 0;
    if (key_len > SLUICE__REDIS_KEY_MAX_PLAIN) {
        g_autofree char *digest = g_compute_checksum_for_string(G_CHECKSUM_SHA256, key, -1);
        FUZZ_ASSERT(strcmp(d->str, digest) == 0, "%s", state);
    } else {
        FUZZ_ASSERT(d->len == 0 && strcmp(k->str, key ? key : "") == 0, "%s", state);
    }
    g_free(keys.seq);
    return keys.state;
}

/* Input: the first byte is the name's length (capped to what follows), then the
 * name, then the key; both end at a NUL byte. An odd first byte and nothing after
 * the name is the NULL key. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    gsize name_len = MIN((gsize)data[0], size - 1);
    g_autofree char *name = g_strndup((const char *)data + 1, name_len);
    g_autofree char *key = g_strndup((const char *)data + 1 + name_len, size - 1 - name_len);
    const char *k = (*key == '\0' && (data[0] & 1)) ? NULL : key;

    g_autofree char *state = check(name, k);

    /* neighbours: the boundary moved by one byte, and the key's last byte changed */
    if (*key) {
        g_autofree char *longer_name = g_strdup_printf("%s%c", name, key[0]);
        g_autofree char *other = check(longer_name, key + 1);
        FUZZ_ASSERT(strcmp(state, other) != 0, "(%s, %s) and its neighbour share %s", name, key,
                    state);
        g_autofree char *changed = g_strdup(key);
        gsize last = strlen(changed) - 1;
        changed[last] = changed[last] == 'a' ? 'b' : 'a';
        g_autofree char *third = check(name, changed);
        FUZZ_ASSERT(strcmp(state, third) != 0, "two keys share %s", state);
    }
    return 0;
}
