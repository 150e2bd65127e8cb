/* SPDX-License-Identifier: MIT */
/* How long decisions stop when a Sentinel-managed master dies: from its death to the
 * Sentinels' +switch-master, and from there to the first decision on the new master.
 *
 * Each round starts a master, its replica and three Sentinels on free loopback ports
 * (tests/support/redis_sentinel.c: down-after-milliseconds 400, failover-timeout 2000), has 4
 * threads decide as fast as they can through a redis+sentinel:// URL (timeout 50ms,
 * on_error = deny), kills the master (SIGKILL), and times: the first +switch-master
 * any Sentinel publishes (a subscription of the benchmark's own), and the first
 * decision the new master makes after calls began to fail. */
#include <sluice/sluice.h>
#include <stdio.h>
#include <stdlib.h>

#include "failover.h"
#include "redis_sentinel.h"
#include "setup.h"
#include "timing.h"

#define ROUNDS  3
#define THREADS 4

/* One failover; FALSE when it did not happen within 20 s. */
static gboolean one_round(int n, double *to_switch_ms, double *to_resume_ms)
{
    test_sentinel *s = test_sentinel_start(NULL);
    g_autofree char *url = test_sentinel_url(s);
    g_autofree char *ini =
        g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\ntimeout = 50ms\non_error = deny\n"
                        "[limit:bench]\nalgorithm = token_bucket\nlimit = 1000000\nwindow = 1s\n",
                        url);
    g_autoptr(GError) error = NULL;
    if (!bench_init(ini, &error)) {
        fprintf(stderr, "bench_sentinel_failover: %s\n", error->message);
        exit(1);
    }
    redisContext *subs[3];
    for (int i = 0; i < 3; i++)
        subs[i] = test_sentinel_subscribe(s, i);
    failover_run r = {.name = "bench"};
    failover_start(&r, THREADS);
    g_usleep(300000);

    gint64 killed = failover_killed(&r), switched = 0;
    test_redis_kill(s->node[0]);
    gboolean ok = test_sentinel_wait_switch(s, subs, 3, 20 * G_USEC_PER_SEC, &switched) != NULL;
    gint64 resumed = ok ? failover_wait_resumed(&r, 2 * G_USEC_PER_SEC) : 0;
    failover_stop(&r);
    sluice_shutdown();
    failover_clear(&r);
    ok = ok && resumed > 0;
    *to_switch_ms = (double)(switched - killed) / 1000;
    *to_resume_ms = (double)(resumed - killed) / 1000;
    printf("round %d: %7.0f ms to +switch-master, %7.0f ms to the first decision "
           "(%+.1f ms from the switch); %d calls, %d failed\n",
           n, *to_switch_ms, *to_resume_ms, *to_resume_ms - *to_switch_ms, r.calls, r.failed);
    for (int i = 0; i < 3; i++)
        redisFree(subs[i]);
    test_sentinel_stop(s);
    return ok;
}

int main(void)
{
    bench_print_version("redis (redis+sentinel://)");
    printf("master killed while %d threads decide; Sentinels: down-after-milliseconds 400, "
           "failover-timeout 2000, quorum 2 of 3\n",
           THREADS);
    double to_switch[ROUNDS], to_resume[ROUNDS], after_switch[ROUNDS];
    for (int n = 0; n < ROUNDS; n++) {
        if (!one_round(n + 1, &to_switch[n], &to_resume[n])) {
            fprintf(stderr, "bench_sentinel_failover: no failover, or no decision after it\n");
            return 1;
        }
        after_switch[n] = to_resume[n] - to_switch[n];
    }
    printf("median of %d: %.0f ms from the master's death to decisions resuming, "
           "%.1f ms of it after the Sentinels' +switch-master\n",
           ROUNDS, bench_median(to_resume, ROUNDS), bench_median(after_switch, ROUNDS));
    return 0;
}
