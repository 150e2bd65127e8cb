/* SPDX-License-Identifier: MIT */
/* Prefetched permits against a real redis-server: one round trip takes `prefetch`
 * permits, the process hands them out until they run out or prefetch_ttl passes,
 * a child of fork() starts with none, and across processes no more are used than
 * Redis counted. */
#include "fixture.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define S G_GINT64_CONSTANT(1000250)

static gint64 script_calls(void)
{
    return test_redis_script_calls(fixture_redis());
}

/* Counts script calls from now, the script loaded (a first EVALSHA on a fresh
 * server is answered NOSCRIPT, then EVAL: two calls). */
static void reset_script_calls(void)
{
    sluice_acquire("p", "warm-up", 1, NULL, NULL);
    freeReplyObject(test_redis_command(fixture_redis(), "CONFIG RESETSTAT"));
}

static const char *fixed =
    "[limit:p]\nalgorithm = fixed_window\nlimit = 10\nwindow = 10s\nprefetch = 4\n";

/* One round trip takes 4; three calls are answered from them; near the limit a
 * refused prefetch is followed by the call's own permits. */
START_TEST(one_round_trip_takes_prefetch_permits)
{
    fixture_clock_start(S);
    fixture_init(fixed);
    reset_script_calls();
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("p", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 6 + 3, -1, 10000); /* 6 left in Redis, 3 in hand */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sluice_acquire("p", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 0, -1, 10000); /* the last in hand */
    ck_assert_int_eq(script_calls(), 1);
    /* another 4 (Redis: 8 counted), then 2 left: 4 are refused, 1 is asked for */
    ck_assert_int_eq(sluice_acquire("p", "k", 1, &d, NULL), SLUICE_ALLOWED);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sluice_acquire("p", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(script_calls(), 2);
    ck_assert_int_eq(sluice_acquire("p", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 1, -1, 10000);
    ck_assert_int_eq(script_calls(), 4);
    /* a call for more than prefetch, and a peek, go to Redis as they are */
    ck_assert_int_eq(sluice_acquire("p", "other", 5, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("p", "other", 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(script_calls(), 6);
    sluice_stats s;
    ck_assert(sluice_stats_get("p", &s, NULL));
    ck_assert_uint_eq(s.allowed, 12); /* the warm-up's too */
    ck_assert_uint_eq(s.prefetched, 6);
    g_autofree char *text = sluice_stats_prometheus();
    ck_assert_msg(strstr(text, "sluice_prefetched_total{name=\"p\"} 6\n"), "%s", text);
    sluice_shutdown();
}
END_TEST

/* What an asynchronous decision returned. */
typedef struct {
    int code;
    sluice_decision *d;
} async_result;

static void async_done(GObject *source, GAsyncResult *result, gpointer data)
{
    (void)source;
    async_result *done = data;
    done->code = sluice_acquire_finish(result, done->d, NULL);
}

/* sluice_acquire_async, then runs the default context until it completes. */
static int acquire_async(const char *key, gint64 permits, sluice_decision *d)
{
    async_result done = {99, d};
    sluice_acquire_async("p", key, permits, NULL, async_done, &done);
    while (done.code == 99)
        g_main_context_iteration(NULL, TRUE);
    return done.code;
}

/* The asynchronous API takes and hands out permits as the blocking one does, and
 * shares the permits in hand with it. */
START_TEST(the_asynchronous_api_takes_prefetch_permits)
{
    fixture_clock_start(S);
    fixture_init(fixed);
    reset_script_calls();
    sluice_decision d;
    ck_assert_int_eq(acquire_async("k", 1, &d), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 6 + 3, -1, 10000);
    ck_assert_int_eq(acquire_async("k", 1, &d), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("p", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(acquire_async("k", 1, &d), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 0, -1, 10000);
    ck_assert_int_eq(script_calls(), 1);
    /* another 4 (Redis: 8 counted), then 2 left: 4 are refused, 1 is asked for */
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(acquire_async("k", 1, &d), SLUICE_ALLOWED);
    ck_assert_int_eq(script_calls(), 2);
    ck_assert_int_eq(acquire_async("k", 1, &d), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 1, -1, 10000);
    ck_assert_int_eq(script_calls(), 4);
    /* the last one, then a denial */
    ck_assert_int_eq(acquire_async("k", 1, &d), SLUICE_ALLOWED);
    ck_assert_int_eq(acquire_async("k", 1, &d), SLUICE_DENIED);
    ck_assert_decision(d, FALSE, 10, 0, 10000, 10000);
    sluice_stats s;
    ck_assert(sluice_stats_get("p", &s, NULL));
    ck_assert_uint_eq(s.allowed, 11); /* the warm-up's too */
    ck_assert_uint_eq(s.prefetched, 6);
    ck_assert_uint_eq(s.denied, 1);
    sluice_shutdown();
}
END_TEST

/* Permits in hand are used only within prefetch_ttl of being counted (1 s: a tenth
 * of the window); then they are lost (Redis counted them) and the next call asks. */
START_TEST(permits_in_hand_expire_after_prefetch_ttl)
{
    fixture_clock_start(S);
    fixture_init(fixed);
    reset_script_calls();
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    fixture_clock_advance_ms(999);
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(script_calls(), 1);
    fixture_clock_advance_ms(1);
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 2 + 3, -1, 9000); /* 4 + 4 counted, 3 in hand */
    ck_assert_int_eq(script_calls(), 2);
    /* a reset drops what is in hand with the state */
    ck_assert(sluice_reset("p", NULL, NULL));
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(script_calls(), 3);
    sluice_shutdown();
}
END_TEST

/* The parent's permits in hand are the parent's: a child asks Redis. */
START_TEST(a_forked_child_starts_with_no_permits_in_hand)
{
    fixture_clock_start(S);
    fixture_init(fixed);
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    reset_script_calls();
    pid_t child = fork();
    if (child == 0) {
        sluice_decision d;
        int r = sluice_acquire("p", NULL, 1, &d, NULL);
        _exit(r == SLUICE_ALLOWED && d.remaining == 2 + 3 ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(script_calls(), 1);
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, NULL, NULL), SLUICE_ALLOWED); /* in hand */
    ck_assert_int_eq(script_calls(), 1);
    sluice_shutdown();
}
END_TEST

START_TEST(prefetch_is_refused_where_it_has_no_bound)
{
    static const char *const bad[] = {
        "[limit:x]\nalgorithm = sliding_log\nlimit = 10\nwindow = 1s\nprefetch = 2\n",
        "[limit:x]\nalgorithm = concurrency\nlimit = 10\nprefetch = 2\n",
        "[limit:x]\nalgorithm = fixed_window\nlimit = 10\nwindow = 1s\nprefetch = 11\n",
        "[limit:x]\nalgorithm = fixed_window\nlimit = 10\nwindow = 1s\nprefetch_ttl = 10ms\n",
        "[limit:x]\nalgorithm = gcra\nlimit = 10\nwindow = 1s\nprefetch = 2\nprefetch_ttl = 2s\n",
    };
    static const char *const why[] = {
        "prefetch = 2: applies only to fixed_window, sliding_window, token_bucket and gcra, not "
        "sliding_log",
        "prefetch = 2: applies only to fixed_window, sliding_window, token_bucket and gcra, not "
        "concurrency",
        "prefetch = 11: more than the 10 permits that can pass at once",
        "prefetch_ttl = 10ms: applies only with prefetch = 1 or more",
        "prefetch_ttl = 2s: longer than the window",
    };
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autofree char *path = fixture_write_keyfile(bad[i]);
        g_autoptr(GError) error = NULL;
        ck_assert(!sluice_config_check(path, &error));
        ck_assert_msg(strstr(error->message, why[i]), "%s", error->message);
        unlink(path);
    }
}
END_TEST

/* ---- across processes, on real time ------------------------------------------------------- */

#define PROCESSES 4
#define THREADS   4
#define RUN_US    (G_USEC_PER_SEC * 3 / 2)

static gint used;
static gint64 stop_at;

static gpointer use_permits(gpointer data)
{
    (void)data;
    while (g_get_monotonic_time() < stop_at)
        if (sluice_acquire("tb", "shared", 1, NULL, NULL) == SLUICE_ALLOWED)
            g_atomic_int_inc(&used);
    return NULL;
}

/* 4 processes x 4 threads on one token_bucket of 200/s (burst 20) with prefetch =
 * 10 (ttl 100 ms): together they use no more than burst + rate x (run + ttl), and
 * each process gets some. */
START_TEST(processes_with_prefetch_use_no_more_than_redis_counted)
{
    sluice_clock_set(NULL, NULL, NULL);
    g_autofree char *contents =
        fixture_contents("[limit:tb]\nalgorithm = token_bucket\nlimit = 200\nwindow = 1s\n"
                         "burst = 20\nprefetch = 10\nprefetch_ttl = 100ms\n");
    g_autofree char *path = fixture_write_keyfile(contents);
    freeReplyObject(test_redis_command(fixture_redis(), "FLUSHALL"));
    gint *counts = mmap(NULL, sizeof(gint) * PROCESSES, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(counts != MAP_FAILED);
    gint64 start = g_get_monotonic_time();
    pid_t children[PROCESSES];
    for (int p = 0; p < PROCESSES; p++) {
        children[p] = fork();
        if (children[p] == 0) {
            if (!sluice_init(path, NULL))
                _exit(2);
            stop_at = start + RUN_US;
            GThread *t[THREADS];
            for (int i = 0; i < THREADS; i++)
                t[i] = g_thread_new("use", use_permits, NULL);
            for (int i = 0; i < THREADS; i++)
                g_thread_join(t[i]);
            counts[p] = used;
            sluice_shutdown();
            _exit(0);
        }
    }
    for (int p = 0; p < PROCESSES; p++) {
        int status;
        ck_assert_int_eq(waitpid(children[p], &status, 0), children[p]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d", p);
    }
    gint64 run_us = g_get_monotonic_time() - start;
    gint total = 0;
    for (int p = 0; p < PROCESSES; p++) {
        ck_assert_int_gt(counts[p], 0); /* none starved */
        total += counts[p];
    }
    munmap(counts, sizeof(gint) * PROCESSES);
    unlink(path);
    gint64 bound = 20 + 200 * (run_us + 100000) / G_USEC_PER_SEC;
    ck_assert_msg(total <= bound, "%d used, bound %" G_GINT64_FORMAT, total, bound);
    ck_assert_int_gt(total, 200); /* they did use it */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("prefetch");
    TCase *exact = tcase_create("exact");
    tcase_add_test(exact, one_round_trip_takes_prefetch_permits);
    tcase_add_test(exact, the_asynchronous_api_takes_prefetch_permits);
    tcase_add_test(exact, permits_in_hand_expire_after_prefetch_ttl);
    tcase_add_test(exact, a_forked_child_starts_with_no_permits_in_hand);
    tcase_add_test(exact, prefetch_is_refused_where_it_has_no_bound);
    suite_add_tcase(s, exact);
    TCase *processes = tcase_create("processes");
    tcase_add_test(processes, processes_with_prefetch_use_no_more_than_redis_counted);
    suite_add_tcase(s, processes);
    return fixture_run(s);
}
