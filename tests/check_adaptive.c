/* SPDX-License-Identifier: MIT */
/* algorithm = adaptive through the public API: calls in flight under a limit their
 * latency sets, through sluice_acquire and sluice_release_outcome and through the
 * decorated forms, on an injected clock; decided in process on every backend; and,
 * on the real clock, against a real overloaded downstream in the test: a pool of C
 * slots that each call holds for a few milliseconds while the others queue. */
#include "fixture.h"
#include "testing.h"

#include <string.h>

#include <glib/gstdio.h>

#include "unconst.h"

#define S G_GINT64_CONSTANT(1000250)

static const char grows[] = "[limit:a]\n"
                            "algorithm = adaptive\n"
                            "limit = 16\n";

static gint64 adaptive_limit(const char *name)
{
    sluice_stats stats;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_stats_get(name, &stats, &error), "%s", error ? error->message : "");
    return stats.adaptive_limit;
}

/* One round of calls on the injected clock: as many as the limit lets through at
 * once, each taking 5 ms, ended as `outcome`. Returns the limit after it. */
static gint64 round_of_calls(const char *name, sluice_outcome outcome)
{
    int admitted = 0;
    while (sluice_acquire(name, NULL, 1, NULL, NULL) == SLUICE_ALLOWED)
        admitted++;
    fixture_clock_advance_ms(5);
    for (int i = 0; i < admitted; i++)
        sluice_release_outcome(name, NULL, 1, outcome);
    return adaptive_limit(name);
}

/* The limits one after another over `rounds` rounds, each once: "1 2 3 5". */
static char *limits_over(const char *name, int rounds, sluice_outcome outcome)
{
    GString *seen = g_string_new(NULL);
    gint64 last = -1;
    for (int i = 0; i < rounds; i++) {
        gint64 limit = round_of_calls(name, outcome);
        if (limit != last)
            g_string_append_printf(seen, "%s%" G_GINT64_FORMAT, seen->len ? " " : "", limit);
        last = limit;
    }
    return g_string_free(seen, FALSE);
}

/* ---- acquire and release ------------------------------------------------------- */

START_TEST(acquire_counts_calls_in_flight_under_a_limit_that_starts_at_its_floor)
{
    fixture_clock_start(S);
    fixture_init("[limit:a]\nalgorithm = adaptive\nlimit = 10\nmin_limit = 2\n");
    /* no window has closed: a call in flight is expected back within 1 µs, rounded up */
    ck_acquire("a", NULL, 1, TRUE, 2, 1, -1, 1);
    ck_acquire("a", "alice", 1, TRUE, 2, 0, -1, 1); /* the key is ignored */
    ck_acquire("a", NULL, 1, FALSE, 2, 0, 1, 1);
    ck_acquire("a", NULL, 0, FALSE, 2, 0, 1, 1);   /* a peek */
    ck_acquire("a", NULL, 11, FALSE, 2, 0, -1, 1); /* more than it may ever grow to */
    sluice_release("a", NULL, 1);
    ck_acquire("a", NULL, 0, TRUE, 2, 1, -1, 1);
    sluice_release_outcome("a", NULL, 5, SLUICE_OUTCOME_IGNORE); /* more than in flight */
    ck_acquire("a", NULL, 0, TRUE, 2, 2, -1, 0);
    ck_assert_int_eq(adaptive_limit("a"), 2);
    sluice_shutdown();
}
END_TEST

/* Every round fills the limit and takes 5 ms, the no-load latency: gradient adds
 * sqrt(limit) per window, 1 2 3.41 5.26 7.56 10.3 13.5, then the ceiling. Every
 * dropped round takes the limit three quarters of the way, to its floor. */
START_TEST(ok_calls_grow_the_limit_and_dropped_ones_shrink_it)
{
    fixture_clock_start(S);
    fixture_init(grows);
    g_autofree char *up = limits_over("a", 400, SLUICE_OUTCOME_OK);
    ck_assert_str_eq(up, "1 2 3 5 7 10 13 16");
    g_autofree char *text = sluice_stats_prometheus();
    ck_assert_ptr_nonnull(strstr(text, "# TYPE sluice_adaptive_limit gauge\n"
                                       "sluice_adaptive_limit{name=\"a\"} 16\n"));
    /* 16 12 9 6.75 5.06 3.8 2.85 2.14 1.6 1.2, then the floor */
    g_autofree char *down = limits_over("a", 400, SLUICE_OUTCOME_DROPPED);
    ck_assert_str_eq(down, "16 12 9 6 5 3 2 1");
    sluice_shutdown();
}
END_TEST

START_TEST(ignored_calls_leave_the_limit_alone)
{
    fixture_clock_start(S);
    fixture_init(grows);
    g_autofree char *seen = limits_over("a", 400, SLUICE_OUTCOME_IGNORE);
    ck_assert_str_eq(seen, "1");
    sluice_shutdown();
}
END_TEST

/* A call admitted on one thread and ended on another has no latency of its own: it
 * is given back, and is no sample. */
static gpointer release_one(gpointer name)
{
    sluice_release(name, NULL, 1);
    return NULL;
}

START_TEST(a_call_ended_on_another_thread_is_given_back_without_a_sample)
{
    fixture_clock_start(S);
    fixture_init(grows);
    for (int i = 0; i < 400; i++) {
        ck_assert_int_eq(sluice_acquire("a", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
        fixture_clock_advance_ms(5);
        g_thread_join(g_thread_new("release", release_one, test_unconst("a")));
    }
    ck_assert_int_eq(adaptive_limit("a"), 1);
    ck_acquire("a", NULL, 0, TRUE, 1, 1, -1, 0); /* and nothing is left in flight */
    sluice_shutdown();
}
END_TEST

START_TEST(shadow_mode_counts_what_it_would_refuse)
{
    fixture_clock_start(S);
    fixture_init("[limit:a]\nalgorithm = adaptive\nlimit = 10\nmode = shadow\n");
    ck_acquire("a", NULL, 1, TRUE, 1, 0, -1, 1);
    ck_acquire("a", NULL, 1, TRUE, 1, 0, -1, 1); /* over the limit: passes, counted */
    sluice_stats stats;
    ck_assert(sluice_stats_get("a", &stats, NULL));
    ck_assert_uint_eq(stats.allowed, 1);
    ck_assert_uint_eq(stats.shadow_denied, 1);
    sluice_shutdown();
}
END_TEST

START_TEST(reset_forgets_what_the_limit_learnt)
{
    fixture_clock_start(S);
    fixture_init(grows);
    g_free(limits_over("a", 400, SLUICE_OUTCOME_OK));
    ck_assert_int_eq(adaptive_limit("a"), 16);
    ck_assert(sluice_reset("a", NULL, NULL));
    ck_assert_int_eq(adaptive_limit("a"), 1);
    ck_acquire("a", NULL, 1, TRUE, 1, 0, -1, 1);
    sluice_shutdown();
}
END_TEST

/* A reload keeps what the limit learnt, within the new bounds. */
START_TEST(reload_keeps_the_limit_within_its_new_bounds)
{
    fixture_clock_start(S);
    g_autofree char *contents = fixture_contents(grows);
    g_autofree char *path = fixture_write_keyfile(contents);
    ck_assert(sluice_init(path, NULL));
    g_free(limits_over("a", 400, SLUICE_OUTCOME_OK));
    ck_assert_int_eq(adaptive_limit("a"), 16);
    g_autofree char *lower =
        fixture_contents("[limit:a]\nalgorithm = adaptive\nlimit = 8\ncontroller = aimd\n");
    ck_assert(g_file_set_contents(path, lower, -1, NULL));
    ck_assert(sluice_reload(NULL));
    ck_assert_int_eq(adaptive_limit("a"), 8);
    ck_acquire("a", NULL, 0, TRUE, 8, 8, -1, 0);
    sluice_rule_info rule;
    ck_assert(sluice_rule_get("a", &rule, NULL));
    ck_assert_str_eq(rule.algorithm, "adaptive");
    ck_assert_int_eq(rule.limit, 8);
    ck_assert_int_eq(rule.min_limit, 1);
    ck_assert_str_eq(rule.controller, "aimd");
    ck_assert_int_eq(rule.per_key, FALSE);
    sluice_shutdown();
    g_unlink(path);
}
END_TEST

/* ---- the decorated forms ----------------------------------------------------- */

static int degraded_calls, failed_calls;

static int slow_busy(int ms)
{
    (void)ms;
    degraded_calls++;
    return -1;
}

static int slow_failed(const GError *error, const sluice_decision *verdict, int ms);

/* The body takes ms of the injected clock: its latency, from call to return. */
RATE_LIMITED_FUNCTION(int, slow, (int ms), (ms), "fn", slow_busy, slow_failed)
{
    fixture_clock_advance_ms(ms);
    return ms;
}

static int slow_failed(const GError *error, const sluice_decision *verdict, int ms)
{
    (void)error;
    (void)verdict;
    (void)ms;
    failed_calls++;
    return -2;
}

static void guarded(int ms, int *result)
{
    RATE_LIMITED("fn", *result = -1; return );
    fixture_clock_advance_ms(ms);
    *result = ms;
}

/* Loads a limit of 50 on "fn" and calls slow() 200 times, one at a time: in flight
 * there is never more than one, so the limit grows while half of it is in use, 1 2
 * 3.41, and no further. */
static void grow_fn(void)
{
    fixture_clock_start(S);
    fixture_init("[limit:fn]\nalgorithm = adaptive\nlimit = 50\n");
    degraded_calls = failed_calls = 0;
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(slow(5), 5);
    ck_assert_int_eq(adaptive_limit("fn"), 3);
}

START_TEST(a_decorated_body_is_timed_from_its_call_to_its_return)
{
    grow_fn();
    for (int i = 0, r; i < 200; i++) {
        guarded(5, &r);
        ck_assert_int_eq(r, 5);
    }
    ck_assert_int_eq(adaptive_limit("fn"), 3);
    ck_assert_int_eq(degraded_calls, 0);
    ck_acquire("fn", NULL, 0, TRUE, 3, 3, -1, 0); /* each call ended at its return */
    sluice_shutdown();
}
END_TEST

/* A refused call ran no body: it is degraded and is no sample. */
START_TEST(a_degraded_call_is_no_sample)
{
    grow_fn();
    ck_acquire("fn", NULL, 3, TRUE, 3, 0, -1, 5); /* the last median: 5 ms */
    for (int i = 0; i < 200; i++) {
        ck_assert_int_eq(slow(5), -1);
        fixture_clock_advance_ms(5);
    }
    ck_assert_int_eq(degraded_calls, 200);
    ck_assert_int_eq(adaptive_limit("fn"), 3); /* no window closed */
    sluice_release_outcome("fn", NULL, 3, SLUICE_OUTCOME_IGNORE);
    sluice_stats stats;
    ck_assert(sluice_stats_get("fn", &stats, NULL));
    ck_assert_uint_eq(stats.degraded, 200);
    sluice_shutdown();
}
END_TEST

/* A call an error callback answers counts as a drop: the limit falls. */
START_TEST(an_error_callback_answer_counts_as_a_drop)
{
    grow_fn();
    sluice_testing_fail_backend(60, "the limiter failed");
    for (int i = 0; i < 60; i++) {
        ck_assert_int_eq(slow(5), -2);
        fixture_clock_advance_ms(5);
    }
    ck_assert_int_eq(failed_calls, 60);
    /* 3.41 2.56 1.92 ...: two windows of drops at least */
    ck_assert_int_le(adaptive_limit("fn"), 1);
    sluice_shutdown();
}
END_TEST

/* ---- waiting, backends ------------------------------------------------------- */

static gpointer release_later(gpointer name)
{
    g_usleep(100 * 1000);
    sluice_release(name, NULL, 1);
    return NULL;
}

/* A caller that may wait is woken when a call ends (real clock). */
START_TEST(a_waiting_caller_passes_when_a_call_ends)
{
    fixture_init("[limit:w]\nalgorithm = adaptive\nlimit = 4\nwait = 5s\n");
    ck_assert_int_eq(sluice_acquire("w", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    GThread *t = g_thread_new("release", release_later, test_unconst("w"));
    gint64 start = g_get_monotonic_time();
    ck_assert_int_eq(sluice_acquire("w", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    gint64 took = g_get_monotonic_time() - start;
    g_thread_join(t);
    ck_assert_int_ge(took, 90 * 1000);
    ck_assert_int_le(took, 4 * G_USEC_PER_SEC * fixture_time_scale());
    sluice_shutdown();
}
END_TEST

/* On Redis an adaptive rule still decides in process: each process measures its own
 * downstream, and nothing is written to Redis. */
START_TEST(an_adaptive_rule_decides_in_process_on_redis)
{
    fixture_clock_start(S);
    fixture_init(grows);
    g_autofree char *up = limits_over("a", 400, SLUICE_OUTCOME_OK);
    ck_assert_str_eq(up, "1 2 3 5 7 10 13 16");
    ck_assert_int_eq(fixture_keys(), 0);
    sluice_shutdown();
}
END_TEST

/* ---- a real overloaded downstream ------------------------------------------------ */

#define CALLERS 64
/* Each call holds a slot this long: a few ms, and longer under a sanitizer, whose
 * slower locks and limiter would otherwise take a larger share of each call. */
#if defined(__SANITIZE_THREAD__)
#define HOLD_US 20000
#elif defined(__SANITIZE_ADDRESS__)
#define HOLD_US 10000
#else
#define HOLD_US 5000
#endif

/* The downstream: `capacity` slots; a call takes one, waiting in order of arrival
 * while none is free, holds it HOLD_US, and gives it back. busy_us sums the time
 * slots were held. */
static struct {
    GMutex lock;
    GCond changed;
    int capacity, busy;
    guint64 tickets, admitted; /* arrivals so far, and how many of them took a slot */
    gint64 busy_us;
} pool;

static void pool_call(void)
{
    g_mutex_lock(&pool.lock);
    guint64 ticket = pool.tickets++;
    while (ticket != pool.admitted || pool.busy >= pool.capacity)
        g_cond_wait(&pool.changed, &pool.lock);
    pool.admitted++;
    pool.busy++;
    g_cond_broadcast(&pool.changed); /* the next in line may take a slot too */
    g_mutex_unlock(&pool.lock);
    gint64 start = g_get_monotonic_time();
    g_usleep(HOLD_US);
    gint64 held = g_get_monotonic_time() - start;
    g_mutex_lock(&pool.lock);
    pool.busy--;
    pool.busy_us += held;
    g_cond_broadcast(&pool.changed);
    g_mutex_unlock(&pool.lock);
}

static void pool_set(int capacity)
{
    g_mutex_lock(&pool.lock);
    pool.capacity = capacity;
    g_cond_broadcast(&pool.changed);
    g_mutex_unlock(&pool.lock);
}

static gint64 pool_busy_us(void)
{
    g_mutex_lock(&pool.lock);
    gint64 us = pool.busy_us;
    g_mutex_unlock(&pool.lock);
    return us;
}

/* Refused: the caller backs off a little, as a client of an overloaded service would. */
static int downstream_busy(void)
{
    g_usleep(2000);
    return 0;
}

RATE_LIMITED_FUNCTION(int, call_limited, (void), (), "downstream", downstream_busy, NULL)
{
    pool_call();
    return 1;
}

RATE_LIMITED_FUNCTION(int, call_bare, (void), (), "downstream.bare", downstream_busy, NULL)
{
    pool_call();
    return 1;
}

/* What the callers of one run measured. */
typedef struct {
    int (*call)(void);
    gint stop; /* atomic */
    GMutex lock;
    GArray *latencies; /* gint64 µs of admitted calls */
} run;

static gpointer caller(gpointer p)
{
    run *r = p;
    while (!g_atomic_int_get(&r->stop)) {
        gint64 start = g_get_monotonic_time();
        if (r->call() != 1)
            continue;
        gint64 took = g_get_monotonic_time() - start;
        g_mutex_lock(&r->lock);
        g_array_append_val(r->latencies, took);
        g_mutex_unlock(&r->lock);
    }
    return NULL;
}

/* The admitted calls measured so far. */
static guint calls_of(run *r)
{
    g_mutex_lock(&r->lock);
    guint n = r->latencies->len;
    g_mutex_unlock(&r->lock);
    return n;
}

static gint compare_us(gconstpointer a, gconstpointer b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
    return x < y ? -1 : x > y;
}

/* The median of the latencies measured since *from (an index), which moves to the end. */
static gint64 p50_since(run *r, guint *from)
{
    g_mutex_lock(&r->lock);
    g_autoptr(GArray) part = g_array_new(FALSE, FALSE, sizeof(gint64));
    g_array_append_vals(part, &g_array_index(r->latencies, gint64, *from),
                        r->latencies->len - *from);
    *from = r->latencies->len;
    g_mutex_unlock(&r->lock);
    g_array_sort(part, compare_us);
    return part->len ? g_array_index(part, gint64, part->len / 2) : 0;
}

static void start_callers(run *r, int (*call)(void), GThread **threads, int n)
{
    r->call = call;
    r->stop = 0;
    g_mutex_init(&r->lock);
    r->latencies = g_array_new(FALSE, FALSE, sizeof(gint64));
    for (int i = 0; i < n; i++)
        threads[i] = g_thread_new("caller", caller, r);
}

static void stop_callers(run *r, GThread **threads, int n)
{
    g_atomic_int_set(&r->stop, 1);
    for (int i = 0; i < n; i++)
        g_thread_join(threads[i]);
}

static void run_clear(run *r)
{
    g_array_unref(r->latencies);
    g_mutex_clear(&r->lock);
}

/* The utilisation of the pool's slots over a phase: slot time held / (slots x time).
 * It is the admitted throughput as a share of the pool's capacity, measured on the
 * slots themselves, so a machine that oversleeps the hold does not skew it. */
typedef struct {
    gint64 at_us, busy_us;
} mark;

static mark mark_now(void)
{
    return (mark){g_get_monotonic_time(), pool_busy_us()};
}

static double utilisation(mark from, mark to, int slots)
{
    return (double)(to.busy_us - from.busy_us) / ((double)slots * (double)(to.at_us - from.at_us));
}

/* Waits ms, reading the limit of `name` every 20 ms: *lo and *hi its range. */
static void watch(const char *name, gint64 ms, gint64 *lo, gint64 *hi)
{
    *lo = G_MAXINT64;
    *hi = 0;
    for (gint64 end = g_get_monotonic_time() + ms * 1000; g_get_monotonic_time() < end;) {
        g_usleep(20 * 1000);
        gint64 limit = adaptive_limit(name);
        *lo = MIN(*lo, limit);
        *hi = MAX(*hi, limit);
    }
}

/* 64 callers on a pool of 8 slots (5 ms each, HOLD_US), then 4: with the rule, the pool stays
 * busy (admitted throughput at least 0.8 of its capacity), the admitted calls take
 * no more than twice the no-load latency, and the limit follows the drop within 3 s;
 * without the rule (the baseline) every call waits in the queue. */
START_TEST(an_adaptive_limit_keeps_an_overloaded_downstream_busy_and_its_latency_low)
{
    g_mutex_init(&pool.lock);
    g_cond_init(&pool.changed);
    pool_set(8);
    fixture_init("[limit:downstream]\nalgorithm = adaptive\nlimit = 200\n");
    GThread *threads[CALLERS];

    /* the no-load latency: one caller, nothing queues; the median of 50 calls */
    run alone = {0};
    start_callers(&alone, call_bare, threads, 1);
    for (gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
         g_get_monotonic_time() < end && calls_of(&alone) < 50;)
        g_usleep(10 * 1000);
    stop_callers(&alone, threads, 1);
    guint from = 0;
    gint64 no_load = p50_since(&alone, &from);
    run_clear(&alone);

    /* the baseline: no rule, 64 callers queue for 8 slots */
    run bare = {0};
    start_callers(&bare, call_bare, threads, CALLERS);
    g_usleep(200 * 1000);
    from = calls_of(&bare);
    mark b0 = mark_now();
    g_usleep(800 * 1000);
    mark b1 = mark_now();
    gint64 bare_p50 = p50_since(&bare, &from);
    stop_callers(&bare, threads, CALLERS);
    run_clear(&bare);

    /* the rule: 8 slots, then 4 */
    run limited = {0};
    gint64 lo8, hi8, lo4, hi4, ignored;
    start_callers(&limited, call_limited, threads, CALLERS);
    g_usleep(1000 * 1000); /* it grows from 1 */
    guint from8 = calls_of(&limited);
    mark l0 = mark_now();
    watch("downstream", 1500, &lo8, &hi8);
    mark l1 = mark_now();
    pool_set(4);
    gint64 dropped_at = g_get_monotonic_time(), followed_after = -1;
    while (g_get_monotonic_time() - dropped_at < 3 * G_USEC_PER_SEC * fixture_time_scale()) {
        if (adaptive_limit("downstream") <= 6) { /* under 4.4 + sqrt(4.4): gradient's range */
            followed_after = g_get_monotonic_time() - dropped_at;
            break;
        }
        g_usleep(20 * 1000);
    }
    watch("downstream", 500, &ignored, &ignored);
    guint from4 = calls_of(&limited);
    mark l2 = mark_now();
    watch("downstream", 1500, &lo4, &hi4);
    mark l3 = mark_now();
    stop_callers(&limited, threads, CALLERS);
    gint64 p50_8 = p50_since(&limited, &from8);
    gint64 p50_4 = p50_since(&limited, &from4);
    from = 0;
    gint64 p50_all = p50_since(&limited, &from);
    run_clear(&limited);
    sluice_shutdown();

    double u_bare = utilisation(b0, b1, 8), u8 = utilisation(l0, l1, 8),
           u4 = utilisation(l2, l3, 4);
    g_printerr("no load: p50 %" G_GINT64_FORMAT " us; no rule: p50 %" G_GINT64_FORMAT
               " us, busy %.2f; adaptive, 8 slots: limit %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT
               ", p50 %" G_GINT64_FORMAT " us, busy %.2f; 4 slots: followed in %" G_GINT64_FORMAT
               " ms, limit %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT ", p50 %" G_GINT64_FORMAT
               " us, busy %.2f; whole run p50 %" G_GINT64_FORMAT " us\n",
               no_load, bare_p50, u_bare, lo8, hi8, p50_8, u8, followed_after / 1000, lo4, hi4,
               p50_4, u4, p50_all);
    ck_assert_int_gt(no_load, 0);
    ck_assert_msg(bare_p50 > 2 * no_load, "without the rule the calls should queue");
    ck_assert_msg(u8 >= 0.8 && u4 >= 0.8, "the pool was busy %.2f, %.2f of the time", u8, u4);
    ck_assert_msg(p50_all <= 2 * no_load && p50_8 <= 2 * no_load && p50_4 <= 2 * no_load,
                  "admitted p50 %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                  " µs against %" G_GINT64_FORMAT " µs with no load",
                  p50_all, p50_8, p50_4, no_load);
    ck_assert_msg(followed_after >= 0, "the limit did not follow the drop within 3 s");
    ck_assert_msg(hi4 < hi8 && lo4 < lo8, "the limit on 4 slots should be lower than on 8");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("adaptive");
    TCase *api = tcase_create("api");
    tcase_add_test(api, acquire_counts_calls_in_flight_under_a_limit_that_starts_at_its_floor);
    tcase_add_test(api, ok_calls_grow_the_limit_and_dropped_ones_shrink_it);
    tcase_add_test(api, ignored_calls_leave_the_limit_alone);
    tcase_add_test(api, a_call_ended_on_another_thread_is_given_back_without_a_sample);
    tcase_add_test(api, shadow_mode_counts_what_it_would_refuse);
    tcase_add_test(api, reset_forgets_what_the_limit_learnt);
    tcase_add_test(api, reload_keeps_the_limit_within_its_new_bounds);
    tcase_add_test(api, a_decorated_body_is_timed_from_its_call_to_its_return);
    tcase_add_test(api, a_degraded_call_is_no_sample);
    tcase_add_test(api, an_error_callback_answer_counts_as_a_drop);
    tcase_add_test(api, a_waiting_caller_passes_when_a_call_ends);
    if (fixture_on_redis())
        tcase_add_test(api, an_adaptive_rule_decides_in_process_on_redis);
    suite_add_tcase(s, api);
    if (!fixture_on_redis()) { /* the same in-process limiter: once is enough */
        TCase *real = tcase_create("downstream");
        tcase_set_timeout(real, 120);
        tcase_add_test(real,
                       an_adaptive_limit_keeps_an_overloaded_downstream_busy_and_its_latency_low);
        suite_add_tcase(s, real);
    }
    return fixture_run(s);
}
