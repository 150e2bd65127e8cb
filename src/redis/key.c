/* SPDX-License-Identifier: MIT */
/* The Redis key names of a limit and a caller: PREFIX{LEN:NAME:KEY}, escaped so
 * that the hash tag is exactly what sluice writes, and long keys hashed. */
#include "redis/key.h"

#include <string.h>

/* A byte that would move the hash tag, break the escaping, or hide in a listing. */
static gboolean needs_escape(guchar c)
{
    return c == '%' || c == '{' || c == '}' || c <= ' ' || c == 0x7f;
}

static void append_escaped(GString *out, const char *text)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const guchar *p = (const guchar *)text; *p; p++) {
        if (needs_escape(*p)) {
            g_string_append_c(out, '%');
            g_string_append_c(out, hex[*p >> 4]);
            g_string_append_c(out, hex[*p & 0xf]);
        } else {
            g_string_append_c(out, (char)*p);
        }
    }
}

void sluice__redis_keys_build(sluice__redis_keys *out, const char *prefix, const char *name,
                              const char *key)
{
    gsize key_len = key ? strlen(key) : 0;
    GString *s = g_string_sized_new(strlen(prefix) + strlen(name) + MIN(key_len, 64) + 24);

    g_string_append(s, prefix);
    g_string_append_printf(s, "{%zu:", strlen(name));
    append_escaped(s, name);
    if (key_len > SLUICE__REDIS_KEY_MAX_PLAIN) {
        g_autofree char *digest =
            g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)key, key_len);
        g_string_append_c(s, '#');
        g_string_append(s, digest);
    } else {
        g_string_append_c(s, ':');
        append_escaped(s, key ? key : "");
    }
    g_string_append_c(s, '}');
    out->seq = g_strconcat(s->str, ":seq", NULL);
    out->state = g_string_free(s, FALSE);
}

void sluice__redis_keys_clear(sluice__redis_keys *keys)
{
    g_clear_pointer(&keys->state, g_free);
    g_clear_pointer(&keys->seq, g_free);
}

gboolean sluice__redis_key_prefix_check(const char *prefix, char **why)
{
    if (strpbrk(prefix, "{}")) {
        *why = g_strdup("holds { or }, which would move the Redis Cluster hash tag; expected "
                        "a prefix without braces, e.g. sluice:");
        return FALSE;
    }
    return TRUE;
}

/* ---- written straight into a command ------------------------------------------------- */

static const char hex_digits[] = "0123456789ABCDEF";

/* The length of text escaped. */
static gsize escaped_len(const char *text)
{
    gsize n = 0;
    for (const guchar *p = (const guchar *)text; *p; p++)
        n += needs_escape(*p) ? 3 : 1;
    return n;
}

static gsize write_escaped(char *out, const char *text)
{
    gsize n = 0;
    for (const guchar *p = (const guchar *)text; *p; p++) {
        if (needs_escape(*p)) {
            out[n++] = '%';
            out[n++] = hex_digits[*p >> 4];
            out[n++] = hex_digits[*p & 0xf];
        } else {
            out[n++] = (char)*p;
        }
    }
    return n;
}

const char *sluice__redis_name_tag(sluice__limiter *limiter)
{
    char *tag = g_atomic_pointer_get(&limiter->redis_tag);
    if (G_LIKELY(tag))
        return tag;
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "{%zu:", strlen(limiter->name));
    append_escaped(s, limiter->name);
    char *fresh = g_string_free(s, FALSE);
    if (g_atomic_pointer_compare_and_exchange(&limiter->redis_tag, NULL, fresh))
        return fresh;
    g_free(fresh); /* another thread made it first */
    return g_atomic_pointer_get(&limiter->redis_tag);
}

gsize sluice__redis_key_size(gsize head_len, const char *key)
{
    gsize key_len = key ? strlen(key) : 0;
    if (key_len > SLUICE__REDIS_KEY_MAX_PLAIN)
        return head_len + 1 + 64 + 1;
    return head_len + 1 + (key ? escaped_len(key) : 0) + 1;
}

gsize sluice__redis_key_write(char *out, const char *prefix, gsize prefix_len, const char *tag,
                              gsize tag_len, const char *key)
{
    gsize n = 0, key_len = key ? strlen(key) : 0;
    memcpy(out, prefix, prefix_len);
    n += prefix_len;
    memcpy(out + n, tag, tag_len);
    n += tag_len;
    if (key_len > SLUICE__REDIS_KEY_MAX_PLAIN) {
        g_autofree char *digest =
            g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)key, key_len);
        out[n++] = '#';
        memcpy(out + n, digest, 64);
        n += 64;
    } else {
        out[n++] = ':';
        n += key ? write_escaped(out + n, key) : 0;
    }
    out[n++] = '}';
    return n;
}
