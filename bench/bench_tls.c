/* SPDX-License-Identifier: MIT */
/* bench_tls: what TLS costs a decision: the same rule on the same redis-server, reached
 * with redis:// (its plaintext port) and rediss:// (its TLS port), in one run.
 *
 * The certificates and the server's TLS arguments are the tests' (tests/support/tls_certs.c:
 * EC P-256, in a temporary directory); the server (tests/support/redis_server.c) listens on
 * both ports. Each round runs, for each
 * URL in turn, 1 thread (the latency of every call: p50, p99) and 16 threads (decisions
 * a second) for RUN_NS each; ROUNDS rounds alternate, and the medians are printed with
 * the ratios TLS / plaintext next to their targets (p50 at most 1.25x, rate at least
 * 0.8x once connected). Beside them, the CPU each decision cost this process and the
 * server (getrusage, /proc/PID/stat): what TLS adds on each side, a figure that
 * other work on the machine moves much less than times. Exits 0 whatever the
 * figures, 1 when it cannot set up. */
#include <sys/resource.h>

#include <stdio.h>
#include <stdlib.h>

#include <glib.h>
#include <sluice/sluice.h>

#include "redis_server.h"
#include "setup.h"
#include "tls_certs.h"
#include "timing.h"

#define RUN_NS    (1500 * G_GINT64_CONSTANT(1000000))
#define ROUNDS    3
#define THREADS   16
#define LATENCIES (1u << 21)

static const char rule[] = "[limit:b]\nalgorithm = token_bucket\nlimit = 1000000\nwindow = 1s\n"
                           "burst = 1000000000000\nper_key = false\n";

typedef struct {
    gint64 until;
    guint32 *latencies; /* 1 thread: each call's, ns */
    gsize n;
    gint64 calls; /* atomic */
} run;

static gpointer decide(gpointer p)
{
    run *r = p;
    gint64 calls = 0;
    for (gint64 now = bench_now_ns(); now < r->until; calls++) {
        sluice_acquire("b", NULL, 1, NULL, NULL);
        gint64 after = bench_now_ns();
        if (r->latencies && r->n < LATENCIES)
            r->latencies[r->n++] = (guint32)MIN(after - now, G_MAXUINT32);
        now = after;
    }
    g_atomic_pointer_add(&r->calls, calls);
    return NULL;
}

/* What one URL measured: 1-thread p50 and p99 (µs), 16-thread decisions a second,
 * and the CPU µs a decision cost this process and the server, with 1 and 16 threads. */
typedef struct {
    double p50, p99, rate;
    double client_1, server_1, client_16, server_16;
} figures;

/* CPU ns of this process and of the server so far. */
typedef struct {
    gint64 client, server;
} cpu;

static cpu cpu_now(GPid server)
{
    return (cpu){bench_rusage_ns(RUSAGE_SELF), bench_process_cpu_ns(server)};
}

/* µs of CPU a decision cost each side since `from`. */
static void cpu_per_decision(cpu from, GPid server, gint64 decisions, double *client, double *srv)
{
    cpu to = cpu_now(server);
    *client = (to.client - from.client) / 1000.0 / MAX(decisions, 1);
    *srv = (to.server - from.server) / 1000.0 / MAX(decisions, 1);
}

/* One URL's figures, against the server whose pid is server. */
static gboolean measure(const char *url, const char *ca, GPid server, figures *f)
{
    g_autofree char *contents = g_strdup_printf(
        "[sluice]\nbackend = redis\nredis = %s\n%s%s%stimeout = 1s\ndenial_cache = false\n"
        "on_error = deny\n%s",
        url, ca ? "tls_ca_file = " : "", ca ? ca : "", ca ? "\n" : "", rule);
    g_autoptr(GError) error = NULL;
    if (!bench_init(contents, &error)) {
        fprintf(stderr, "bench_tls: %s\n", error->message);
        return FALSE;
    }
    sluice_acquire("b", NULL, 1, NULL, NULL); /* connected: the handshake is not timed */
    run one = {.until = bench_now_ns() + RUN_NS, .latencies = g_new(guint32, LATENCIES)};
    cpu before = cpu_now(server);
    decide(&one);
    cpu_per_decision(before, server, one.calls, &f->client_1, &f->server_1);
    bench_sort_u32(one.latencies, one.n);
    f->p50 = bench_quantile(one.latencies, one.n, 0.5) / 1000.0;
    f->p99 = bench_quantile(one.latencies, one.n, 0.99) / 1000.0;
    g_free(one.latencies);
    run many = {.until = bench_now_ns() + RUN_NS};
    gint64 start = bench_now_ns();
    before = cpu_now(server);
    GThread *threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        threads[i] = g_thread_new("decide", decide, &many);
    for (int i = 0; i < THREADS; i++)
        g_thread_join(threads[i]);
    f->rate = many.calls / ((bench_now_ns() - start) / 1e9);
    cpu_per_decision(before, server, many.calls, &f->client_16, &f->server_16);
    sluice_shutdown();
    return TRUE;
}

int main(void)
{
    /* the tests' certificates and server arguments (tests/support/tls_certs.c) */
    g_autofree char *ca = test_tls_file("ca.pem");
    g_auto(GStrv) args = test_tls_server_args("server", "no", "{port1}");
    test_redis_options options = {.args = (const char *const *)args, .more_ports = 1};
    g_autoptr(GError) error = NULL;
    test_redis *server = test_redis_try_start(&options, &error);
    if (!server) {
        fprintf(stderr, "bench_tls: redis-server: %s\n", error->message);
        return 1;
    }
    g_autofree char *plain = g_strdup_printf("redis://127.0.0.1:%d", server->port);
    g_autofree char *tls = g_strdup_printf("rediss://127.0.0.1:%d", test_tls_port(server));

    bench_print_version("redis");
    g_autofree char *loadavg = bench_load_average();
    printf("one redis-server, plaintext port %d and TLS port %d (TLS 1.3, EC P-256); "
           "token_bucket, every decision an admission; load average %s\n",
           server->port, test_tls_port(server), loadavg);
    printf("%-10s %8s %8s %12s  %s   (each row %.1f s a figure)\n", "url", "p50 µs", "p99 µs",
           "16 thr dec/s", "CPU µs a decision, 1 thr / 16 thr: client, server", RUN_NS / 1e9);
    figures f[2][ROUNDS];
    int code = 0;
    for (int round = 0; round < ROUNDS && code == 0; round++) {
        for (int k = 0; k < 2 && code == 0; k++) {
            figures *x = &f[k][round];
            if (!measure(k ? tls : plain, k ? ca : NULL, server->pid, x))
                code = 1;
            else
                printf("%-10s %8.1f %8.1f %12.0f  %6.1f %6.1f / %6.1f %6.1f\n",
                       k ? "rediss://" : "redis://", x->p50, x->p99, x->rate, x->client_1,
                       x->server_1, x->client_16, x->server_16);
        }
    }
    if (code == 0) {
        double m[2][6];
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 6; j++) {
                double v[ROUNDS];
                for (int round = 0; round < ROUNDS; round++) {
                    const figures *x = &f[k][round];
                    const double all[6] = {x->p50,      x->rate,      x->client_1,
                                           x->server_1, x->client_16, x->server_16};
                    v[round] = all[j];
                }
                m[k][j] = bench_median(v, ROUNDS);
            }
        double lat = m[1][0] / m[0][0], thr = m[1][1] / m[0][1];
        printf("\nmedians of %d rounds: p50 %.1f µs plaintext, %.1f µs TLS: %.2fx (target <= "
               "1.25x: %s)\n",
               ROUNDS, m[0][0], m[1][0], lat, lat <= 1.25 ? "PASS" : "MISS");
        printf("16 threads %.0f/s plaintext, %.0f/s TLS: %.2fx (target >= 0.8x: %s)\n", m[0][1],
               m[1][1], thr, thr >= 0.8 ? "PASS" : "MISS");
        printf("CPU a decision, 1 thread: client %.1f -> %.1f µs, server %.1f -> %.1f µs; "
               "16 threads: client %.1f -> %.1f µs, server %.1f -> %.1f µs\n",
               m[0][2], m[1][2], m[0][3], m[1][3], m[0][4], m[1][4], m[0][5], m[1][5]);
        /* one thread waits for every µs of either side: TLS's extra CPU against the p50 */
        printf("TLS's extra CPU a decision, 1 thread, against the plaintext p50: client %+.1f µs "
               "(%.2fx), server %+.1f µs (%.2fx); the p50 target leaves 0.25x\n",
               m[1][2] - m[0][2], (m[1][2] - m[0][2]) / m[0][0], m[1][3] - m[0][3],
               (m[1][3] - m[0][3]) / m[0][0]);
    }
    test_redis_stop(server); /* the certificates go when the process exits */
    return code;
}
