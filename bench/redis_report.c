/* SPDX-License-Identifier: MIT */
/* bench_redis's report: the rows in the order they run, the table, the rounds of the targets'
 * rows and the targets (PASS/MISS). */
#include <stdio.h>
#include <string.h>

#include "bench_redis.h"
#include "setup.h"
#include "timing.h"

void figures_of(figures *f, guint32 *latencies, gsize n, double elapsed, gint64 cpu, gint64 server0,
                gint64 server1)
{
    bench_sort_u32(latencies, n);
    *f = (figures){
        .per_sec = (double)n * 1e9 / elapsed,
        .p50_us = n ? bench_quantile(latencies, n, 0.50) / 1e3 : 0,
        .p99_us = n ? bench_quantile(latencies, n, 0.99) / 1e3 : 0,
        .server_cpu = server0 >= 0 && server1 >= 0 ? (double)(server1 - server0) / elapsed : -1,
        .client_cpu = (double)cpu / elapsed,
        .client_us = n ? (double)cpu / 1e3 / (double)n : 0,
    };
}

/* ---- the table ---------------------------------------------------------------------- */

/* µ is two bytes: the columns that hold it are one wider */
#define ROW_FORMAT "%-44s %-12s %11s %9s %9s %8s %8s %10s\n"

static void print_header(void)
{
    printf("%-44s %-12s %11s %10s %10s %8s %8s %11s\n", "figure", "clients", "requests/s", "p50 µs",
           "p99 µs", "srv CPU", "cli CPU", "cli µs/req");
    printf(ROW_FORMAT, "------", "-------", "----------", "------", "------", "-------", "-------",
           "----------");
}

/* The command sluice sends (FCALL, or EVALSHA without Functions): the rows' labels say
 * EVALSHA for it. */
static const char *call_name = "EVALSHA";

static void print_row(const char *label, const char *clients, const figures *f)
{
    g_autofree char *figure = NULL;
    const char *at = strstr(label, "EVALSHA");
    figure = at ? g_strdup_printf("%.*s%s%s", (int)(at - label), label, call_name, at + 7)
                : g_strdup(label);
    char per_sec[32], p50[32], p99[32], server_cpu[16] = "?", client_cpu[16], client_us[16];
    g_snprintf(per_sec, sizeof per_sec, "%.0f", f->per_sec);
    g_snprintf(p50, sizeof p50, "%.1f", f->p50_us);
    g_snprintf(p99, sizeof p99, "%.1f", f->p99_us);
    if (f->server_cpu >= 0)
        g_snprintf(server_cpu, sizeof server_cpu, "%.0f%%", 100 * f->server_cpu);
    g_snprintf(client_cpu, sizeof client_cpu, "%.0f%%", 100 * f->client_cpu);
    g_snprintf(client_us, sizeof client_us, "%.1f", f->client_us);
    printf(ROW_FORMAT, figure, clients, per_sec, p50, p99, server_cpu, client_cpu, client_us);
    fflush(stdout);
}

/* ---- the rows, the rounds, the targets ---------------------------------------------- */

/* The rows, in the order they run: each concurrency's redis-benchmark figures next to
 * sluice's, so that the rows compared ran close together in time. */
enum {
    PING1,
    EVAL1,
    HPING1,
    HEVAL1,
    SLUICE1,
    PING16,
    EVAL16,
    HEVAL16,
    SLUICE16,
    PREF16,
    PINGP,
    EVALP,
    ASYNCP,
    FIGURES
};

typedef enum { TOOL_PING, TOOL_EVALSHA, THREADS, ASYNC } source;

static const struct {
    const char *figure, *clients;
    source source;
    call_kind kind;  /* THREADS: what they call    */
    guint clients_n; /* threads, redis-benchmark -c, or async: decisions in flight */
    guint pipeline;  /* redis-benchmark -P          */
} rows[FIGURES] = {
    [PING1] = {"redis-benchmark PING", "-c 1", TOOL_PING, 0, 1, 1},
    [EVAL1] = {"redis-benchmark EVALSHA " SCRIPT_NAME, "-c 1", TOOL_EVALSHA, 0, 1, 1},
    [HPING1] = {"hiredis PING (reference)", "1 thread", THREADS, CALL_HIREDIS_PING, 1, 0},
    [HEVAL1] = {"hiredis EVALSHA (reference)", "1 thread", THREADS, CALL_HIREDIS_EVALSHA, 1, 0},
    [SLUICE1] = {"sluice_acquire, redis backend", "1 thread", THREADS, CALL_SLUICE, 1, 0},
    [PING16] = {"redis-benchmark PING", "-c 16", TOOL_PING, 0, THREADS_MANY, 1},
    [EVAL16] = {"redis-benchmark EVALSHA " SCRIPT_NAME, "-c 16", TOOL_EVALSHA, 0, THREADS_MANY, 1},
    [HEVAL16] = {"hiredis EVALSHA (reference)", "16 threads", THREADS, CALL_HIREDIS_EVALSHA,
                 THREADS_MANY, 0},
    [SLUICE16] = {"sluice_acquire, redis backend", "16 threads", THREADS, CALL_SLUICE, THREADS_MANY,
                  0},
    [PREF16] = {"sluice_acquire, prefetch = 100", "16 threads", THREADS, CALL_SLUICE_PREFETCH,
                THREADS_MANY, 0},
    [PINGP] = {"redis-benchmark PING", "-c 16 -P 16", TOOL_PING, 0, THREADS_MANY, PIPELINE},
    [EVALP] = {"redis-benchmark EVALSHA " SCRIPT_NAME, "-c 16 -P 16", TOOL_EVALSHA, 0, THREADS_MANY,
               PIPELINE},
    [ASYNCP] = {"sluice_acquire_async, redis backend", "256 in flight", ASYNC, 0,
                THREADS_MANY *PIPELINE, 0},
};

/* One line of the targets. µ is two bytes. */
static void print_target(const char *what, const char *figure, const char *target,
                         const char *result)
{
    int wide_figure = strstr(figure, "µ") != NULL, wide_target = strstr(target, "µ") != NULL;
    printf("%-52s %*s %*s %6s\n", what, 12 + wide_figure, figure, 16 + wide_target, target, result);
}

/* The ratios the targets compare, from one round of their rows. */
typedef struct {
    double p50_x;  /* sluice's 1-thread p50 / PING -c 1's       */
    double rate_x; /* sluice's 16-thread rate / EVALSHA -c 16's */
    double cpu_x;  /* ... and their CPU per request, client + server */
} ratios;

/* Client and server CPU per request (µs); the server's unknown: the client's. */
static double cpu_per_request(const figures *f)
{
    return f->client_us + (f->server_cpu >= 0 ? f->server_cpu * 1e6 / f->per_sec : 0);
}

static ratios ratios_of(const figures *f)
{
    return (ratios){f[SLUICE1].p50_us / f[PING1].p50_us, f[SLUICE16].per_sec / f[EVAL16].per_sec,
                    cpu_per_request(&f[SLUICE16]) / cpu_per_request(&f[EVAL16])};
}

static void print_round(guint round, const figures *f)
{
    ratios r = ratios_of(f);
    printf("%5u %12.1f %12.1f %7.2fx %14.0f %12.0f %7.2fx %9.1f %9.1f %7.2fx\n", round,
           f[PING1].p50_us, f[SLUICE1].p50_us, r.p50_x, f[EVAL16].per_sec, f[SLUICE16].per_sec,
           r.rate_x, cpu_per_request(&f[EVAL16]), cpu_per_request(&f[SLUICE16]), r.cpu_x);
}

/* The targets' rows ROUNDS - 1 more times, each pair back to back (the table was the
 * first round); prints each round and returns the median ratios. FALSE and *error
 * when a redis-benchmark run fails. */
static gboolean measure_rounds(const test_redis *s, char **evalsha, figures *table, ratios *med,
                               GError **error)
{
    char ping_command[] = "PING", *ping[] = {ping_command, NULL};
    double p50_x[ROUNDS], rate_x[ROUNDS], cpu_x[ROUNDS];

    printf("the targets' rows again, %d rounds in all (the table is round 1); on a shared "
           "machine\none row of a pair can lose CPUs the other had, so the medians of the "
           "ratios decide:\n\n",
           ROUNDS);
    printf("%5s %12s %12s %8s %14s %12s %8s %9s %9s %8s\n", "round", "PING p50 µs", "sluice p50",
           "ratio", "EVALSHA -c16/s", "sluice 16/s", "ratio", "CPU µs", "CPU µs", "ratio");
    print_round(1, table);
    p50_x[0] = ratios_of(table).p50_x;
    rate_x[0] = ratios_of(table).rate_x;
    cpu_x[0] = ratios_of(table).cpu_x;
    for (guint r = 1; r < ROUNDS; r++) {
        figures f[FIGURES];
        if (!measure_tool(s, ping, 1, 1, &f[PING1], error))
            return FALSE;
        measure_threads(s, CALL_SLUICE, NULL, evalsha, 1, &f[SLUICE1]);
        if (!measure_tool(s, evalsha, THREADS_MANY, 1, &f[EVAL16], error))
            return FALSE;
        measure_threads(s, CALL_SLUICE, NULL, evalsha, THREADS_MANY, &f[SLUICE16]);
        print_round(r + 1, f);
        p50_x[r] = ratios_of(f).p50_x;
        rate_x[r] = ratios_of(f).rate_x;
        cpu_x[r] = ratios_of(f).cpu_x;
    }
    *med = (ratios){bench_median(p50_x, ROUNDS), bench_median(rate_x, ROUNDS),
                    bench_median(cpu_x, ROUNDS)};
    printf("%5s %12s %12s %7.2fx %14s %12s %7.2fx %9s %9s %7.2fx\n", "median", "", "", med->p50_x,
           "", "", med->rate_x, "", "", med->cpu_x);
    printf("(CPU µs: client + server CPU per request, EVALSHA -c 16 and sluice on 16 threads)\n\n");
    return TRUE;
}

static void print_targets(const figures *f, const ratios *med)
{
    char figure[32], target[48];
    gboolean p50_ok = med->p50_x <= TARGET_P50_X;
    gboolean rate_ok = med->rate_x >= 1.0;

    print_target("target (medians of the rounds)", "sluice", "target", "result");
    print_target("------", "------", "------", "------");
    g_snprintf(figure, sizeof figure, "%.2fx", med->p50_x);
    g_snprintf(target, sizeof target, "<= %.1fx", TARGET_P50_X);
    print_target("1 thread: p50 within 1.3x the p50 of PING -c 1", figure, target,
                 p50_ok ? "PASS" : "MISS");
    g_snprintf(figure, sizeof figure, "%.2fx", med->rate_x);
    print_target("16 threads: at least EVALSHA -c 16 (requests/s)", figure, ">= 1.00x",
                 rate_ok ? "PASS" : "MISS");
    g_snprintf(target, sizeof target, "%.0f/s", f[EVALP].per_sec);
    g_snprintf(figure, sizeof figure, "%.0f%% of it", 100 * f[SLUICE16].per_sec / f[EVALP].per_sec);
    print_target("aim, 16 threads: EVALSHA -c 16 -P 16 (requests/s)", figure, target, "aim");
    g_snprintf(figure, sizeof figure, "%.0f%% of it", 100 * f[ASYNCP].per_sec / f[EVALP].per_sec);
    print_target("  the same, sluice_acquire_async, 256 in flight", figure, target, "");
    double prefetch_x = f[PREF16].per_sec / f[EVAL16].per_sec;
    gboolean prefetch_ok = prefetch_x >= TARGET_PREFETCH_X;
    g_snprintf(figure, sizeof figure, "%.1fx", prefetch_x);
    g_snprintf(target, sizeof target, ">= %.0fx", TARGET_PREFETCH_X);
    print_target("16 threads, prefetch = 100: EVALSHA -c 16 (requests/s)", figure, target,
                 prefetch_ok ? "PASS" : "MISS");
    printf("\n%d of 3 targets missed\n", !p50_ok + !rate_ok + !prefetch_ok);

    /* what the figures are made of: the reference rows measured like sluice's */
    printf("\nfor reference, measured in this process like sluice (µs-exact, where "
           "redis-benchmark's\npercentiles come in steps of 8 µs at these latencies):\n");
    printf("  1 thread: p50 %.1f µs = hiredis PING %.1f µs (%.2fx) + the script in Redis "
           "%+.1f µs + sluice %+.1f µs\n",
           f[SLUICE1].p50_us, f[HPING1].p50_us, f[SLUICE1].p50_us / f[HPING1].p50_us,
           f[HEVAL1].p50_us - f[HPING1].p50_us, f[SLUICE1].p50_us - f[HEVAL1].p50_us);
    printf("  1 thread: p50 %.2fx that of EVALSHA -c 1 (the same command with no client cost: "
           "%.1f µs)\n",
           f[SLUICE1].p50_us / f[EVAL1].p50_us, f[EVAL1].p50_us);
    printf("  16 threads: sluice %.0f/s is %.0f%% of hiredis EVALSHA on 16 blocking "
           "connections (%.0f/s)\n",
           f[SLUICE16].per_sec, 100 * f[SLUICE16].per_sec / f[HEVAL16].per_sec, f[HEVAL16].per_sec);
}

gboolean measure_all(const test_redis *s, char **evalsha, const char *tool, GError **error)
{
    char ping_command[] = "PING", *ping[] = {ping_command, NULL};
    g_autofree char *line = g_strjoinv(" ", evalsha);
    call_name = evalsha[0];
    /* other work on the machine takes CPUs from the clients and the server: say so */
    g_autofree char *load = bench_load_average();
    figures f[FIGURES];

    bench_print_version("redis");
    printf("redis-server on 127.0.0.1:%d, started for this run; %s; load average %s\n", s->port,
           tool, load);
    printf("rule: %s, limit 10^6 per 1s, burst 10^12: every decision is an admission; "
           "each row runs ~%.1f s\n",
           SCRIPT_NAME, RUN_NS / 1e9);
    printf("the command sluice sends, which redis-benchmark repeats:\n  %s\n", line);
    for (guint i = 0; evalsha[i]; i++)
        if (!evalsha[i][0])
            printf("  (argument %u is the empty string: now_us from Redis TIME)\n", i);
    printf("\n");
    print_header();
    for (guint i = 0; i < FIGURES; i++) {
        if (rows[i].source == THREADS)
            measure_threads(s, rows[i].kind, NULL, evalsha, rows[i].clients_n, &f[i]);
        else if (rows[i].source == ASYNC)
            measure_async(s, NULL, rows[i].clients_n, &f[i]);
        else if (!measure_tool(s, rows[i].source == TOOL_EVALSHA ? evalsha : ping,
                               rows[i].clients_n, rows[i].pipeline, &f[i], error))
            return FALSE;
        print_row(rows[i].figure, rows[i].clients, &f[i]);
    }
    printf("\n");
    ratios med;
    if (!measure_rounds(s, evalsha, f, &med, error))
        return FALSE;
    print_targets(f, &med);
    printf("\n");
    measure_algorithms(s, NULL);
    return TRUE;
}
