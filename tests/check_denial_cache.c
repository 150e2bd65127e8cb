/* SPDX-License-Identifier: MIT */
/* The denial cache against a real redis-server: the same verdicts as without it,
 * fields aged as docs/algorithms.md says, no round trip while a denial holds, and
 * a round trip again as soon as it may not. */
#include "fixture.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S G_GINT64_CONSTANT(1000250)

/* The script calls the server has run since the last CONFIG RESETSTAT. */
static gint64 script_calls(void)
{
    return test_redis_script_calls(fixture_redis());
}

static void reset_script_calls(void)
{
    redisReply *r = test_redis_command(fixture_redis(), "CONFIG RESETSTAT");
    ck_assert_ptr_nonnull(r);
    freeReplyObject(r);
}

static void init_with_cache(gboolean on, const char *rules)
{
    g_autofree char *contents =
        g_strdup_printf("[sluice]\ndenial_cache = %s\n%s", on ? "true" : "false", rules);
    fixture_init(contents);
}

/* ---- exact answers on the injected clock ------------------------------------------------- */

static const char *const algorithms[] = {"fixed_window", "sliding_log", "sliding_window",
                                         "token_bucket", "gcra"};

/* One call of a trace. */
typedef struct {
    gint64 at_us;
    int key;
    gint64 permits;
} step;

#define STEPS 400
#define KEYS  3

static void random_trace(step *trace, guint32 seed)
{
    GRand *rand = g_rand_new_with_seed(seed);
    gint64 t = S;
    for (int i = 0; i < STEPS; i++) {
        /* mostly close together, so that denials are asked again while they hold */
        t += g_rand_int_range(rand, 0, 10) < 8 ? g_rand_int_range(rand, 0, 40000)
                                               : g_rand_int_range(rand, 0, 900000);
        trace[i] = (step){t, g_rand_int_range(rand, 0, KEYS), g_rand_int_range(rand, 0, 6)};
    }
    g_rand_free(rand);
}

static void run_trace_at(const step *trace, const char *algorithm, int limit, gboolean cache,
                         sluice_decision *out, gint64 *cached)
{
    static const char *const keys[KEYS] = {"alice", "bob", NULL};
    g_autofree char *rules =
        g_strdup_printf("[limit:t]\nalgorithm = %s\nlimit = %d\nwindow = 1s\n", algorithm, limit);
    fixture_clock_start(S);
    init_with_cache(cache, rules);
    for (int i = 0; i < STEPS; i++) {
        fixture_clock_set(trace[i].at_us);
        ck_assert_int_ne(sluice_acquire("t", keys[trace[i].key], trace[i].permits, &out[i], NULL),
                         SLUICE_FAILED);
    }
    sluice_stats stats;
    ck_assert(sluice_stats_get("t", &stats, NULL));
    *cached = (gint64)stats.cached_denied;
    sluice_shutdown();
}

static void run_trace(const step *trace, const char *algorithm, gboolean cache,
                      sluice_decision *out, gint64 *cached)
{
    run_trace_at(trace, algorithm, 4, cache, out, cached);
}

/* Random traces, one caller, decided with the cache on and off: the same verdict on
 * every call, the same limit, and retry_after and reset_after never later than
 * without it (a cached denial's, aged: lower bounds, since admissions since then
 * and more permits than were denied can only push them later), -1 alike. */
START_TEST(random_traces_decide_alike_with_the_cache_on_and_off)
{
    const char *algorithm = algorithms[_i % G_N_ELEMENTS(algorithms)];
    static step trace[STEPS];
    static sluice_decision off[STEPS], on[STEPS];
    gint64 total_cached = 0, exact = 0;
    for (guint32 seed = 1; seed <= 3; seed++) {
        gint64 cached_off, cached_on;
        random_trace(trace, seed * 7919 + (guint32)_i);
        run_trace(trace, algorithm, FALSE, off, &cached_off);
        run_trace(trace, algorithm, TRUE, on, &cached_on);
        ck_assert_int_eq(cached_off, 0);
        total_cached += cached_on;
        for (int i = 0; i < STEPS; i++) {
            const sluice_decision *a = &off[i], *b = &on[i];
            gboolean same = a->retry_after_ms == b->retry_after_ms &&
                            a->reset_after_ms == b->reset_after_ms && a->remaining == b->remaining;
            exact += same;
            ck_assert_msg(a->allowed == b->allowed && a->limit == b->limit &&
                              b->reset_after_ms <= a->reset_after_ms &&
                              b->retry_after_ms <= a->retry_after_ms &&
                              (b->retry_after_ms == -1) == (a->retry_after_ms == -1),
                          "%s seed %u step %d (%" G_GINT64_FORMAT
                          " permits): off %d %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
                          " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT ", on %d %" G_GINT64_FORMAT
                          " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT,
                          algorithm, seed, i, trace[i].permits, a->allowed, a->limit, a->remaining,
                          a->retry_after_ms, a->reset_after_ms, b->allowed, b->limit, b->remaining,
                          b->retry_after_ms, b->reset_after_ms);
        }
    }
    ck_assert_int_gt(total_cached, 20); /* the traces did ask denials again */
    /* and most answers are the very same: a fresh state, or the same permits again */
    ck_assert_int_gt(exact, 3 * STEPS * 3 / 4);
}
END_TEST

/* The same traces: a cached denial's remaining and reset are what the key's state
 * gives at the time of the cached answer, as without the cache (fixed_window,
 * sliding_window, token_bucket and gcra, limit 4 per second: whole µs, and 3 per
 * second: the exact path's fractions); sliding_log's remaining is a lower bound
 * (entries leave the window meanwhile, docs/algorithms.md). */
START_TEST(a_cached_denial_ages_remaining_as_the_state_does)
{
    const char *algorithm = algorithms[_i % G_N_ELEMENTS(algorithms)];
    int limit = _i < (int)G_N_ELEMENTS(algorithms) ? 4 : 3;
    gboolean exact = strcmp(algorithm, "sliding_log") != 0;
    static step trace[STEPS];
    static sluice_decision off[STEPS], on[STEPS];
    gint64 total_cached = 0;
    for (guint32 seed = 1; seed <= 3; seed++) {
        gint64 cached_off, cached_on;
        random_trace(trace, seed * 104729 + (guint32)_i);
        run_trace_at(trace, algorithm, limit, FALSE, off, &cached_off);
        run_trace_at(trace, algorithm, limit, TRUE, on, &cached_on);
        total_cached += cached_on;
        for (int i = 0; i < STEPS; i++) {
            const sluice_decision *a = &off[i], *b = &on[i];
            ck_assert_msg(a->reset_after_ms == b->reset_after_ms &&
                              (exact ? b->remaining == a->remaining : b->remaining <= a->remaining),
                          "%s limit %d seed %u step %d: remaining %" G_GINT64_FORMAT
                          " reset %" G_GINT64_FORMAT " without the cache, %" G_GINT64_FORMAT
                          " and %" G_GINT64_FORMAT " with it",
                          algorithm, limit, seed, i, a->remaining, a->reset_after_ms, b->remaining,
                          b->reset_after_ms);
        }
    }
    ck_assert_int_gt(total_cached, 20);
}
END_TEST

/* The cached answer, field by field: retry and reset less the time since the
 * denied command was sent, remaining and limit as the backend said. */
START_TEST(a_cached_denial_ages_from_when_its_command_was_sent)
{
    fixture_clock_start(S);
    init_with_cache(TRUE, "[limit:fw]\nalgorithm = fixed_window\nlimit = 3\nwindow = 10s\n");
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("fw", "alice", 3, &d, NULL), SLUICE_ALLOWED);
    fixture_clock_advance_ms(1000);
    reset_script_calls();
    ck_assert_int_eq(sluice_acquire("fw", "alice", 1, &d, NULL), SLUICE_DENIED);
    ck_assert_decision(d, FALSE, 3, 0, 9000, 9000);
    fixture_clock_advance_ms(2500);
    ck_assert_int_eq(sluice_acquire("fw", "alice", 2, &d, NULL), SLUICE_DENIED);
    ck_assert_decision(d, FALSE, 3, 0, 6500, 6500);
    /* more than the capacity: never, from the rule */
    ck_assert_int_eq(sluice_acquire("fw", "alice", 4, &d, NULL), SLUICE_DENIED);
    ck_assert_decision(d, FALSE, 3, 0, -1, 6500);
    /* a peek is a call for one permit */
    ck_assert_int_eq(sluice_acquire("fw", "alice", 0, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(script_calls(), 1);
    /* fewer permits than were denied: the backend decides */
    sluice_shutdown();
}
END_TEST

START_TEST(the_first_call_after_retry_after_reaches_redis)
{
    fixture_clock_start(S);
    init_with_cache(TRUE, "[limit:fw]\nalgorithm = fixed_window\nlimit = 1\nwindow = 10s\n");
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("fw", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    reset_script_calls();
    ck_assert_int_eq(sluice_acquire("fw", NULL, 1, &d, NULL), SLUICE_DENIED);
    fixture_clock_advance_ms(9999);
    ck_assert_int_eq(sluice_acquire("fw", NULL, 1, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(script_calls(), 1);
    fixture_clock_advance_ms(1);
    ck_assert_int_eq(sluice_acquire("fw", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(script_calls(), 2);
    sluice_shutdown();
}
END_TEST

START_TEST(reset_and_a_changed_rule_drop_what_is_cached)
{
    fixture_clock_start(S);
    g_autofree char *path = fixture_write_keyfile("");
    const char *one = "[limit:fw]\nalgorithm = fixed_window\nlimit = 1\nwindow = 10s\n";
    g_autofree char *first = fixture_contents(one);
    g_autofree char *on = g_strconcat(first, "[sluice]\ndenial_cache = true\n", NULL);
    ck_assert(g_file_set_contents(path, on, -1, NULL));
    ck_assert(sluice_init(path, NULL));
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("fw", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("fw", "k", 1, &d, NULL), SLUICE_DENIED);
    ck_assert(sluice_reset("fw", "k", NULL));
    ck_assert_int_eq(sluice_acquire("fw", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("fw", "k", 1, &d, NULL), SLUICE_DENIED);
    /* the limit rises: the denial of the old rule no longer holds */
    g_autofree char *raised = g_strconcat(on, "[limit:fw]\nlimit = 2\n", NULL);
    ck_assert(g_file_set_contents(path, raised, -1, NULL));
    ck_assert(sluice_reload(NULL));
    ck_assert_int_eq(sluice_acquire("fw", "k", 1, &d, NULL), SLUICE_ALLOWED);
    sluice_shutdown();
    unlink(path);
}
END_TEST

START_TEST(stats_count_cached_denials_apart)
{
    fixture_clock_start(S);
    init_with_cache(TRUE, "[limit:g]\nalgorithm = gcra\nlimit = 1\nwindow = 1s\n");
    for (int i = 0; i < 5; i++)
        sluice_acquire("g", NULL, 1, NULL, NULL);
    sluice_stats s;
    ck_assert(sluice_stats_get("g", &s, NULL));
    ck_assert_uint_eq(s.allowed, 1);
    ck_assert_uint_eq(s.denied, 4);
    ck_assert_uint_eq(s.cached_denied, 3);
    g_autofree char *text = sluice_stats_prometheus();
    ck_assert_msg(strstr(text, "sluice_cached_denials_total{name=\"g\"} 3\n"), "%s", text);
    sluice_shutdown();
}
END_TEST

/* Off, every call is a round trip; concurrency and keys too long to keep are never
 * cached; the asynchronous API uses the cache too. */
static void async_done(GObject *source, GAsyncResult *result, gpointer data)
{
    (void)source;
    sluice_decision d;
    *(int *)data = sluice_acquire_finish(result, &d, NULL);
}

START_TEST(what_the_cache_leaves_to_the_backend)
{
    fixture_clock_start(S);
    const char *rules = "[limit:fw]\nalgorithm = fixed_window\nlimit = 1\nwindow = 10s\n"
                        "[limit:cc]\nalgorithm = concurrency\nlimit = 1\n";
    char long_key[300]; /* longer than the cache keeps */
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    for (int on = 0; on < 2; on++) {
        init_with_cache(on, rules);
        sluice_acquire("fw", NULL, 1, NULL, NULL);
        sluice_acquire("fw", long_key, 1, NULL, NULL);
        sluice_acquire("cc", NULL, 1, NULL, NULL);
        reset_script_calls();
        for (int i = 0; i < 10; i++) {
            ck_assert_int_eq(sluice_acquire("fw", NULL, 1, NULL, NULL), SLUICE_DENIED);
            ck_assert_int_eq(sluice_acquire("fw", long_key, 1, NULL, NULL), SLUICE_DENIED);
            ck_assert_int_eq(sluice_acquire("cc", NULL, 1, NULL, NULL), SLUICE_DENIED);
        }
        ck_assert_int_eq(script_calls(), on ? 1 + 10 + 10 : 30);
        int code = 99;
        sluice_acquire_async("fw", NULL, 1, NULL, async_done, &code);
        while (code == 99)
            g_main_context_iteration(NULL, TRUE);
        ck_assert_int_eq(code, SLUICE_DENIED);
        ck_assert_int_eq(script_calls(), on ? 21 : 31);
        sluice_shutdown();
    }
}
END_TEST

/* ---- real time ------------------------------------------------------------------------------ */

#define FLOOD_THREADS 16
static gint flood_allowed;
static gint64 flood_end;

static gpointer flood(gpointer data)
{
    (void)data;
    while (g_get_monotonic_time() < flood_end)
        if (sluice_acquire("flood", "attacker", 1, NULL, NULL) == SLUICE_ALLOWED)
            g_atomic_int_inc(&flood_allowed);
    return NULL;
}

/* 16 threads flood a limit of one call per 250 ms for 1 s: a few round trips per
 * retry period reach Redis, not one per call, and every period still admits its
 * call (the first call after retry_after goes to Redis). */
START_TEST(a_denied_flood_costs_redis_a_few_commands_per_retry_period)
{
    sluice_clock_set(NULL, NULL, NULL);
    init_with_cache(TRUE, "[limit:flood]\nalgorithm = fixed_window\nlimit = 1\nwindow = 250ms\n");
    reset_script_calls();
    flood_allowed = 0;
    gint64 start = g_get_monotonic_time();
    flood_end = start + 1000000;
    GThread *threads[FLOOD_THREADS];
    for (int i = 0; i < FLOOD_THREADS; i++)
        threads[i] = g_thread_new("flood", flood, NULL);
    for (int i = 0; i < FLOOD_THREADS; i++)
        g_thread_join(threads[i]);
    gint64 periods = (g_get_monotonic_time() - start + 249999) / 250000; /* windows begun */
    sluice_stats s;
    ck_assert(sluice_stats_get("flood", &s, NULL));
    gint64 calls = script_calls();
    sluice_shutdown();
    g_printerr("check_denial_cache: %" G_GINT64_FORMAT " script calls for %" G_GUINT64_FORMAT
               " decisions in %" G_GINT64_FORMAT " windows\n",
               calls, s.allowed + s.denied, periods);
    /* each window admits its one call, and no more */
    ck_assert_int_le(flood_allowed, periods);
    ck_assert_int_ge(flood_allowed, 3);
    /* a window's admission and first denial, the threads that asked before that
     * denial came back, and again in the moment between the cached denial's end
     * (counted from when it was sent) and the window's: two per thread a window */
    ck_assert_msg(calls <= periods * (2 * FLOOD_THREADS + 2),
                  "%" G_GINT64_FORMAT " script calls for %" G_GUINT64_FORMAT " decisions", calls,
                  s.allowed + s.denied);
    ck_assert_uint_gt(s.cached_denied, 100 * (guint64)calls);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("denial_cache");
    TCase *exact = tcase_create("exact");
    tcase_add_loop_test(exact, random_traces_decide_alike_with_the_cache_on_and_off, 0,
                        G_N_ELEMENTS(algorithms));
    tcase_add_loop_test(exact, a_cached_denial_ages_remaining_as_the_state_does, 0,
                        2 * G_N_ELEMENTS(algorithms));
    tcase_add_test(exact, a_cached_denial_ages_from_when_its_command_was_sent);
    tcase_add_test(exact, the_first_call_after_retry_after_reaches_redis);
    tcase_add_test(exact, reset_and_a_changed_rule_drop_what_is_cached);
    tcase_add_test(exact, stats_count_cached_denials_apart);
    tcase_add_test(exact, what_the_cache_leaves_to_the_backend);
    suite_add_tcase(s, exact);
    TCase *flooded = tcase_create("flood");
    tcase_add_test(flooded, a_denied_flood_costs_redis_a_few_commands_per_retry_period);
    suite_add_tcase(s, flooded);
    return fixture_run(s);
}
