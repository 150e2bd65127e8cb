/* SPDX-License-Identifier: MIT */
/* bench_cluster: one redis-server next to a Redis Cluster of 3 masters on the same machine, in
 * one run: decisions a second on the same threads over the same keys (spread over the slots),
 * each master's share of the script calls, and the time from a master's death to decisions on
 * its slots resuming.
 *
 * Throughput: a redis-server and a Cluster of 3 masters (tests/support/redis_server.c,
 * tests/support/redis_cluster.c) run side by side; each round runs THREADS threads calling
 * sluice_acquire over KEYS callers of one per-key token_bucket (every call an admission)
 * for RUN_NS against each in turn (one first in odd rounds, the other in even ones), and
 * reads INFO commandstats on every server before and after. Failover: each round starts a Cluster
 * of 3 masters with a replica each (cluster-node-timeout 500, cluster-require-full-coverage no),
 * has FAILOVER_THREADS threads decide over the keys (timeout 50ms, on_error = deny), kills a master
 * (SIGKILL) and times its replica saying it is master (ROLE) and the first decision on a caller
 * whose calls failed after the kill. Exits 0 whatever the figures, 1 when it cannot set up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <glib.h>
#include <sluice/sluice.h>

#include "failover.h"
#include "redis_cluster.h"
#include "redis_server.h"
#include "setup.h"
#include "timing.h"

#define RUN_NS           (2 * G_GINT64_CONSTANT(1000000000))
#define ROUNDS           5
#define THREADS          16
#define KEYS             1024 /* callers: their slots spread over the masters */
#define MASTERS          3
#define TARGET_RATE_X    0.8 /* the Cluster's decisions a second over one server's, at least */
#define TARGET_SHARE_X   0.2 /* each master's share of the calls within 1/3 ± this × 1/3 */
#define FAILOVER_ROUNDS  3
#define FAILOVER_THREADS 4
#define FAILOVER_KEYS    48

static char keys[KEYS][16];

static const char rule[] = "[limit:b]\nalgorithm = token_bucket\nlimit = 1000000\nwindow = 1s\n"
                           "burst = 1000000000000\n";
/* the failover's: its keys last the hour (a token_bucket's expire once full), so that the
 * keys on a master tell whose callers it serves */
static const char lasting_rule[] = "[limit:b]\nalgorithm = fixed_window\nlimit = 1000000000\n"
                                   "window = 1h\n";

/* ---- throughput ------------------------------------------------------------------------- */

typedef struct {
    gint64 until;
    gint next;             /* the next thread's index (atomic) */
    gint64 calls, refused; /* atomic: every call, and those not admitted */
} run;

static gpointer decide(gpointer p)
{
    run *r = p;
    guint k = (guint)g_atomic_int_add(&r->next, 1) * (KEYS / THREADS);
    gint64 calls = 0, refused = 0;
    while (bench_now_ns() < r->until) {
        refused += sluice_acquire("b", keys[k++ % KEYS], 1, NULL, NULL) != SLUICE_ALLOWED;
        calls++;
    }
    g_atomic_pointer_add(&r->calls, calls);
    g_atomic_pointer_add(&r->refused, refused);
    return NULL;
}

typedef struct {
    double rate;           /* decisions a second */
    double server_cpu;     /* the servers' CPU, summed, as a share of one CPU */
    double client_us;      /* this process's CPU per decision, µs */
    double share[MASTERS]; /* each server's share of the script calls */
    double per_read;       /* script calls per read of the servers from their clients */
} row;

/* The reads server has made from its clients' connections (INFO stats), or -1. */
static gint64 reads_processed(const test_redis *server)
{
    redisReply *r = test_redis_command(server, "INFO stats");
    const char *at =
        r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "\ntotal_reads_processed:") : NULL;
    gint64 n = at ? g_ascii_strtoll(at + strlen("\ntotal_reads_processed:"), NULL, 10) : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* THREADS threads on url for RUN_NS; the figures of the n servers behind it. */
static gboolean measure(const char *url, test_redis *const *servers, int n, row *out)
{
    g_autofree char *ini = g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\ntimeout = 1s\n"
                                           "denial_cache = false\non_error = deny\n%s",
                                           url, rule);
    g_autoptr(GError) error = NULL;
    if (!bench_init(ini, &error)) {
        fprintf(stderr, "bench_cluster: %s\n", error->message);
        return FALSE;
    }
    for (int k = 0; k < KEYS; k++) /* connected, scripts loaded, every caller's key written */
        sluice_acquire("b", keys[k], 1, NULL, NULL);
    gint64 calls0[MASTERS], cpu0[MASTERS], reads0[MASTERS], server_cpu = 0, total = 0, reads = 0;
    for (int i = 0; i < n; i++) {
        calls0[i] = test_redis_script_calls(servers[i]);
        cpu0[i] = bench_process_cpu_ns(servers[i]->pid);
        reads0[i] = reads_processed(servers[i]);
    }
    gint64 client0 = bench_rusage_ns(RUSAGE_SELF), start = bench_now_ns();
    run r = {.until = start + RUN_NS};
    GThread *threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        threads[i] = g_thread_new("decide", decide, &r);
    for (int i = 0; i < THREADS; i++)
        g_thread_join(threads[i]);
    double seconds = (bench_now_ns() - start) / 1e9;
    gint64 client = bench_rusage_ns(RUSAGE_SELF) - client0;
    sluice_shutdown();
    for (int i = 0; i < n; i++) {
        calls0[i] = test_redis_script_calls(servers[i]) - calls0[i];
        total += calls0[i];
        server_cpu += bench_process_cpu_ns(servers[i]->pid) - cpu0[i];
        reads += reads_processed(servers[i]) - reads0[i];
    }
    out->per_read = reads > 0 ? (double)total / reads : 0;
    for (int i = 0; i < n; i++)
        out->share[i] = total > 0 ? (double)calls0[i] / total : 0;
    out->rate = r.calls / seconds;
    out->server_cpu = server_cpu / 1e9 / seconds;
    out->client_us = r.calls > 0 ? client / 1e3 / r.calls : 0;
    if (r.refused)
        printf("  warning: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT " calls not admitted\n",
               r.refused, r.calls);
    return TRUE;
}

static void print_row(const char *what, int round, const row *f, int n)
{
    printf("%-14s %5d %12.0f %8.0f%% %10.1f %10.1f  ", what, round, f->rate, 100 * f->server_cpu,
           f->client_us, f->per_read);
    for (int i = 0; i < n; i++)
        printf(" %6.1f%%", 100 * f->share[i]);
    printf("\n");
}

/* The rounds of one server and the Cluster, the order alternating from round to round so
 * that load coming or going favours neither; FALSE when sluice cannot be set up. */
static gboolean throughput(void)
{
    g_autoptr(GError) error = NULL;
    test_redis *server = test_redis_try_start(NULL, &error);
    if (!server) {
        fprintf(stderr, "bench_cluster: redis-server: %s\n", error->message);
        return FALSE;
    }
    test_cluster *cluster = test_cluster_start(&(test_cluster_options){.masters = MASTERS});
    g_autofree char *one_url = test_redis_url(server);
    g_autofree char *cluster_url = test_cluster_url(cluster);
    g_autofree char *loadavg = bench_load_average();
    printf("one redis-server and a Cluster of %d masters (no replicas) on this machine; %d "
           "threads, %d callers of one per-key token_bucket, every decision an admission; "
           "%.1f s a row; load average %s\n",
           MASTERS, THREADS, KEYS, RUN_NS / 1e9, loadavg);
    printf("%-14s %5s %12s %9s %10s %10s   %s\n", "target", "round", "decisions/s", "srv CPU",
           "cli µs/dec", "calls/read", "share of the script calls per server");
    double rate[2][ROUNDS], cpu[2][ROUNDS], per_read[2][ROUNDS], ratio[ROUNDS], worst_share[ROUNDS];
    gboolean ok = TRUE;
    for (int round = 0; round < ROUNDS && ok; round++) {
        row one = {0}, spread = {0};
        gboolean one_first = round % 2 == 0;
        ok = one_first ? measure(one_url, &server, 1, &one) &&
                             measure(cluster_url, cluster->node, MASTERS, &spread)
                       : measure(cluster_url, cluster->node, MASTERS, &spread) &&
                             measure(one_url, &server, 1, &one);
        if (!ok)
            break;
        if (one_first)
            print_row("one server", round + 1, &one, 1);
        print_row("cluster", round + 1, &spread, MASTERS);
        if (!one_first)
            print_row("one server", round + 1, &one, 1);
        rate[0][round] = one.rate;
        rate[1][round] = spread.rate;
        per_read[0][round] = one.per_read;
        per_read[1][round] = spread.per_read;
        cpu[0][round] = one.client_us + 1e6 * one.server_cpu / one.rate;
        cpu[1][round] = spread.client_us + 1e6 * spread.server_cpu / spread.rate;
        ratio[round] = spread.rate / one.rate;
        worst_share[round] = 0;
        for (int m = 0; m < MASTERS; m++)
            worst_share[round] =
                MAX(worst_share[round], ABS(spread.share[m] * MASTERS - 1)); /* off 1/3, × 3 */
    }
    if (ok) {
        double x = bench_median(ratio, ROUNDS), off = bench_max(worst_share, ROUNDS);
        printf("\nmedians of %d rounds: one server %.0f/s, cluster %.0f/s: %.2fx "
               "(target >= %.1fx: %s)\n",
               ROUNDS, bench_median(rate[0], ROUNDS), bench_median(rate[1], ROUNDS), x,
               TARGET_RATE_X, x >= TARGET_RATE_X ? "PASS" : "MISS");
        printf("the share of the calls furthest from a third: %.1f%% of a third off "
               "(target <= %.0f%%: %s)\n",
               100 * off, 100 * TARGET_SHARE_X, off <= TARGET_SHARE_X ? "PASS" : "MISS");
        printf("CPU per decision, client + servers (medians): one server %.1f µs, cluster "
               "%.1f µs: %.2fx (where the CPUs are the limit, the rate follows its inverse)\n",
               bench_median(cpu[0], ROUNDS), bench_median(cpu[1], ROUNDS),
               bench_median(cpu[1], ROUNDS) / bench_median(cpu[0], ROUNDS));
        printf("script calls a server reads from its clients at once (medians): one server "
               "%.1f, each master %.1f\n",
               bench_median(per_read[0], ROUNDS), bench_median(per_read[1], ROUNDS));
        g_autofree char *after = bench_load_average();
        printf("load average at the end: %s\n", after);
    }
    test_cluster_stop(cluster);
    test_redis_stop(server);
    return ok;
}

/* ---- failover --------------------------------------------------------------------------- */

/* Marks the callers whose key node holds (its keys end in ":CALLER}"); how many. */
static int callers_on(const test_cluster *c, const test_redis *node, gboolean *on)
{
    redisReply *r = test_cluster_command(c, node, "KEYS *");
    int n = 0;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const char *end = strrchr(r->element[i]->str, '}');
        for (int k = 0; end && k < FAILOVER_KEYS; k++) {
            size_t len = strlen(keys[k]);
            if ((size_t)(end - r->element[i]->str) > len && end[-(long)len - 1] == ':' &&
                strncmp(end - len, keys[k], len) == 0 && !on[k]) {
                on[k] = TRUE;
                n++;
            }
        }
    }
    if (r)
        freeReplyObject(r);
    return n;
}

/* One failover; FALSE when it did not happen within 20 s, or no decision followed. */
static gboolean one_failover(int n, double *to_master_ms, double *to_resume_ms)
{
    test_cluster_options o = {
        .masters = MASTERS, .replicas = 1, .node_timeout_ms = 500, .partial = TRUE};
    test_cluster *c = test_cluster_start(&o);
    g_autofree char *url = test_cluster_url(c);
    g_autofree char *ini = g_strdup_printf(
        "[sluice]\nbackend = redis\nredis = %s\ntimeout = 50ms\non_error = deny\n%s", url,
        lasting_rule);
    g_autoptr(GError) error = NULL;
    if (!bench_init(ini, &error)) {
        fprintf(stderr, "bench_cluster: %s\n", error->message);
        exit(1);
    }
    static char *callers[FAILOVER_KEYS];
    gboolean on_victim[FAILOVER_KEYS] = {FALSE};
    for (int k = 0; k < FAILOVER_KEYS; k++) { /* every caller's key written */
        callers[k] = keys[k];
        sluice_acquire("b", keys[k], 1, NULL, NULL);
    }
    test_redis *victim = c->node[0], *replica = c->node[MASTERS]; /* master 0's replica */
    int victims = callers_on(c, victim, on_victim);
    failover_run r = {
        .name = "b", .keys = callers, .n_keys = FAILOVER_KEYS, .on_victim = on_victim};
    failover_start(&r, FAILOVER_THREADS);
    g_usleep(300000);

    gint64 killed = failover_killed(&r), promoted = 0;
    test_redis_kill(victim);
    while (!promoted && g_get_monotonic_time() - killed < 20 * G_USEC_PER_SEC) {
        if (test_cluster_is_master(c, replica))
            promoted = g_get_monotonic_time();
        else
            g_usleep(5000);
    }
    gint64 resumed = promoted ? failover_wait_resumed(&r, 2 * G_USEC_PER_SEC) : 0;
    failover_stop(&r);
    sluice_shutdown();
    *to_master_ms = (double)(promoted - killed) / 1000;
    *to_resume_ms = (double)(resumed - killed) / 1000;
    printf("round %d: %5.0f ms to the replica saying master, %5.0f ms to the first decision on "
           "its slots (%+.1f ms from that); %d calls, %d failed (%d of them on the %d callers "
           "of other masters)\n",
           n, *to_master_ms, *to_resume_ms, *to_resume_ms - *to_master_ms, r.calls, r.failed,
           r.failed_elsewhere, FAILOVER_KEYS - victims);
    if (r.first_elsewhere)
        printf("  the first on another master: %s\n", r.first_elsewhere);
    failover_clear(&r);
    test_cluster_stop(c);
    return promoted > 0 && resumed > 0;
}

static gboolean failover(void)
{
    printf("\nfailover: master killed while %d threads decide over %d callers (timeout 50ms, "
           "on_error = deny); %d masters with a replica each, cluster-node-timeout 500, "
           "cluster-require-full-coverage no\n",
           FAILOVER_THREADS, FAILOVER_KEYS, MASTERS);
    double to_master[FAILOVER_ROUNDS], to_resume[FAILOVER_ROUNDS], after[FAILOVER_ROUNDS];
    for (int n = 0; n < FAILOVER_ROUNDS; n++) {
        if (!one_failover(n + 1, &to_master[n], &to_resume[n])) {
            fprintf(stderr, "bench_cluster: no failover, or no decision after it\n");
            return FALSE;
        }
        after[n] = to_resume[n] - to_master[n];
    }
    printf("median of %d: %.0f ms from the master's death to decisions on its slots resuming, "
           "%.1f ms of it after its replica said master\n",
           FAILOVER_ROUNDS, bench_median(to_resume, FAILOVER_ROUNDS),
           bench_median(after, FAILOVER_ROUNDS));
    return TRUE;
}

int main(void)
{
    for (int k = 0; k < KEYS; k++)
        g_snprintf(keys[k], sizeof keys[k], "user%d", k);
    bench_print_version("redis (redis:// and redis+cluster://)");
    return throughput() && failover() ? 0 : 1;
}
