/* SPDX-License-Identifier: MIT */
/* bench_redis's rows per algorithm, next to the peer: what one decision costs the server
 * and how many it serves.
 *
 * For each algorithm, a limit that never denies is called by THREADS_MANY threads
 * (sluice_acquire), then by one thread with THREADS_MANY and with ASYNC_IN_FLIGHT decisions in
 * flight (sluice_acquire_async, on its one connection). Around each run the server's statistics
 * are reset (CONFIG RESETSTAT) and read back (INFO commandstats): the time Redis spent in the
 * script calls (FCALL, EVALSHA, EVAL: a call's time includes the commands it runs, which Redis
 * also counts under their own names, so those are not added again; neither side sends any
 * other command per decision), and the server process's CPU (/proc/PID/stat), both per
 * decision. The peer, rate-limiter-flexible's RateLimiterRedis.consume with THREADS_MANY in
 * flight on one connection (bench/peer_rlf.js under node), is measured the same way on the
 * same server when SLUICE_BENCH_NODE_DIR names a node_modules holding it (scripts/bench
 * installs it there). The Redis time's targets are judged on the run shaped as the peer's
 * (one client process, THREADS_MANY in flight on one connection): Redis time is wall-clock
 * time inside the server, and THREADS_MANY client threads on the machine's 2 CPUs take the
 * server's CPU in the middle of its commands, which one client process does far less.
 * ALGORITHM_ROUNDS rounds alternate the peer and the algorithms; the medians of the ratios to
 * the peer of the same round decide the targets. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include <gio/gio.h>
#include <hiredis/hiredis.h>

#include "bench_redis.h"
#include "timing.h"

#ifndef SLUICE_BENCH_DIR
#error "SLUICE_BENCH_DIR: the bench/ directory of the source tree"
#endif

#define ALGORITHM_ROUNDS 5
#define ASYNC_IN_FLIGHT  256
#define PEER_LIMIT_S     30 /* a peer run that has not ended by then is killed */

/* The algorithms measured, with their limit in bench_redis.c's keyfile and the target of
 * their Redis time per decision, in times the peer's. */
static const struct {
    const char *algorithm, *limit;
    double redis_x;
} algorithms[] = {
    {"fixed_window", "bench.fixed_window", 1.1}, {"sliding_window", "bench.sliding_window", 1.5},
    {"token_bucket", "bench.token_bucket", 1.5}, {"gcra", "bench.gcra", 1.5},
    {"sliding_log", "bench.sliding_log", 2.0},
};
#define ALGORITHMS G_N_ELEMENTS(algorithms)

#define TARGET_THREADS_X 0.9 /* 16 blocking threads: at least this many times the peer's rate */
#define TARGET_ASYNC_X   1.5 /* 256 in flight: at least this many times the peer's rate */

/* What one run cost the server. */
typedef struct {
    double per_sec;   /* decisions per second                                        */
    double redis_us;  /* µs of commands (INFO commandstats) per decision; -1: unknown  */
    double cpu_us;    /* µs of the server process's CPU per decision; -1: unknown      */
    double client_us; /* µs of this process's CPU per decision (sluice's rows); -1: unknown */
} cost;

/* ---- the server's statistics ---------------------------------------------------------- */

static gboolean reset_stats(redisContext *ctl)
{
    redisReply *r = redisCommand(ctl, "CONFIG RESETSTAT");
    gboolean ok = r && r->type == REDIS_REPLY_STATUS;
    if (r)
        freeReplyObject(r);
    return ok;
}

/* The µs Redis spent in script calls since the last reset (the commands a script runs are
 * in its call's time, and listed again under their own names: those are not added); -1
 * when it cannot be read. */
static double command_usec(redisContext *ctl)
{
    redisReply *r = redisCommand(ctl, "INFO commandstats");
    if (!r || r->type != REDIS_REPLY_STRING) {
        if (r)
            freeReplyObject(r);
        return -1;
    }
    double usec = 0;
    g_auto(GStrv) lines = g_strsplit(r->str, "\n", -1);
    freeReplyObject(r);
    for (guint i = 0; lines[i]; i++) {
        /* cmdstat_NAME:calls=N,usec=U,usec_per_call=... */
        static const char *const scripts[] = {
            "cmdstat_fcall:",      "cmdstat_fcall_ro:", "cmdstat_evalsha:",
            "cmdstat_evalsha_ro:", "cmdstat_eval:",     "cmdstat_eval_ro:"};
        gboolean script = FALSE;
        for (guint k = 0; k < G_N_ELEMENTS(scripts) && !script; k++)
            script = g_str_has_prefix(lines[i], scripts[k]);
        if (!script)
            continue;
        const char *at = strstr(lines[i], ",usec=");
        if (at)
            usec += g_ascii_strtod(at + strlen(",usec="), NULL);
    }
    return usec;
}

/* ---- sluice ------------------------------------------------------------------------------ */

/* One run of limit with in_flight sluice_acquire_async calls out; with ctl, the Redis time
 * per decision too (the run's warm-up calls are in it: a few hundred of about a hundred
 * thousand). */
static cost async_cost(const test_redis *s, redisContext *ctl, const char *limit, guint in_flight)
{
    figures f;
    gboolean reset = ctl && reset_stats(ctl);
    measure_async(s, limit, in_flight, &f);
    double usec = reset ? command_usec(ctl) : -1;
    double n = f.per_sec * RUN_NS / 1e9;
    return (cost){f.per_sec, usec >= 0 && n > 0 ? usec / n : -1,
                  f.server_cpu >= 0 && f.per_sec > 0 ? f.server_cpu * 1e6 / f.per_sec : -1,
                  f.client_us};
}

/* limit's runs: THREADS_MANY threads, then THREADS_MANY (the peer's shape) and
 * ASYNC_IN_FLIGHT asynchronous calls in flight. */
static void measure_sluice(const test_redis *s, redisContext *ctl, const char *limit, cost *threads,
                           cost *shaped, cost *async)
{
    figures f;
    gboolean reset = reset_stats(ctl);
    gint64 server0 = bench_process_cpu_ns(s->pid);
    measure_threads(s, CALL_SLUICE, limit, NULL, THREADS_MANY, &f);
    gint64 server1 = bench_process_cpu_ns(s->pid);
    double usec = reset ? command_usec(ctl) : -1;
    double n = f.per_sec * RUN_NS / 1e9;
    *threads = (cost){f.per_sec, usec >= 0 && n > 0 ? usec / n : -1,
                      server0 >= 0 && server1 >= 0 && n > 0 ? (server1 - server0) / 1e3 / n : -1,
                      f.client_us};
    *shaped = async_cost(s, ctl, limit, THREADS_MANY);
    *async = async_cost(s, ctl, limit, ASYNC_IN_FLIGHT);
}

/* ---- the peer ---------------------------------------------------------------------------- */

/* The node_modules of the peer, or NULL when the peer cannot run here (said once). */
static const char *peer_modules(void)
{
    static const char *dir;
    static gboolean looked;
    if (looked)
        return dir;
    looked = TRUE;
    const char *env = g_getenv("SLUICE_BENCH_NODE_DIR");
    g_autofree char *node = g_find_program_in_path("node");
    g_autofree char *module =
        env ? g_build_filename(env, "rate-limiter-flexible", "package.json", NULL) : NULL;
    if (!node || !module || !g_file_test(module, G_FILE_TEST_EXISTS)) {
        printf("(no peer: node and SLUICE_BENCH_NODE_DIR with rate-limiter-flexible and ioredis "
               "are needed; scripts/bench installs them)\n");
        return NULL;
    }
    dir = env;
    return dir;
}

/* One line of the peer's output; NULL at its end. */
static char *peer_line(GDataInputStream *out, GError **error)
{
    gsize len;
    return g_data_input_stream_read_line_utf8(out, &len, NULL, error);
}

/* One run of the peer with THREADS_MANY in flight; FALSE and *error when it fails. */
static gboolean measure_peer(const test_redis *s, redisContext *ctl, const char *modules, cost *c,
                             GError **error)
{
    g_autoptr(GSubprocessLauncher) launcher =
        g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE);
    g_subprocess_launcher_setenv(launcher, "NODE_PATH", modules, TRUE);
    g_autofree char *port = g_strdup_printf("%d", s->port);
    g_autofree char *seconds = g_strdup_printf("%.1f", RUN_NS / 1e9);
    g_autofree char *in_flight = g_strdup_printf("%d", THREADS_MANY);
    g_autofree char *limit = g_strdup_printf("%d", PEER_LIMIT_S);
    /* timeout(1) bounds the whole run: the reads below end with the process */
    g_autoptr(GSubprocess) node = g_subprocess_launcher_spawn(
        launcher, error, "timeout", "-s", "KILL", limit, "node", SLUICE_BENCH_DIR "/peer_rlf.js",
        port, seconds, in_flight, NULL);
    if (!node)
        return FALSE;
    g_autoptr(GDataInputStream) out = g_data_input_stream_new(g_subprocess_get_stdout_pipe(node));
    GOutputStream *in = g_subprocess_get_stdin_pipe(node);

    g_autofree char *ready = peer_line(out, error);
    gboolean ok = ready && strcmp(ready, "ready") == 0;
    gint64 server0 = -1, server1 = -1;
    double usec = -1;
    g_autofree char *result = NULL;
    if (ok) {
        gboolean reset = reset_stats(ctl);
        server0 = bench_process_cpu_ns(s->pid);
        ok = g_output_stream_write_all(in, "go\n", 3, NULL, NULL, error);
        result = ok ? peer_line(out, error) : NULL;
        server1 = bench_process_cpu_ns(s->pid);
        usec = reset ? command_usec(ctl) : -1;
    }
    guint64 calls = 0, elapsed = 0, denied = 0, failed = 0;
    ok = result &&
         sscanf(result,
                "%" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT
                " %" G_GUINT64_FORMAT,
                &calls, &elapsed, &denied, &failed) == 4 &&
         calls > 0 && elapsed > 0;
    if (!ok && error && !*error)
        g_set_error(error, BENCH_ERROR, 1, "peer_rlf.js printed %s", result ? result : "nothing");
    if (!ok) /* timeout(1) passes it on to node */
        g_subprocess_send_signal(node, SIGTERM);
    g_subprocess_wait(node, NULL, NULL);
    if (!ok)
        return FALSE;
    if (denied || failed)
        printf("  warning: the peer had %" G_GUINT64_FORMAT " denials and %" G_GUINT64_FORMAT
               " failures of %" G_GUINT64_FORMAT " calls\n",
               denied, failed, calls);
    *c = (cost){(double)calls * 1e9 / (double)elapsed, usec >= 0 ? usec / (double)calls : -1,
                server0 >= 0 && server1 >= 0 ? (server1 - server0) / 1e3 / (double)calls : -1, -1};
    return TRUE;
}

/* ---- the table and the targets ----------------------------------------------------------- */

static void print_cost(const char *what, const char *clients, const cost *c, const cost *peer)
{
    char redis[32] = "?", cpu[32] = "?", client[32] = "?", rate_x[16] = "";
    if (c->redis_us >= 0)
        g_snprintf(redis, sizeof redis, "%.2f", c->redis_us);
    if (c->redis_us >= 0 && peer && peer->redis_us > 0)
        g_snprintf(redis + strlen(redis), sizeof redis - strlen(redis), " (%.2fx)",
                   c->redis_us / peer->redis_us);
    if (c->cpu_us >= 0)
        g_snprintf(cpu, sizeof cpu, "%.2f", c->cpu_us);
    if (c->client_us >= 0)
        g_snprintf(client, sizeof client, "%.2f", c->client_us);
    if (peer && peer->per_sec > 0)
        g_snprintf(rate_x, sizeof rate_x, "%.2fx", c->per_sec / peer->per_sec);
    printf("%-46s %-14s %16s %13s %13s %12.0f %7s\n", what, clients, redis, cpu, client, c->per_sec,
           rate_x);
}

static void print_cost_header(void)
{
    printf("%-46s %-14s %17s %14s %14s %12s %7s\n", "figure", "clients", "Redis µs/dec",
           "srv CPU µs", "cli CPU µs", "decisions/s", "x peer");
}

static double median_of(double *values, guint n)
{
    return n ? bench_median(values, n) : -1;
}

gboolean algorithms_known(char **names)
{
    for (guint i = 0; names && names[i]; i++) {
        gboolean known = FALSE;
        for (guint a = 0; a < ALGORITHMS && !known; a++)
            known = strcmp(names[i], algorithms[a].algorithm) == 0;
        if (!known) {
            fprintf(stderr, "bench_redis: no rows of an algorithm \"%s\"; it has rows of",
                    names[i]);
            for (guint a = 0; a < ALGORITHMS; a++)
                fprintf(stderr, " %s", algorithms[a].algorithm);
            fprintf(stderr, "\n");
            return FALSE;
        }
    }
    return TRUE;
}

/* TRUE when names (NULL or empty: every algorithm) selects algorithm a. */
static gboolean selected(char **names, guint a)
{
    return !names || !*names ||
           g_strv_contains((const char *const *)names, algorithms[a].algorithm);
}

void measure_algorithms(const test_redis *s, char **names)
{
    redisContext *ctl = bench_connect(s);
    if (!ctl) {
        printf("per algorithm: cannot connect to the server\n");
        return;
    }
    const char *modules = peer_modules();
    cost peer[ALGORITHM_ROUNDS], threads[ALGORITHM_ROUNDS][ALGORITHMS],
        shaped[ALGORITHM_ROUNDS][ALGORITHMS], async[ALGORITHM_ROUNDS][ALGORITHMS];
    guint peer_rounds = 0;
    char shape[32], many[32];
    g_snprintf(shape, sizeof shape, "%d in flight", THREADS_MANY);
    g_snprintf(many, sizeof many, "%d in flight", ASYNC_IN_FLIGHT);

    printf("per algorithm, a limit that never denies; Redis µs: INFO commandstats' time of "
           "the script\ncalls (with the commands they run) per decision; "
           "server CPU: /proc, per decision;\n%d rounds, each the peer then every algorithm "
           "(x: to the peer of the same round);\n%s: one client process, as the peer's\n\n",
           ALGORITHM_ROUNDS, shape);
    print_cost_header();
    for (guint r = 0; r < ALGORITHM_ROUNDS; r++) {
        const cost *p = NULL;
        if (modules) {
            g_autoptr(GError) error = NULL;
            if (measure_peer(s, ctl, modules, &peer[peer_rounds], &error)) {
                p = &peer[peer_rounds++];
                print_cost("rate-limiter-flexible RateLimiterRedis.consume", shape, p, NULL);
            } else {
                printf("  the peer failed: %s\n", error->message);
            }
        }
        for (guint a = 0; a < ALGORITHMS; a++) {
            if (!selected(names, a))
                continue;
            char what[64];
            measure_sluice(s, ctl, algorithms[a].limit, &threads[r][a], &shaped[r][a],
                           &async[r][a]);
            g_snprintf(what, sizeof what, "sluice %s", algorithms[a].algorithm);
            print_cost(what, "16 threads", &threads[r][a], p);
            print_cost(what, shape, &shaped[r][a], p);
            print_cost(what, many, &async[r][a], p);
        }
        printf("\n");
    }
    redisFree(ctl);
    if (peer_rounds < ALGORITHM_ROUNDS) {
        printf("no peer in every round: no targets per algorithm\n\n");
        return;
    }

    printf("%-14s %9s %7s %7s %5s %11s %7s %13s %7s %5s %12s %7s %5s\n", "medians", "Redis µs",
           "x peer", "target", "", "16 thr. µs", "x peer", "16 threads/s", "x peer", "",
           "256 async/s", "x peer", "");
    double pr[ALGORITHM_ROUNDS], pc[ALGORITHM_ROUNDS], pp[ALGORITHM_ROUNDS];
    for (guint r = 0; r < ALGORITHM_ROUNDS; r++) {
        pr[r] = peer[r].redis_us;
        pc[r] = peer[r].cpu_us;
        pp[r] = peer[r].per_sec;
    }
    printf("%-14s %9.2f %7s %7s %5s %11s %7s %13.0f %7s %5s %12s %7s %5s   (server CPU %.2f µs)\n",
           "peer", median_of(pr, ALGORITHM_ROUNDS), "", "", "", "", "",
           median_of(pp, ALGORITHM_ROUNDS), "", "", "", "", "", median_of(pc, ALGORITHM_ROUNDS));
    guint missed = 0, measured = 0;
    for (guint a = 0; a < ALGORITHMS; a++) {
        if (!selected(names, a))
            continue;
        measured++;
        double us[ALGORITHM_ROUNDS], us_x[ALGORITHM_ROUNDS], tus[ALGORITHM_ROUNDS],
            tus_x[ALGORITHM_ROUNDS], cpu[ALGORITHM_ROUNDS], rate[ALGORITHM_ROUNDS],
            rate_x[ALGORITHM_ROUNDS], as[ALGORITHM_ROUNDS], as_x[ALGORITHM_ROUNDS];
        for (guint r = 0; r < ALGORITHM_ROUNDS; r++) {
            us[r] = shaped[r][a].redis_us;
            us_x[r] = shaped[r][a].redis_us / peer[r].redis_us;
            tus[r] = threads[r][a].redis_us;
            tus_x[r] = threads[r][a].redis_us / peer[r].redis_us;
            cpu[r] = shaped[r][a].cpu_us;
            rate[r] = threads[r][a].per_sec;
            rate_x[r] = threads[r][a].per_sec / peer[r].per_sec;
            as[r] = async[r][a].per_sec;
            as_x[r] = async[r][a].per_sec / peer[r].per_sec;
        }
        double ux = median_of(us_x, ALGORITHM_ROUNDS), rx = median_of(rate_x, ALGORITHM_ROUNDS),
               ax = median_of(as_x, ALGORITHM_ROUNDS);
        gboolean u_ok = ux <= algorithms[a].redis_x, r_ok = rx >= TARGET_THREADS_X,
                 a_ok = ax >= TARGET_ASYNC_X;
        char target[16];
        g_snprintf(target, sizeof target, "<=%.1fx", algorithms[a].redis_x);
        printf("%-14s %9.2f %6.2fx %7s %5s %11.2f %6.2fx %13.0f %6.2fx %5s %12.0f %6.2fx %5s   "
               "(server CPU %.2f µs)\n",
               algorithms[a].algorithm, median_of(us, ALGORITHM_ROUNDS), ux, target,
               u_ok ? "PASS" : "MISS", median_of(tus, ALGORITHM_ROUNDS),
               median_of(tus_x, ALGORITHM_ROUNDS), median_of(rate, ALGORITHM_ROUNDS), rx,
               r_ok ? "PASS" : "MISS", median_of(as, ALGORITHM_ROUNDS), ax, a_ok ? "PASS" : "MISS",
               median_of(cpu, ALGORITHM_ROUNDS));
        missed += !u_ok + !r_ok + !a_ok;
    }
    printf("targets: Redis µs (%s, as the peer) at most the x shown; 16 threads at least %.1fx "
           "the peer's\ndecisions/s, %s at least %.1fx; 16 thr. µs: the Redis µs of the 16 "
           "threads' run, no target\n%u of %u targets per algorithm missed\n\n",
           shape, TARGET_THREADS_X, many, TARGET_ASYNC_X, missed, 3 * measured);
}

void measure_async_algorithms(const test_redis *s, char **names, guint rounds)
{
    printf("sluice_acquire_async, %d in flight, per algorithm; srv and cli CPU: the server's "
           "(/proc)\nand this process's (getrusage) CPU per decision; %u rounds\n\n",
           ASYNC_IN_FLIGHT, rounds);
    print_cost_header();
    for (guint r = 0; r < rounds; r++) {
        for (guint a = 0; a < ALGORITHMS; a++) {
            if (!selected(names, a))
                continue;
            char what[64];
            cost c = async_cost(s, NULL, algorithms[a].limit, ASYNC_IN_FLIGHT);
            g_snprintf(what, sizeof what, "sluice %s", algorithms[a].algorithm);
            print_cost(what, "256 in flight", &c, NULL);
        }
    }
    printf("\n");
}
