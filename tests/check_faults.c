/* SPDX-License-Identifier: MIT */
/* The fault suite: 8 threads decide while a real redis-server is killed, hung, flushed,
 * has its clients killed or runs out of memory, on every on_error policy; prints a table. */
#include "fixture.h"

#include <string.h>
#include <sys/mman.h>

#define THREADS    8
#define TIMEOUT_MS 50
/* What a call may take past its timeout: 10 ms. Sanitizers make the library's
 * code (and the time a thread waits on a lock whose holder waits for a CPU,
 * which schedstat does not count) several times longer. Under ThreadSanitizer the
 * bound, 300 ms, stays below the 400 ms outages: a call that waited one out fails. */
#if defined(__SANITIZE_THREAD__)
#define SLACK_MS 250
#elif defined(__SANITIZE_ADDRESS__)
#define SLACK_MS 40
#else
#define SLACK_MS 10
#endif
#define BOUND_US ((TIMEOUT_MS + SLACK_MS) * 1000) /* no call may take longer  */
#define BACK_US  1000000                          /* back to Redis within this      */
#define LIMIT    20                               /* [limit:f] per key and epoch    */
#define BIG      1000000000                       /* [limit:g]: never reached       */

typedef enum { KILL, HANG, SCRIPT_FLUSH, FLUSHALL, CLIENT_KILL, OUT_OF_MEMORY, FAULTS } fault;
static const char *const fault_names[] = {
    "killed, restarted", "hung (SIGSTOP, SIGCONT)", "SCRIPT FLUSH",
    "FLUSHALL",          "CLIENT KILL (ours)",      "maxmemory, noeviction",
};
/* Faults that take Redis away (every call fails for a while), and faults after
 * which Redis holds no state (so Redis may admit LIMIT once more per key). */
static const gboolean outage[] = {TRUE, TRUE, FALSE, FALSE, FALSE, TRUE};
static const gboolean forgets[] = {TRUE, FALSE, FALSE, TRUE, FALSE, FALSE};

typedef enum { ALLOW, DENY, LOCAL, POLICIES } policy;
static const char *const policy_names[] = {"allow", "deny", "local"};

/* One line of the table, filled by the forked test, printed by main. */
typedef struct {
    gboolean done;
    gint64 calls, errors, breaks;
    gint64 slowest_us;     /* wall clock                                     */
    gint64 slowest_net_us; /* less the time the thread waited for a CPU      */
    gint64 timeouts;       /* calls that waited for the timeout              */
    gint64 back_us;        /* recovery to the first decision Redis made      */
} row;
static row *table; /* MAP_SHARED: survives the forked tests */

/* ---- what the threads share during one case ------------------------------------- */

/* Epochs: 0 before the fault, 1 during it, 2 once it is over. Calls on f use the
 * key "eN", so each epoch starts a fresh state on either backend. */
static const char *const epoch_keys[] = {"e0", "e1", "e2"};

static struct {
    fault fault;
    policy policy;
    const char *server; /* "redis 127.0.0.1:PORT", the start of every error  */
    gint epoch, stop;
    gint redis_admitted[3], local_admitted[3];
    gint64 calls, errors, breaks, slowest, slowest_net, timeouts;
    gint64 first_redis_decision; /* monotonic µs, in epoch 2; 0: not yet */
    GMutex lock;
    char *bad_message; /* the first error that did not name the failure */
    char *surfaced;    /* the first error that was not a timeout        */
    char *broken;      /* the first policy break, in words              */
} run;

/* 64-bit counters shared by the threads (GLib's atomics are for gint and pointers). */
static void atomic_add(gint64 *at, gint64 n)
{
    __atomic_fetch_add(at, n, __ATOMIC_RELAXED);
}

static void atomic_max(gint64 *at, gint64 v)
{
    gint64 old = __atomic_load_n(at, __ATOMIC_RELAXED);
    while (v > old &&
           !__atomic_compare_exchange_n(at, &old, v, TRUE, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static void note_first(char **slot, const char *text)
{
    g_mutex_lock(&run.lock);
    if (!*slot)
        *slot = g_strdup(text);
    g_mutex_unlock(&run.lock);
}

static void broke(const char *why)
{
    atomic_add(&run.breaks, 1);
    note_first(&run.broken, why);
}

/* Every failure names the server and what failed. */
static void note_error(const GError *error)
{
    static const char *const reasons[] = {
        "timed out",
        "connection closed by the server",
        "Connection refused",
        "Connection reset",
        "OOM",
        "failing (",
    };
    atomic_add(&run.errors, 1);
    /* "failing (... timed out)": the breaker refused it at once, naming the last failure */
    if (error && strstr(error->message, "timed out") && !strstr(error->message, ": failing ("))
        atomic_add(&run.timeouts, 1);
    if (error && !strstr(error->message, "timed out"))
        note_first(&run.surfaced, error->message);
    gboolean named = error && error->domain == SLUICE_ERROR &&
                     error->code == SLUICE_ERROR_BACKEND &&
                     g_str_has_prefix(error->message, run.server);
    gboolean known = FALSE;
    for (gsize i = 0; named && i < G_N_ELEMENTS(reasons); i++)
        known |= strstr(error->message, reasons[i]) != NULL;
    if (!named || !known)
        note_first(&run.bad_message, error ? error->message : "(no GError)");
}

/* The on_error verdict of a failed call on a limit of capacity `limit`. */
static void check_verdict(const sluice_decision *d, gint64 limit)
{
    if (run.policy == ALLOW && !d->allowed)
        broke("on_error = allow, but the verdict denied");
    if (run.policy == DENY && d->allowed)
        broke("on_error = deny, but the verdict allowed");
    if (run.policy == LOCAL && d->limit != limit)
        broke("on_error = local, but the verdict has another limit than the rule");
}

/* Counts a call that began at `sent` and keeps the slowest, by the wall clock and
 * less the time this thread waited for a CPU. */
static void stop_watch(fixture_stamp sent)
{
    fixture_stamp now = fixture_stamp_now();
    atomic_add(&run.calls, 1);
    atomic_max(&run.slowest, now.now_us - sent.now_us);
    atomic_max(&run.slowest_net, fixture_stamp_took_us(sent, now));
}

/* ---- the decorated function: limit g, with an error callback ----------------------- */

static int guarded_busy(void)
{
    return 0;
}

static int guarded_failed(const GError *error, const sluice_decision *verdict);

RATE_LIMITED_FUNCTION(int, guarded, (void), (), "g", guarded_busy, guarded_failed)
{
    return 1;
}

static int guarded_failed(const GError *error, const sluice_decision *verdict)
{
    note_error(error);
    check_verdict(verdict, BIG);
    if (run.policy == LOCAL && !verdict->allowed)
        broke("on_error = local denied g, whose limit is never reached");
    return verdict->allowed ? SLUICE_BODY(guarded)() : guarded_busy();
}

/* ---- the threads ------------------------------------------------------------------- */

static void decide_f(void)
{
    gint e = g_atomic_int_get(&run.epoch);
    sluice_decision d;
    GError *error = NULL;
    fixture_stamp s = fixture_stamp_now();
    int r = sluice_acquire("f", epoch_keys[e], 1, &d, &error);
    stop_watch(s);
    if (r == SLUICE_FAILED) {
        note_error(error);
        g_error_free(error);
        check_verdict(&d, LIMIT);
        if (run.policy == LOCAL && d.allowed &&
            g_atomic_int_add(&run.local_admitted[e], 1) + 1 > LIMIT)
            broke("the memory backend admitted more than the rule's limit");
        return;
    }
    if (r == SLUICE_ALLOWED &&
        g_atomic_int_add(&run.redis_admitted[e], 1) + 1 > LIMIT * (1 + forgets[run.fault]))
        broke("Redis admitted more than the rule's limit");
    gint64 none = 0;
    if (e == 2 && __atomic_load_n(&run.first_redis_decision, __ATOMIC_RELAXED) == 0)
        __atomic_compare_exchange_n(&run.first_redis_decision, &none, g_get_monotonic_time(), FALSE,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* Each thread decides as a busy server would: a pause of PACE_US between calls
 * leaves the CPUs to the library, Redis and the rest of the machine; spinning
 * instead would measure how long threads wait for locks whose holders wait for a
 * CPU, not the library's bound. */
#define PACE_US 100

static gpointer decide(gpointer data)
{
    (void)data;
    while (!g_atomic_int_get(&run.stop)) {
        decide_f();
        fixture_stamp s = fixture_stamp_now();
        guarded();
        stop_watch(s);
        g_usleep(PACE_US);
    }
    return NULL;
}

/* ---- one case ---------------------------------------------------------------------- */

static void command(test_redis *redis, const char *format, ...)
{
    redisContext *ctx = test_redis_connect(redis, NULL);
    ck_assert(ctx && !ctx->err);
    va_list ap;
    va_start(ap, format);
    redisReply *r = redisvCommand(ctx, format, ap);
    va_end(ap);
    ck_assert_msg(r && r->type != REDIS_REPLY_ERROR, "%s: %s", format, r ? r->str : ctx->errstr);
    freeReplyObject(r);
    redisFree(ctx);
}

/* TRUE once Redis holds the state of f's key in epoch 2: a decision went there. */
static gboolean redis_holds_epoch_2(test_redis *redis)
{
    redisReply *r = test_redis_command(redis, "KEYS *:f:e2}");
    ck_assert_ptr_nonnull(r);
    gboolean found = r->type == REDIS_REPLY_ARRAY && r->elements > 0;
    freeReplyObject(r);
    return found;
}

static void inject(fault f, test_redis *redis)
{
    switch (f) {
    case KILL:
        test_redis_kill(redis);
        break;
    case HANG:
        test_redis_pause(redis);
        break;
    case SCRIPT_FLUSH:
        command(redis, "SCRIPT FLUSH");
        break;
    case FLUSHALL:
        command(redis, "FLUSHALL");
        break;
    case CLIENT_KILL: /* every normal client: the library's connections */
        command(redis, "CLIENT KILL TYPE normal");
        break;
    case OUT_OF_MEMORY:
        command(redis, "CONFIG SET maxmemory-policy noeviction");
        command(redis, "CONFIG SET maxmemory 1");
        break;
    default:
        g_assert_not_reached();
    }
}

static void recover(fault f, test_redis *redis)
{
    if (f == KILL)
        test_redis_restart(redis);
    else if (f == HANG)
        test_redis_resume(redis);
    else if (f == OUT_OF_MEMORY)
        command(redis, "CONFIG SET maxmemory 0");
}

static void run_case(fault f, policy p)
{
    test_redis *redis = test_redis_start(NULL); /* this process restarts and reaps it */
    g_autofree char *server = g_strdup_printf("redis 127.0.0.1:%d", redis->port);
    g_autofree char *url = test_redis_url(redis);
    g_autofree char *ini =
        g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\ntimeout = %dms\non_error = %s\n"
                        "[limit:f]\nalgorithm = fixed_window\nlimit = %d\nwindow = 1h\n"
                        "[limit:g]\nalgorithm = fixed_window\nlimit = %d\nwindow = 1h\n",
                        url, TIMEOUT_MS, policy_names[p], LIMIT, BIG);
    g_autofree char *path = fixture_write_keyfile(ini);
    g_autoptr(GError) error = NULL;

    memset(&run, 0, sizeof run);
    g_mutex_init(&run.lock);
    run.fault = f;
    run.policy = p;
    run.server = server;
    sluice_clock_set(NULL, NULL, NULL);
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");

    GThread *threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        threads[t] = g_thread_new("decide", decide, NULL);
    g_usleep(150000);

    g_atomic_int_set(&run.epoch, 1);
    inject(f, redis);
    g_usleep(outage[f] ? 400000 : 200000);
    recover(f, redis);
    gint64 recovered = g_get_monotonic_time();
    g_atomic_int_set(&run.epoch, 2);

    /* back to Redis by itself: its state of epoch 2 appears */
    gint64 seen = 0;
    while (!seen && g_get_monotonic_time() - recovered < 2 * BACK_US) {
        if (redis_holds_epoch_2(redis))
            seen = g_get_monotonic_time();
        else
            g_usleep(2000);
    }
    g_usleep(100000);
    g_atomic_int_set(&run.stop, 1);
    for (int t = 0; t < THREADS; t++)
        g_thread_join(threads[t]);
    sluice_shutdown();
    test_redis_stop(redis);

    gint64 first = run.first_redis_decision;
    row *line = &table[f * POLICIES + p];
    *line = (row){.done = TRUE,
                  .calls = run.calls,
                  .errors = run.errors,
                  .breaks = run.breaks,
                  .slowest_us = run.slowest,
                  .slowest_net_us = run.slowest_net,
                  .timeouts = run.timeouts,
                  .back_us = first ? first - recovered : -1};

    ck_assert_msg(run.breaks == 0, "%" G_GINT64_FORMAT " calls broke the policy, e.g. %s",
                  run.breaks, run.broken);
    ck_assert_msg(!run.bad_message, "an error does not name the failure: %s", run.bad_message);
    ck_assert_msg(run.slowest_net <= BOUND_US,
                  "a call took %" G_GINT64_FORMAT " µs (%" G_GINT64_FORMAT
                  " µs on the wall clock); the bound is %d µs",
                  run.slowest_net, run.slowest, BOUND_US);
    ck_assert_msg(seen && seen - recovered <= BACK_US,
                  "Redis did not decide again within %d ms of the recovery", BACK_US / 1000);
    ck_assert(first > 0 && first - recovered <= BACK_US);
    /* the threads do not each pay a timeout in turn: the first wave (every
     * thread's call in flight), then one trial per pause of the breaker */
    if (f == HANG) { /* elsewhere a loaded machine may time a call out now and then */
        ck_assert_int_ge(run.timeouts, 1);
        ck_assert_int_le(run.timeouts, THREADS + 8);
    }
    if (outage[f]) {
        ck_assert_int_gt(run.errors, 0); /* the fault was felt */
        if (p == LOCAL)                  /* the memory backend kept the rule: exactly LIMIT on e1 */
            ck_assert_int_eq(run.local_admitted[1], LIMIT);
    } else {
        /* handled inside the library: the fault never surfaces (a loaded machine
         * may still make a call time out) */
        ck_assert_msg(!run.surfaced, "the fault surfaced: %s", run.surfaced);
    }
    g_free(run.bad_message);
    g_free(run.surfaced);
    g_free(run.broken);
    g_mutex_clear(&run.lock);
}

START_TEST(a_killed_server_costs_no_more_than_the_timeout_and_is_used_again_after_restart)
{
    run_case(KILL, _i);
}
END_TEST

START_TEST(a_hung_server_costs_no_more_than_the_timeout_and_is_used_again_after_sigcont)
{
    run_case(HANG, _i);
}
END_TEST

START_TEST(script_flush_is_answered_by_loading_the_script_again)
{
    run_case(SCRIPT_FLUSH, _i);
}
END_TEST

START_TEST(flushall_only_resets_the_limits)
{
    run_case(FLUSHALL, _i);
}
END_TEST

START_TEST(client_kill_of_our_connections_is_answered_by_reconnecting)
{
    run_case(CLIENT_KILL, _i);
}
END_TEST

START_TEST(a_full_redis_refusing_writes_leaves_admissions_to_the_policy)
{
    run_case(OUT_OF_MEMORY, _i);
}
END_TEST

/* Prints the table; FALSE when a case did not finish or broke the policy. */
static gboolean print_table(void)
{
    gboolean ok = TRUE;
    g_print("\n%-24s %-6s %8s %11s %13s %8s %8s %13s %8s\n", "fault", "policy", "calls",
            "slowest ms", "net of CPU ms", "timeouts", "errors", "broke policy", "back ms");
    for (int f = 0; f < FAULTS; f++) {
        for (int p = 0; p < POLICIES; p++) {
            const row *r = &table[f * POLICIES + p];
            if (!r->done) {
                g_print("%-26s %-6s did not finish\n", fault_names[f], policy_names[p]);
                ok = FALSE;
                continue;
            }
            g_print("%-24s %-6s %8" G_GINT64_FORMAT " %11.1f %13.1f %8" G_GINT64_FORMAT
                    " %8" G_GINT64_FORMAT " %13" G_GINT64_FORMAT " %8.1f\n",
                    fault_names[f], policy_names[p], r->calls, r->slowest_us / 1000.0,
                    r->slowest_net_us / 1000.0, r->timeouts, r->errors, r->breaks,
                    r->back_us / 1000.0);
            ok = ok && r->breaks == 0;
        }
    }
    g_print("%d threads; bound: timeout %d ms + %d ms per call, net of the time the thread "
            "waited for a CPU\nand of the machine's steal time; timeouts: calls that waited "
            "for the timeout; back: from\n"
            "the recovery to the first decision Redis made (at most %d ms)\n\n",
            THREADS, TIMEOUT_MS, SLACK_MS, BACK_US / 1000);
    return ok;
}

int main(void)
{
    table = mmap(NULL, sizeof(row) * FAULTS * POLICIES, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_assert(table != MAP_FAILED);
    memset(table, 0, sizeof(row) * FAULTS * POLICIES);

    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(
        tc, a_killed_server_costs_no_more_than_the_timeout_and_is_used_again_after_restart, 0,
        POLICIES);
    tcase_add_loop_test(
        tc, a_hung_server_costs_no_more_than_the_timeout_and_is_used_again_after_sigcont, 0,
        POLICIES);
    tcase_add_loop_test(tc, script_flush_is_answered_by_loading_the_script_again, 0, POLICIES);
    tcase_add_loop_test(tc, flushall_only_resets_the_limits, 0, POLICIES);
    tcase_add_loop_test(tc, client_kill_of_our_connections_is_answered_by_reconnecting, 0,
                        POLICIES);
    tcase_add_loop_test(tc, a_full_redis_refusing_writes_leaves_admissions_to_the_policy, 0,
                        POLICIES);
    suite_add_tcase(s, tc);

    int status = fixture_run(s);
    gboolean ok = print_table();
    return status == 0 && ok ? 0 : 1;
}
