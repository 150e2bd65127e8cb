/* SPDX-License-Identifier: MIT */
/* What the files of bench_redis share: the run's constants, the figures of one row, and what
 * each family of rows measures (sluice or hiredis on threads, sluice_acquire_async,
 * redis-benchmark). */
#ifndef SLUICE_BENCH_REDIS_H
#define SLUICE_BENCH_REDIS_H

#include <glib.h>
#include <signal.h>

#include "redis_server.h"

#define RUN_NS            (2500 * G_GINT64_CONSTANT(1000000)) /* each measured run: about 2.5 s */
#define THREADS_MANY      16         /* the concurrent case: threads, and redis-benchmark -c */
#define PIPELINE          16         /* redis-benchmark -P of the aim */
#define LATENCIES         (1u << 22) /* per-call latencies kept per run, shared by its threads */
#define ROUNDS            5          /* the targets' rows, alternating: their medians decide */
#define ASYNC_ROUNDS      3          /* bench_redis async: rounds of each algorithm's row */
#define TARGET_P50_X      1.3        /* one thread's p50 within this many PING p50s */
#define LIMIT_NAME        "bench.redis"
#define PREFETCH_NAME     "bench.prefetch" /* the same rule with prefetch = PREFETCH */
#define PREFETCH          100
#define TARGET_PREFETCH_X 10.0 /* prefetch, 16 threads: this many times EVALSHA -c 16 */
#define SCRIPT_NAME       "token_bucket"

#define BENCH_ERROR g_quark_from_static_string("bench-redis")

/* One row. */
typedef struct {
    double per_sec;    /* requests (decisions) per second                    */
    double p50_us;     /* latency of one request                             */
    double p99_us;     /*                                                    */
    double server_cpu; /* share of one CPU the server used during the run; -1: unknown */
    double client_cpu; /* share of one CPU the client used (all its threads)  */
    double client_us;  /* client CPU per request                             */
} figures;

/* The figures of a run: n calls whose latencies are `latencies` (sorted here) in `elapsed` ns,
 * with the client's CPU and the server's before and after (ns; -1: unknown). */
void figures_of(figures *f, guint32 *latencies, gsize n, double elapsed, gint64 cpu, gint64 server0,
                gint64 server1);

/* A blocking connection to s with 2 s timeouts (bench_redis.c); NULL when it cannot. */
redisContext *bench_connect(const test_redis *s);

/* ---- redis_threads.c: threads calling sluice, or hiredis directly ---- */

/* What each thread of a run calls in its loop. The hiredis calls are the reference for
 * sluice's: a plain blocking connection per thread, as the redis backend has, sending
 * the same EVALSHA (or PING) with nothing around it. */
typedef enum {
    CALL_SLUICE,
    CALL_SLUICE_PREFETCH,
    CALL_HIREDIS_PING,
    CALL_HIREDIS_EVALSHA
} call_kind;

/* One run of `kind` calls on `threads` threads (limit: CALL_SLUICE's limit, NULL: LIMIT_NAME;
 * evalsha: the command sluice sends); FALSE when a thread's array filled up, or when some calls
 * were not admitted (the figure would not be that of the script's allowed path). */
gboolean measure_threads(const test_redis *s, call_kind kind, const char *limit, char **evalsha,
                         guint threads, figures *f);

/* ---- redis_async.c: sluice_acquire_async, many decisions in flight ---- */

/* One run of sluice_acquire_async of limit (NULL: LIMIT_NAME) on this thread with `in_flight`
 * decisions out at all times; FALSE when some were not admitted. */
gboolean measure_async(const test_redis *s, const char *limit, guint in_flight, figures *f);

/* ---- redis_tool.c: redis-benchmark ---- */

/* The pid of the redis-benchmark that runs, for a signal handler: the only process it kills. */
extern volatile sig_atomic_t tool_pid;

/* The version a program prints with --version (its first line; g_free it), or NULL. */
char *tool_version(const char *program);
/* redis-benchmark against s: `command` with `clients` connections and `pipeline` requests per
 * write, for about RUN_NS (a short run sizes it); FALSE and *error when it cannot be started,
 * fails, lasts too long or prints no figures. */
gboolean measure_tool(const test_redis *s, char **command, guint clients, guint pipeline,
                      figures *f, GError **error);

/* ---- redis_algorithms.c: every algorithm, next to rate-limiter-flexible ---- */

/* TRUE when every one of names (NULL-terminated) is an algorithm with rows here; else
 * FALSE, the first that is not said on stderr with those that are. */
gboolean algorithms_known(char **names);
/* Measures and prints the rows of the algorithms named (all when none) and the peer's, then
 * their targets. */
void measure_algorithms(const test_redis *s, char **names);
/* Only the 256-in-flight sluice_acquire_async rows of the algorithms named (all when none),
 * `rounds` times: decisions/s and the client's and the server's CPU per decision, to weigh a
 * change of the asynchronous client by the CPU it costs, which a loaded machine moves less
 * than the rate. */
void measure_async_algorithms(const test_redis *s, char **names, guint rounds);

/* ---- redis_report.c: the table, the rounds of the targets, the targets ---- */

/* Prints the heading, measures and prints every row, then the targets; FALSE and *error when
 * a redis-benchmark run fails. */
gboolean measure_all(const test_redis *s, char **evalsha, const char *tool, GError **error);

#endif
