/* SPDX-License-Identifier: MIT */
/* redis_instructions: n decisions of one algorithm's common path on a redis-server, one
 * at a time, for bench/redis_instructions.sh to count what they cost the server under
 * callgrind.
 *
 *   redis_instructions PORT ALGORITHM N   (ALGORITHM: fixed_window, sliding_window,
 *                                          token_bucket, gcra, sliding_log)
 *
 * Each limit never denies (bench_redis's rules per algorithm). sluice loads its library
 * as it always does; one decision first makes the key's state, then N are made. It
 * prints how many were admitted, exits 1 when sluice cannot be set up or a decision
 * fails or is denied, 2 on bad arguments. */
#include <sluice/sluice.h>
#include <stdio.h>
#include <string.h>

#include "setup.h"

/* the limit of each algorithm: as bench_redis.c's keyfile has it, but sliding_log's window is
 * 1 h, so that the log's size does not depend on how fast the server runs under valgrind */
static const char *const rules[][2] = {
    {"fixed_window", "limit = 1000000000000\nwindow = 1h\n"},
    {"sliding_window", "limit = 1000000000\nwindow = 1h\n"},
    {"token_bucket", "limit = 1000000\nwindow = 1s\nburst = 1000000000000\n"},
    {"gcra", "limit = 1000000\nwindow = 1s\nburst = 1000000000000\n"},
    {"sliding_log", "limit = 100000\nwindow = 1h\n"},
};

int main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    const char *rule = NULL;
    guint64 port = 0, n = 0;
    for (gsize i = 0; argc == 4 && i < G_N_ELEMENTS(rules); i++)
        rule = strcmp(rules[i][0], argv[2]) == 0 ? rules[i][1] : rule;
    if (!rule || !g_ascii_string_to_unsigned(argv[1], 10, 1, 65535, &port, NULL) ||
        !g_ascii_string_to_unsigned(argv[3], 10, 1, G_MAXUINT, &n, NULL)) {
        fprintf(stderr, "usage: %s PORT ALGORITHM N   (ALGORITHM:", argv[0]);
        for (gsize i = 0; i < G_N_ELEMENTS(rules); i++)
            fprintf(stderr, " %s", rules[i][0]);
        fprintf(stderr, ")\n");
        return 2;
    }
    /* a generous timeout: the server runs under valgrind */
    g_autofree char *keyfile = g_strdup_printf("[sluice]\nbackend = redis\n"
                                               "redis = redis://127.0.0.1:%u\n"
                                               "timeout = 30s\non_error = deny\n"
                                               "[limit:bench]\nalgorithm = %s\n%sper_key = false\n",
                                               (unsigned)port, argv[2], rule);
    if (!bench_init(keyfile, &error)) {
        fprintf(stderr, "redis_instructions: %s\n", error->message);
        return 1;
    }
    guint64 admitted = 0;
    for (guint64 i = 0; i <= n; i++) { /* the first makes the state */
        sluice_decision d;
        int r = sluice_acquire("bench", NULL, 1, &d, &error);
        if (r != SLUICE_ALLOWED) {
            fprintf(stderr, "redis_instructions: decision %" G_GUINT64_FORMAT " %s: %s\n", i,
                    r == SLUICE_DENIED ? "denied" : "failed", error ? error->message : "");
            sluice_shutdown();
            return 1;
        }
        admitted += i > 0;
    }
    sluice_shutdown();
    printf("%" G_GUINT64_FORMAT "\n", admitted);
    return 0;
}
