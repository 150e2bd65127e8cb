/* SPDX-License-Identifier: MIT */
/* bench_redis: how fast the redis backend decides, on 1 and 16 threads, next to
 * redis-benchmark on PING and on the script call sluice sends, with the same arguments.
 *
 * One run, one redis-server: the program starts its own on a free 127.0.0.1 port, lets
 * sluice make one decision (which loads sluice's Function library) and takes the script
 * call that sluice sent (FCALL; EVALSHA on a server without Functions) from the server's
 * SLOWLOG, so that redis-benchmark runs exactly that command. Every run lasts about RUN_NS;
 * a sluice run records the latency of each call in arrays allocated before it starts.
 * Reference rows run PING and that call through plain
 * blocking hiredis connections in this process, timed the same way, to tell the round
 * trip, the script and sluice's own cost apart. Prints one table and the targets
 * (PASS/MISS). It exits 0 whatever the figures are (a benchmark, not a test), and 1 when
 * redis-server, redis-benchmark or sluice cannot be set up. The server is stopped on every way
 * out. This file sets the run up; redis_threads.c, redis_async.c and redis_tool.c measure the
 * three families of rows, redis_report.c prints them. Run it with scripts/bench;
 * bench/README.md explains the figures. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <hiredis/hiredis.h>
#include <sluice/sluice.h>

#include "bench_redis.h"
#include "setup.h"
#include "timing.h"

#define WATCHDOG_S 480 /* the whole program: killed, with its server, after this */

/* The keyfile, written to a temporary file (%d: the port, then the prefetch). The bucket holds
 * 10^12 permits and refills 10^6 a second: every decision is an admission, so every call runs the
 * same path of the same script. */
static const char keyfile_format[] = "# written by bench_redis: a limit that never says no\n"
                                     "[sluice]\n"
                                     "backend = redis\n"
                                     "redis = redis://127.0.0.1:%d/0\n"
                                     "timeout = 1s\n"
                                     "on_error = deny\n"
                                     "\n"
                                     "[limit:" LIMIT_NAME "]\n"
                                     "algorithm = " SCRIPT_NAME "\n"
                                     "limit = 1000000\n"
                                     "window = 1s\n"
                                     "burst = 1000000000000\n"
                                     "per_key = false\n"
                                     "\n"
                                     "[limit:" PREFETCH_NAME "]\n"
                                     "algorithm = " SCRIPT_NAME "\n"
                                     "limit = 1000000\n"
                                     "window = 1s\n"
                                     "burst = 1000000000000\n"
                                     "per_key = false\n"
                                     "prefetch = %d\n"
                                     "\n"
                                     /* the rows per algorithm (redis_algorithms.c) */
                                     "[limit:bench.fixed_window]\n"
                                     "algorithm = fixed_window\n"
                                     "limit = 1000000000000\n"
                                     "window = 1h\n"
                                     "per_key = false\n"
                                     "[limit:bench.sliding_window]\n"
                                     "algorithm = sliding_window\n"
                                     "limit = 1000000000\n"
                                     "window = 1h\n"
                                     "per_key = false\n"
                                     "[limit:bench.token_bucket]\n"
                                     "algorithm = token_bucket\n"
                                     "limit = 1000000\n"
                                     "window = 1s\n"
                                     "burst = 1000000000000\n"
                                     "per_key = false\n"
                                     "[limit:bench.gcra]\n"
                                     "algorithm = gcra\n"
                                     "limit = 1000000\n"
                                     "window = 1s\n"
                                     "burst = 1000000000000\n"
                                     "per_key = false\n"
                                     "[limit:bench.sliding_log]\n"
                                     "algorithm = sliding_log\n"
                                     "limit = 100000\n"
                                     "window = 100ms\n"
                                     "per_key = false\n";

/* ---- the server, and the watchdog ------------------------------------------------- */

/* The server's pid, for the signal handler: with redis-benchmark's (redis_tool.c), the only
 * processes it kills. */
static volatile sig_atomic_t server_pid;
static char server_dir[4096]; /* the server's directory, removed by the handler too */

/* Sends sig to pid and reaps it, with SIGKILL after 2 s; async-signal-safe. */
static void end_child(pid_t pid, int sig)
{
    struct timespec pause = {0, 10000000};
    kill(pid, sig);
    for (int i = 0; i < 200; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return;
        nanosleep(&pause, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* On SIGINT, SIGTERM, SIGHUP and the watchdog's SIGALRM: stop redis-benchmark and the
 * server, then die of the signal. */
static void on_signal(int sig)
{
    static const char message[] = "bench_redis: stopped by the watchdog\n";
    if (tool_pid > 0)
        end_child((pid_t)tool_pid, SIGKILL);
    if (server_pid > 0) {
        end_child((pid_t)server_pid, SIGTERM);
        rmdir(server_dir); /* empty: the server saves nothing */
    }
    if (sig == SIGALRM && write(STDERR_FILENO, message, sizeof message - 1) < 0)
        sig = SIGTERM;
    signal(sig, SIG_DFL);
    raise(sig);
}

redisContext *bench_connect(const test_redis *s)
{
    struct timeval tv = {2, 0};
    redisContext *ctx = test_redis_connect(s, NULL);
    if (ctx && ctx->err) {
        redisFree(ctx);
        return NULL;
    }
    if (ctx)
        redisSetTimeout(ctx, tv);
    return ctx;
}

/* ---- the script and the command sluice sends ------------------------------------------ */

/* One command on the control connection; NULL and *error on an I/O error or an error reply. */
static redisReply *ask(redisContext *ctx, GError **error, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    redisReply *r = redisvCommand(ctx, format, ap);
    va_end(ap);
    if (!r) {
        g_set_error(error, BENCH_ERROR, 1, "%s: %s", format, ctx->errstr);
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        g_set_error(error, BENCH_ERROR, 1, "%s: %s", format, r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* Makes one decision with the server's SLOWLOG logging every command, and returns
 * the script call that sluice sent (FCALL, or EVALSHA on a server without
 * Functions; g_strfreev it), or NULL and *error. */
static char **capture_evalsha(redisContext *ctl, GError **error)
{
    redisReply *old = ask(ctl, error, "CONFIG GET slowlog-log-slower-than");
    if (!old)
        return NULL;
    g_autofree char *threshold = old->type == REDIS_REPLY_ARRAY && old->elements == 2
                                     ? g_strdup(old->element[1]->str)
                                     : g_strdup("10000");
    freeReplyObject(old);

    redisReply *r;
    if (!(r = ask(ctl, error, "CONFIG SET slowlog-log-slower-than 0")))
        return NULL;
    freeReplyObject(r);
    if (!(r = ask(ctl, error, "SLOWLOG RESET")))
        return NULL;
    freeReplyObject(r);

    sluice_decision d;
    g_autoptr(GError) why = NULL;
    int verdict = sluice_acquire(LIMIT_NAME, NULL, 1, &d, &why);
    redisReply *log = ask(ctl, error, "SLOWLOG GET 32");
    if ((r = ask(ctl, NULL, "CONFIG SET slowlog-log-slower-than %s", threshold)))
        freeReplyObject(r);
    if ((r = ask(ctl, NULL, "SLOWLOG RESET")))
        freeReplyObject(r);
    if (verdict != SLUICE_ALLOWED) {
        g_set_error(error, BENCH_ERROR, 1, "sluice_acquire did not admit the first call: %s",
                    why ? why->message : "denied");
        if (log)
            freeReplyObject(log);
        return NULL;
    }
    if (!log)
        return NULL;

    char **argv = NULL;
    /* entries, newest first: id, time, duration, arguments, client, name */
    for (size_t i = 0; log->type == REDIS_REPLY_ARRAY && i < log->elements && !argv; i++) {
        redisReply *entry = log->element[i];
        if (entry->type != REDIS_REPLY_ARRAY || entry->elements < 4)
            continue;
        redisReply *args = entry->element[3];
        if (args->type != REDIS_REPLY_ARRAY || args->elements < 2 ||
            (g_ascii_strcasecmp(args->element[0]->str, "FCALL") != 0 &&
             g_ascii_strcasecmp(args->element[0]->str, "EVALSHA") != 0))
            continue;
        argv = g_new0(char *, args->elements + 1);
        for (size_t k = 0; k < args->elements; k++)
            argv[k] = g_strndup(args->element[k]->str, args->element[k]->len);
    }
    freeReplyObject(log);
    if (!argv)
        g_set_error(error, BENCH_ERROR, 1,
                    "the SLOWLOG holds no FCALL or EVALSHA of sluice's decision");
    return argv;
}

/* Runs argv once on ctl: TRUE when the reply is the script's (allowed, limit, remaining,
 * retry, reset, wait, leased, and the reported band), and an admission. */
static gboolean check_command(redisContext *ctl, char **argv, GError **error)
{
    int argc = (int)g_strv_length(argv);
    redisReply *r = redisCommandArgv(ctl, argc, (const char **)(void *)argv, NULL);
    /* token_bucket's common path answers an integer, the bucket as read (lua/token_bucket.lua):
     * on a limit that never denies, an admission */
    gboolean ok = r && r->type == REDIS_REPLY_INTEGER && r->integer > 0;
    if (!ok)
        g_set_error(error, BENCH_ERROR, 1,
                    "the captured script call does not answer an admission: %s",
                    !r                             ? ctl->errstr
                    : r->type == REDIS_REPLY_ERROR ? r->str
                                                   : "unexpected reply");
    if (r)
        freeReplyObject(r);
    return ok;
}

/* ---- main --------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    test_redis *s = NULL;
    redisContext *ctl = NULL;
    g_autofree char *keyfile = NULL, *tool = NULL;
    g_auto(GStrv) evalsha = NULL;
    gboolean initialized = FALSE;
    int status = 1;

    gboolean only_algorithms = argc >= 2 && strcmp(argv[1], "algorithms") == 0;
    gboolean only_async = argc >= 2 && strcmp(argv[1], "async") == 0;
    if ((argc > 1 && !only_algorithms && !only_async) ||
        (argc > 2 && !algorithms_known(argv + 2))) {
        fprintf(stderr,
                "usage: %s [algorithms [ALGORITHM...] | async [ALGORITHM...]]   (starts its own "
                "redis-server;\n"
                "  needs redis-benchmark; algorithms: only the rows per algorithm, next to the "
                "peer;\n  async: only their 256-in-flight rows, with the client's CPU per "
                "decision)\n",
                argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    signal(SIGALRM, on_signal);
    alarm(WATCHDOG_S);

    tool = tool_version("redis-benchmark");
    if (!tool) {
        fprintf(stderr, "bench_redis: redis-benchmark cannot be run (it comes with Debian's "
                        "redis-tools, which redis-server depends on)\n");
        goto out;
    }
    s = test_redis_try_start(NULL, &error);
    if (!s) {
        fprintf(stderr, "bench_redis: %s\n", error->message);
        goto out;
    }
    server_pid = s->pid;
    g_strlcpy(server_dir, s->dir, sizeof server_dir);
    ctl = bench_connect(s);
    if (!ctl) {
        fprintf(stderr, "bench_redis: cannot connect to redis-server on port %d\n", s->port);
        goto out;
    }
    keyfile = g_strdup_printf(keyfile_format, s->port, PREFETCH);
    initialized = bench_init(keyfile, &error);
    if (!initialized) {
        fprintf(stderr, "bench_redis: %s\n", error->message);
        goto out;
    }
    if (only_algorithms || only_async) {
        bench_print_version("redis");
        g_autofree char *load = bench_load_average();
        printf("redis-server on 127.0.0.1:%d, started for this run; load average %s\n\n", s->port,
               load);
        if (only_async)
            measure_async_algorithms(s, argv + 2, ASYNC_ROUNDS);
        else
            measure_algorithms(s, argv + 2);
        status = 0;
        goto out;
    }
    evalsha = capture_evalsha(ctl, &error);
    if (!evalsha || !check_command(ctl, evalsha, &error)) {
        fprintf(stderr, "bench_redis: %s\n", error->message);
        goto out;
    }
    if (measure_all(s, evalsha, tool, &error))
        status = 0;
    else
        fprintf(stderr, "bench_redis: %s\n", error->message);

out:
    if (initialized)
        sluice_shutdown();
    if (ctl)
        redisFree(ctl);
    server_pid = 0;
    test_redis_stop(s);
    return status;
}
