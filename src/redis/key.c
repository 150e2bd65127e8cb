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
