/* SPDX-License-Identifier: MIT */
/* A flood of denied calls on the redis backend, with the denial cache on and off
 * in the same run: decisions per second, and the script calls per second that
 * reach Redis (INFO commandstats). Starts its own redis-server on loopback. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <sluice/sluice.h>

#include "redis_server.h"
#include "setup.h"

#define RUN_US (2 * G_USEC_PER_SEC)

static gint64 end_at;
static gint64 decided;

static gpointer flood(gpointer data)
{
    (void)data;
    gint64 n = 0;
    while ((n & 63) != 0 || g_get_monotonic_time() < end_at) {
        sluice_acquire("flood", "attacker", 1, NULL, NULL);
        n++;
    }
    __atomic_fetch_add(&decided, n, __ATOMIC_RELAXED);
    return NULL;
}

/* One run: `threads` threads flood a limit that denies them all for RUN_US. */
static void run(test_redis *redis, gboolean cache, int threads, double *per_s, double *redis_per_s)
{
    g_autofree char *url = test_redis_url(redis);
    g_autofree char *ini =
        g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\ntimeout = 2s\ndenial_cache = %s\n"
                        "[limit:flood]\nalgorithm = fixed_window\nlimit = 1\nwindow = 1h\n",
                        url, cache ? "true" : "false");
    g_autoptr(GError) error = NULL;
    if (!bench_init(ini, &error)) {
        fprintf(stderr, "bench_denial_flood: %s\n", error->message);
        exit(1);
    }
    freeReplyObject(test_redis_command(redis, "FLUSHALL"));
    sluice_acquire("flood", "attacker", 1, NULL, NULL); /* the one admitted */
    gint64 before = test_redis_script_calls(redis);
    decided = 0;
    gint64 start = g_get_monotonic_time();
    end_at = start + RUN_US;
    GThread *t[64];
    for (int i = 0; i < threads; i++)
        t[i] = g_thread_new("flood", flood, NULL);
    for (int i = 0; i < threads; i++)
        g_thread_join(t[i]);
    double seconds = (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;
    *per_s = (double)decided / seconds;
    *redis_per_s = (double)(test_redis_script_calls(redis) - before) / seconds;
    sluice_shutdown();
}

int main(void)
{
    test_redis *redis = test_redis_start(NULL);
    printf("Denied flood on the redis backend (one limit, one key, denied for the whole run;\n"
           "%d s per row; Redis commands: script calls that reached the server)\n\n",
           (int)(RUN_US / G_USEC_PER_SEC));
    printf("%-8s %-13s %14s %18s %10s %10s\n", "threads", "denial_cache", "decisions/s",
           "Redis commands/s", "x rate", "/ commands");
    static const int threads[] = {1, 16};
    for (guint i = 0; i < G_N_ELEMENTS(threads); i++) {
        double off, off_redis, on, on_redis;
        run(redis, FALSE, threads[i], &off, &off_redis);
        run(redis, TRUE, threads[i], &on, &on_redis);
        printf("%-8d %-13s %14.0f %18.0f %10s %10s\n", threads[i], "off (baseline)", off, off_redis,
               "1.0x", "1.0x");
        g_autofree char *speed = g_strdup_printf("%.0fx", on / off);
        g_autofree char *fewer =
            g_strdup_printf("%.0fx", on_redis > 0 ? off_redis / on_redis : off_redis * 2);
        printf("%-8d %-13s %14.0f %18.1f %10s %10s\n", threads[i], "on", on, on_redis, speed,
               fewer);
    }
    printf("\nTarget: with the cache, at least 100x the decisions/s of the round trips, and "
           "Redis commands\nfalling by at least as much.\n");
    test_redis_stop(redis);
    return 0;
}
