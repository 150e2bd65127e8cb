/* SPDX-License-Identifier: MIT */
/* The asynchronous API: decisions on one main loop, waiting without blocking,
 * cancellation, and the loop serving while a decision waits. */
#include "fixture.h"
#include "testing.h"

#include <gio/gio.h>

typedef struct {
    int code;
    sluice_decision d;
    GError *error;
    gboolean done;
    gint64 done_at;      /* monotonic µs */
    fixture_stamp stamp; /* the same moment, with the CPU this thread waited for */
} result;

static int completed; /* results delivered so far */

static void on_done(GObject *source, GAsyncResult *res, gpointer p)
{
    (void)source;
    result *r = p;
    ck_assert(!r->done);
    r->code = sluice_acquire_finish(res, &r->d, &r->error);
    r->done = TRUE;
    r->stamp = fixture_stamp_now();
    r->done_at = r->stamp.now_us;
    completed++;
}

static gboolean give_up(gpointer flag)
{
    *(gboolean *)flag = TRUE;
    return G_SOURCE_REMOVE;
}

/* Iterates the default context until `n` results arrived; fails after timeout_ms. */
static void run_until(int n, guint timeout_ms)
{
    gboolean late = FALSE;
    guint id = g_timeout_add(timeout_ms, give_up, &late);
    while (completed < n && !late)
        g_main_context_iteration(NULL, TRUE);
    ck_assert_msg(completed >= n, "only %d of %d decisions arrived in %u ms", completed, n,
                  timeout_ms);
    g_source_remove(id);
}

static void start(void)
{
    completed = 0;
}

START_TEST(test_many_decisions_on_one_loop)
{
    start();
    fixture_init("[limit:api]\nalgorithm = sliding_log\nlimit = 5\nwindow = 1h\n");
    result r[20] = {0};
    for (int i = 0; i < 20; i++)
        sluice_acquire_async("api", NULL, 1, NULL, on_done, &r[i]);
    ck_assert_int_eq(completed, 0); /* never before sluice_acquire_async returns */
    run_until(20, 5000);
    int allowed = 0;
    for (int i = 0; i < 20; i++) {
        ck_assert_ptr_null(r[i].error);
        ck_assert_int_eq(r[i].code, r[i].d.allowed ? SLUICE_ALLOWED : SLUICE_DENIED);
        allowed += r[i].d.allowed;
    }
    ck_assert_int_eq(allowed, 5);
    sluice_stats s;
    ck_assert(sluice_stats_get("api", &s, NULL));
    ck_assert_uint_eq(s.allowed, 5);
    ck_assert_uint_eq(s.denied, 15);
    sluice_shutdown();
}
END_TEST

START_TEST(test_exact_answers_on_the_test_clock)
{
    start();
    fixture_clock_start(1000000);
    fixture_init("[limit:tb]\nalgorithm = token_bucket\nlimit = 1\nwindow = 1s\nwait = 5s\n"
                 "[limit:log]\nalgorithm = sliding_log\nlimit = 2\nwindow = 10s\nwait = 3s\n");
    result r[4] = {0};
    sluice_acquire_async("tb", NULL, 1, NULL, on_done, &r[0]);
    run_until(1, 2000);
    ck_assert_decision(r[0].d, TRUE, 1, 0, -1, 1000);
    /* the next token is due in 1 s: reserved, then granted when due */
    sluice_acquire_async("tb", NULL, 1, NULL, on_done, &r[1]);
    run_until(2, 2000);
    ck_assert_int_eq(r[1].code, SLUICE_ALLOWED);
    ck_assert_int_eq(fixture_clock_now(), 2000000);

    /* sliding_log: full for 10 s, more than the 3 s wait: denied at once */
    sluice_acquire("log", NULL, 2, NULL, NULL);
    sluice_acquire_async("log", NULL, 1, NULL, on_done, &r[2]);
    run_until(3, 2000);
    ck_assert_decision(r[2].d, FALSE, 2, 0, 10000, 10000);
    ck_assert_int_eq(fixture_clock_now(), 2000000);
    fixture_clock_advance_ms(8000); /* due in 2 s now: waits, then passes */
    sluice_acquire_async("log", NULL, 1, NULL, on_done, &r[3]);
    run_until(4, 2000);
    ck_assert_int_eq(r[3].code, SLUICE_ALLOWED);
    ck_assert_int_eq(fixture_clock_now(), 12000000);
    sluice_stats s;
    ck_assert(sluice_stats_get("log", &s, NULL));
    ck_assert_uint_eq(s.waited, 1);
    sluice_shutdown();
}
END_TEST

static int ticks;

static gboolean tick(gpointer unused)
{
    (void)unused;
    ticks++;
    return G_SOURCE_CONTINUE;
}

static gboolean release_one(gpointer name)
{
    sluice_release(name, NULL, 1);
    return G_SOURCE_REMOVE;
}

START_TEST(test_a_concurrency_waiter_wakes_on_release_and_the_loop_keeps_serving)
{
    start();
    fixture_init("[limit:c]\nalgorithm = concurrency\nlimit = 1\nwindow = 1m\nwait = 5s\n");
    ck_assert_int_eq(sluice_acquire("c", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    result r = {0};
    ticks = 0;
    guint ticker = g_timeout_add(10, tick, NULL);
    gint64 t0 = g_get_monotonic_time();
    sluice_acquire_async("c", NULL, 1, NULL, on_done, &r);
    g_timeout_add(300, release_one, test_unconst("c"));
    run_until(1, 4000);
    g_source_remove(ticker);
    ck_assert_int_eq(r.code, SLUICE_ALLOWED);
    gint64 waited_ms = (r.done_at - t0) / 1000;
    ck_assert_msg(waited_ms >= 290 && waited_ms < 1500, "waited %" G_GINT64_FORMAT " ms",
                  waited_ms);
    ck_assert_int_ge(ticks, 10); /* the loop ran its other sources meanwhile */
    sluice_release("c", NULL, 1);
    sluice_shutdown();
}
END_TEST

static gint64 cancelled_at; /* monotonic µs */

static gboolean cancel_it(gpointer cancellable)
{
    cancelled_at = g_get_monotonic_time();
    g_cancellable_cancel(cancellable);
    return G_SOURCE_REMOVE;
}

START_TEST(test_cancellation_completes_at_once)
{
    start();
    fixture_init("[limit:c]\nalgorithm = concurrency\nlimit = 1\nwindow = 1m\nwait = 10s\n");
    ck_assert_int_eq(sluice_acquire("c", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    g_autoptr(GCancellable) cancellable = g_cancellable_new();
    result r = {0};
    sluice_acquire_async("c", NULL, 1, cancellable, on_done, &r);
    g_timeout_add(100, cancel_it, cancellable);
    run_until(1, 3000);
    ck_assert_int_eq(r.code, SLUICE_FAILED);
    ck_assert(g_error_matches(r.error, G_IO_ERROR, G_IO_ERROR_CANCELLED));
    ck_assert(!r.d.allowed);
    /* from the cancellation: under valgrind, setting up the first GTask takes about 1 s */
    ck_assert_int_lt((r.done_at - cancelled_at) / 1000, 1000);
    g_clear_error(&r.error);

    /* the waiter is gone: the permit, once released, is free for the next caller (a
     * release that failed is logged at debug level only: say what the acquire saw) */
    sluice_release("c", NULL, 1);
    sluice_decision next;
    g_autoptr(GError) failure = NULL;
    int code = sluice_acquire("c", NULL, 1, &next, &failure);
    ck_assert_msg(code == SLUICE_ALLOWED,
                  "after the release: %d, remaining %" G_GINT64_FORMAT ", %s", code, next.remaining,
                  failure ? failure->message : "no error");

    /* cancelled before it starts */
    g_autoptr(GCancellable) already = g_cancellable_new();
    g_cancellable_cancel(already);
    result early = {0};
    sluice_acquire_async("c", NULL, 1, already, on_done, &early);
    run_until(2, 3000);
    ck_assert(g_error_matches(early.error, G_IO_ERROR, G_IO_ERROR_CANCELLED));
    g_clear_error(&early.error);
    sluice_shutdown();
}
END_TEST

/* sluice_shutdown while a decision is on its way to Redis: the request ends with
 * SLUICE_ERROR_NOT_INITIALIZED, delivered later on its context, and touches nothing
 * that shutdown freed (a use-after-free that ASan and TSan found). On memory the
 * decision was made before sluice_acquire_async returned. */
START_TEST(test_shutdown_with_a_request_in_flight)
{
    start();
    fixture_init("[sluice]\non_error = local\n[limit:api]\nlimit = 1\nwindow = 1h\n");
    result r = {0};
    sluice_acquire_async("api", NULL, 1, NULL, on_done, &r);
    sluice_shutdown();
    run_until(1, 3000);
    if (fixture_on_redis()) {
        ck_assert_int_eq(r.code, SLUICE_FAILED);
        ck_assert(g_error_matches(r.error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED));
        ck_assert(!r.d.allowed);
    } else {
        ck_assert_int_eq(r.code, SLUICE_ALLOWED);
    }
    g_clear_error(&r.error);
}
END_TEST

START_TEST(test_bad_arguments_no_rule_and_backend_failure)
{
    start();
    fixture_init("[sluice]\non_error = deny\n[limit:api]\nlimit = 1\nwindow = 1h\n");
    result r[4] = {0};
    sluice_acquire_async(NULL, NULL, 1, NULL, on_done, &r[0]);
    sluice_acquire_async("api", NULL, -1, NULL, on_done, &r[1]);
    sluice_acquire_async("no.rule", "k", 3, NULL, on_done, &r[2]);
    run_until(3, 2000);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(r[i].code, SLUICE_FAILED);
        ck_assert(g_error_matches(r[i].error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT));
        ck_assert(!r[i].d.allowed);
        g_clear_error(&r[i].error);
    }
    ck_assert_int_eq(r[2].code, SLUICE_ALLOWED);
    ck_assert_int_eq(r[2].d.limit, G_MAXINT64);

    sluice_testing_fail_backend(1, "backend down");
    sluice_acquire_async("api", NULL, 1, NULL, on_done, &r[3]);
    run_until(4, 2000);
    ck_assert_int_eq(r[3].code, SLUICE_FAILED);
    ck_assert(g_error_matches(r[3].error, SLUICE_ERROR, SLUICE_ERROR_BACKEND));
    ck_assert(!r[3].d.allowed); /* on_error = deny */
    g_clear_error(&r[3].error);
    sluice_shutdown();
}
END_TEST

/* On Redis: a server that stops answering (SIGSTOP) costs each decision its
 * timeout at most, the policy answers, the loop keeps running its other sources,
 * and decisions go back to Redis once it answers again. */
START_TEST(test_a_hung_redis_does_not_stall_the_loop)
{
    start();
    /* 100 ms a call, stretched as the bounds are under sanitizers */
    const gint64 timeout_ms = 100 * fixture_time_scale();
    g_autofree char *rules =
        g_strdup_printf("[sluice]\ntimeout = %" G_GINT64_FORMAT "ms\non_error = deny\n"
                        "[limit:api]\nalgorithm = fixed_window\nlimit = 1000\nwindow = 1h\n",
                        timeout_ms);
    fixture_init(rules);
    /* connected (a loaded machine may time the first connection out: once more, well
     * before the breaker's three failures in a row) */
    result warm = {0};
    for (int tries = 0; tries < 2 && warm.code != SLUICE_ALLOWED; tries++) {
        int before = completed;
        g_clear_error(&warm.error);
        warm = (result){0};
        sluice_acquire_async("api", NULL, 1, NULL, on_done, &warm);
        run_until(before + 1, 3000);
    }
    ck_assert_msg(warm.code == SLUICE_ALLOWED, "the first decision: %d (%s)", warm.code,
                  warm.error ? warm.error->message : "no error");

    fixture_pause();
    ticks = 0;
    guint ticker = g_timeout_add(10, tick, NULL);
    result r[10] = {0};
    int base = completed;
    fixture_stamp sent = fixture_stamp_now(); /* the loop runs on this thread */
    for (int i = 0; i < 10; i++)
        sluice_acquire_async("api", NULL, 1, NULL, on_done, &r[i]);
    run_until(base + 10, 3000);
    /* the time the loop had a CPU: its ticks need one */
    gint64 elapsed_ms = fixture_stamp_took_us(sent, fixture_stamp_now()) / 1000;
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(r[i].code, SLUICE_FAILED);
        ck_assert(g_error_matches(r[i].error, SLUICE_ERROR, SLUICE_ERROR_BACKEND));
        ck_assert(!r[i].d.allowed); /* on_error = deny */
        ck_assert_int_le(fixture_stamp_took_us(sent, r[i].stamp) / 1000, timeout_ms + 50);
        g_clear_error(&r[i].error);
    }
    /* the loop went on: its 10 ms ticker ran while the calls were out */
    ck_assert_int_ge(ticks, (int)(elapsed_ms / 10) / 2);
    ck_assert_int_ge(ticks, 5);
    fixture_resume();

    /* back to Redis within a second (the breaker's pause), with no error; less the
     * time this thread waited for a CPU (a loaded machine) */
    fixture_stamp resumed = fixture_stamp_now();
    gint64 back = g_get_monotonic_time();
    int code = SLUICE_FAILED;
    while (code != SLUICE_ALLOWED && g_get_monotonic_time() - back < 2000000) {
        result again = {0};
        int before = completed;
        sluice_acquire_async("api", NULL, 1, NULL, on_done, &again);
        run_until(before + 1, 3000);
        code = again.code;
        g_clear_error(&again.error);
        if (code != SLUICE_ALLOWED)
            g_usleep(20000);
    }
    g_source_remove(ticker);
    ck_assert_int_eq(code, SLUICE_ALLOWED);
    ck_assert_int_le(fixture_stamp_took_us(resumed, fixture_stamp_now()) / 1000, 1200);
    sluice_shutdown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("async");
    TCase *tc = tcase_create("async");
    tcase_add_test(tc, test_many_decisions_on_one_loop);
    tcase_add_test(tc, test_exact_answers_on_the_test_clock);
    tcase_add_test(tc, test_a_concurrency_waiter_wakes_on_release_and_the_loop_keeps_serving);
    tcase_add_test(tc, test_cancellation_completes_at_once);
    tcase_add_test(tc, test_shutdown_with_a_request_in_flight);
    tcase_add_test(tc, test_bad_arguments_no_rule_and_backend_failure);
    if (fixture_on_redis()) /* the memory backend cannot hang */
        tcase_add_test(tc, test_a_hung_redis_does_not_stall_the_loop);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
