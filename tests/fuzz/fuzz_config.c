/* SPDX-License-Identifier: MIT */
/* libFuzzer harness of keyfile validation: any bytes are refused with a readable
 * error or give a configuration whose every value is within its documented bounds. */
#include <string.h>

#include <glib.h>
#include <sluice/error.h>

#include "config.h"
#include "fuzz.h"
#include "redis/key.h"
#include "redis/url.h"
#include "value.h"

static void check_rule(const char *name, const sluice__rule *r, const sluice__config *c)
{
    FUZZ_ASSERT(*name && g_utf8_validate(name, -1, NULL), "rule name");
    FUZZ_ASSERT(r->algorithm >= SLUICE__FIXED_WINDOW && r->algorithm < SLUICE__ALGORITHMS,
                "[limit:%s] algorithm %d", name, r->algorithm);
    FUZZ_ASSERT(r->on_error == c->on_error, "[limit:%s] on_error", name);
    FUZZ_ASSERT(r->shadow == TRUE || r->shadow == FALSE, "[limit:%s] shadow", name);
    FUZZ_ASSERT(r->per_key == TRUE || r->per_key == FALSE, "[limit:%s] per_key", name);
    FUZZ_ASSERT(r->limit >= 1 && r->limit <= SLUICE__MAX_PERMITS, "[limit:%s] limit", name);
    FUZZ_ASSERT(r->burst >= 1 && r->burst <= SLUICE__MAX_PERMITS, "[limit:%s] burst", name);
    if (r->algorithm == SLUICE__ADAPTIVE) { /* no window; calls in flight between two bounds */
        FUZZ_ASSERT(r->window_us == 0, "[limit:%s] adaptive window", name);
        FUZZ_ASSERT(r->limit <= SLUICE__MAX_LOGGED_PERMITS, "[limit:%s] adaptive limit", name);
        FUZZ_ASSERT(r->min_limit >= 1 && r->min_limit <= r->limit, "[limit:%s] min_limit", name);
        FUZZ_ASSERT(r->controller >= SLUICE__CONTROLLER_GRADIENT &&
                        r->controller <= SLUICE__CONTROLLER_AIMD,
                    "[limit:%s] controller %d", name, r->controller);
        FUZZ_ASSERT(!r->per_key, "[limit:%s] adaptive per_key", name);
    } else {
        FUZZ_ASSERT(r->window_us >= 1000 && r->window_us <= SLUICE__MAX_DURATION_US,
                    "[limit:%s] window", name);
    }
    FUZZ_ASSERT(r->wait_us >= 0 && r->wait_us <= SLUICE__MAX_DURATION_US, "[limit:%s] wait", name);
    switch (r->algorithm) {
    case SLUICE__SLIDING_WINDOW: /* limit × window in ms < 2^52 */
        FUZZ_ASSERT(r->limit <= (G_GINT64_CONSTANT(1) << 52) / (r->window_us / 1000),
                    "[limit:%s] sliding_window overflow", name);
        break;
    case SLUICE__TOKEN_BUCKET:
    case SLUICE__GCRA: /* any rate; a full refill, burst × window / limit, in 36500d */
        FUZZ_ASSERT((unsigned __int128)r->burst * (unsigned __int128)r->window_us <=
                        (unsigned __int128)SLUICE__MAX_DURATION_US * (unsigned __int128)r->limit,
                    "[limit:%s] refill", name);
        break;
    default:
        FUZZ_ASSERT(r->burst == r->limit, "[limit:%s] burst without a bucket", name);
        break;
    }
    FUZZ_ASSERT(!r->epoch || r->algorithm == SLUICE__FIXED_WINDOW, "[limit:%s] anchor", name);
    FUZZ_ASSERT(r->n_bands + r->n_shadow <= SLUICE__MAX_BANDS, "[limit:%s] bands", name);
    FUZZ_ASSERT(r->n_bands + r->n_shadow == 0 || r->algorithm != SLUICE__CONCURRENCY,
                "[limit:%s] bands on concurrency", name);
    for (guint i = 0; i < r->n_bands + r->n_shadow; i++) {
        const sluice__band *b = &r->bands[i];
        FUZZ_ASSERT(b->limit >= 1 && b->limit <= SLUICE__MAX_PERMITS && b->window_us >= 1000 &&
                        b->window_us <= SLUICE__MAX_DURATION_US && b->burst >= 1 &&
                        b->burst <= SLUICE__MAX_PERMITS,
                    "[limit:%s] band %u", name, i);
    }
}

static void check_config(const sluice__config *c)
{
    FUZZ_ASSERT(strcmp(c->path, "fuzz.ini") == 0, "path");
    FUZZ_ASSERT(c->backend == SLUICE__BACKEND_MEMORY || c->backend == SLUICE__BACKEND_REDIS ||
                    c->backend == SLUICE__BACKEND_SHM,
                "backend %d", c->backend);
    FUZZ_ASSERT(c->on_error >= SLUICE__ON_ERROR_ALLOW && c->on_error <= SLUICE__ON_ERROR_LOCAL,
                "on_error %d", c->on_error);
    FUZZ_ASSERT(c->timeout_us >= 1000 && c->timeout_us <= SLUICE__MAX_DURATION_US, "timeout");
    FUZZ_ASSERT(c->reload == TRUE || c->reload == FALSE, "reload");

    char *why = NULL;
    FUZZ_ASSERT(*c->key_prefix && g_utf8_validate(c->key_prefix, -1, NULL), "key_prefix");
    FUZZ_ASSERT(sluice__redis_key_prefix_check(c->key_prefix, &why), "key_prefix %s", why);
    sluice__redis_url url;
    FUZZ_ASSERT(sluice__redis_url_parse(c->redis_url, &url, &why), "redis %s", why);
    sluice__redis_url_clear(&url);

    GHashTableIter it;
    gpointer name, rule;
    g_hash_table_iter_init(&it, c->rules);
    while (g_hash_table_iter_next(&it, &name, &rule))
        check_rule(name, rule, c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    GError *error = NULL;
    sluice__config *c = sluice__config_parse((const char *)data, size, "fuzz.ini", &error);
    if (!c) {
        FUZZ_ASSERT(error != NULL, "NULL without an error");
        FUZZ_ASSERT(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG), "code %d",
                    error->code);
        g_auto(GStrv) lines = g_strsplit(error->message, "\n", -1);
        for (gsize i = 0; lines[i]; i++) /* one problem per line, each naming the file */
            FUZZ_ASSERT(g_str_has_prefix(lines[i], "fuzz.ini: "), "%s", error->message);
        FUZZ_ASSERT(g_utf8_validate(error->message, -1, NULL), "message not UTF-8");
        g_error_free(error);
        return 0;
    }
    FUZZ_ASSERT(error == NULL, "an error and a result");
    check_config(c);
    sluice__config_free(c);
    return 0;
}
