/* SPDX-License-Identifier: MIT */
/* Threads: 8 threads hammer one limit for a second on the real clock; the times the
 * limiter used are captured, and no window ever admits more than the rule allows.
 * On a stopped clock, threads on one limit admit exactly what one thread would. */
#include "fixture.h"

#define THREADS      8
#define RUN_US       1000000
#define MAX_ADMITTED 200000

/* The clock hook is the real monotonic clock; it remembers, per thread, the time
 * the limiter read for that thread's last decision. */
static __thread gint64 decided_at;
static gint64 real_clock(gpointer user_data)
{
    (void)user_data;
    return decided_at = g_get_monotonic_time();
}

static gint64 admitted[MAX_ADMITTED];
static gint n_admitted;
static gint in_flight, most_in_flight;
static const char *hammered;

static gpointer hammer(gpointer data)
{
    (void)data;
    gint64 end = g_get_monotonic_time() + RUN_US;
    while (g_get_monotonic_time() < end) {
        if (sluice_acquire(hammered, NULL, 1, NULL, NULL) != SLUICE_ALLOWED)
            continue;
        gint i = g_atomic_int_add(&n_admitted, 1);
        ck_assert_int_lt(i, MAX_ADMITTED);
        admitted[i] = decided_at;
    }
    return NULL;
}

static gint cmp_time(gconstpointer a, gconstpointer b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
    return x < y ? -1 : x > y;
}

/* Runs THREADS hammering threads on `name`; returns the sorted admission times. */
static gint run_hammer(const char *keyfile, const char *name)
{
    GThread *threads[THREADS];
    sluice_clock_set(real_clock, NULL, NULL);
    fixture_init(keyfile);
    hammered = name;
    n_admitted = 0;
    for (int i = 0; i < THREADS; i++)
        threads[i] = g_thread_new("hammer", hammer, NULL);
    for (int i = 0; i < THREADS; i++)
        g_thread_join(threads[i]);
    sluice_shutdown();
    qsort(admitted, n_admitted, sizeof admitted[0], (GCompareFunc)cmp_time);
    return n_admitted;
}

/* The most admissions in any half-open interval (t - width, t]. */
static gint most_in_any(gint n, gint64 width)
{
    gint most = 0;
    for (gint hi = 0, lo = 0; hi < n; hi++) {
        while (admitted[lo] <= admitted[hi] - width)
            lo++;
        most = MAX(most, hi - lo + 1);
    }
    return most;
}

START_TEST(sliding_log_never_admits_more_than_the_limit_in_any_window)
{
    gint n = run_hammer("[limit:x]\nalgorithm = sliding_log\nlimit = 50\nwindow = 100ms\n", "x");
    ck_assert_int_le(most_in_any(n, 100000), 50);
    /* demand exceeds the limit all along: about 10 windows' worth get through
     * (a loose floor, a third of it: a loaded machine deschedules the threads) */
    ck_assert_int_ge(n, 100);
}
END_TEST

START_TEST(fixed_window_never_admits_more_than_the_limit_in_one_window)
{
    gint n = run_hammer("[limit:x]\nalgorithm = fixed_window\nlimit = 50\nwindow = 100ms\n", "x");
    /* windows start at their first admission and last 100 ms */
    gint64 start = admitted[0];
    gint in_window = 0;
    for (gint i = 0; i < n; i++) {
        if (admitted[i] >= start + 100000) {
            start = admitted[i];
            in_window = 0;
        }
        ck_assert_int_le(++in_window, 50);
    }
    ck_assert_int_le(most_in_any(n, 100000), 100);
    ck_assert_int_ge(n, 100);
}
END_TEST

START_TEST(sliding_window_never_admits_more_than_the_limit_in_an_aligned_window)
{
    gint n = run_hammer("[limit:x]\nalgorithm = sliding_window\nlimit = 50\nwindow = 100ms\n", "x");
    for (gint i = 0, j; i < n; i = j) {
        for (j = i; j < n && admitted[j] / 100000 == admitted[i] / 100000; j++)
            ;
        ck_assert_int_le(j - i, 50);
    }
    ck_assert_int_ge(n, 80);
}
END_TEST

/* token_bucket and gcra: burst at once, then one per interval T. */
static void check_bucket(gint n, gint64 burst, gint64 t)
{
    for (gint i = 0; i < n; i++)
        for (gint j = i; j < n; j++)
            ck_assert_int_le(j - i + 1, burst + (admitted[j] - admitted[i]) / t + 1);
}

START_TEST(token_bucket_never_admits_more_than_burst_plus_refill)
{
    gint n = run_hammer("[limit:x]\nalgorithm = token_bucket\nlimit = 50\nwindow = 100ms\n"
                        "burst = 20\n",
                        "x");
    check_bucket(n, 20, 2000);
    ck_assert_int_ge(n, 100);
}
END_TEST

START_TEST(gcra_never_admits_more_than_burst_plus_emission)
{
    gint n =
        run_hammer("[limit:x]\nalgorithm = gcra\nlimit = 50\nwindow = 100ms\nburst = 20\n", "x");
    check_bucket(n, 20, 2000);
    ck_assert_int_ge(n, 100);
}
END_TEST

/* ---- exact counts on a stopped clock ------------------------------------------------ */

#define CALLS 2000 /* per thread */

static gint exact_admitted;

static gpointer call_hammered(gpointer data)
{
    (void)data;
    for (int i = 0; i < CALLS; i++)
        if (sluice_acquire(hammered, NULL, 1, NULL, NULL) == SLUICE_ALLOWED)
            g_atomic_int_inc(&exact_admitted);
    return NULL;
}

/* THREADS x CALLS calls on one shared state while time stands still: exactly the
 * capacity passes (every algorithm; bands all or nothing), and the stats say so. */
START_TEST(hot_limits_admit_exactly_their_capacity_under_contention)
{
    static const struct {
        const char *rule;
        gint admits;
    } cases[] = {
        {"algorithm = fixed_window\nlimit = 5000\nwindow = 1h\n", 5000},
        {"algorithm = sliding_window\nlimit = 5000\nwindow = 1h\n", 5000},
        {"algorithm = sliding_log\nlimit = 5000\nwindow = 1h\n", 5000},
        {"algorithm = token_bucket\nlimit = 10\nwindow = 1h\nburst = 5000\n", 5000},
        {"algorithm = gcra\nlimit = 10\nwindow = 1h\nburst = 5000\n", 5000},
        {"algorithm = gcra\nlimit = 5000\nwindow = 1h\nbands = 3000/1d\n", 3000},
        {"algorithm = fixed_window\nlimit = 5000\nwindow = 1h\nbands = 3000/1d, 4000/2d\n", 3000},
    };
    for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
        GThread *threads[THREADS];
        g_autofree char *keyfile = g_strdup_printf("[limit:x]\n%sper_key = false\n", cases[c].rule);
        fixture_clock_start(G_GINT64_CONSTANT(1000250));
        fixture_init(keyfile);
        hammered = "x";
        exact_admitted = 0;
        for (int i = 0; i < THREADS; i++)
            threads[i] = g_thread_new("caller", call_hammered, NULL);
        for (int i = 0; i < THREADS; i++)
            g_thread_join(threads[i]);
        ck_assert_msg(exact_admitted == cases[c].admits, "%s: %d admitted, expected %d",
                      cases[c].rule, exact_admitted, cases[c].admits);
        sluice_stats s;
        ck_assert(sluice_stats_get("x", &s, NULL));
        ck_assert_uint_eq(s.allowed, (guint64)cases[c].admits);
        ck_assert_uint_eq(s.denied, (guint64)(THREADS * CALLS - cases[c].admits));
        sluice_decision d;
        sluice_acquire("x", NULL, 0, &d, NULL);
        ck_assert_int_eq(d.remaining, 0);
        sluice_shutdown();
    }
}
END_TEST

static gpointer hold(gpointer data)
{
    (void)data;
    gint64 end = g_get_monotonic_time() + RUN_US;
    while (g_get_monotonic_time() < end) {
        if (sluice_acquire("slots", NULL, 1, NULL, NULL) != SLUICE_ALLOWED)
            continue;
        gint now = g_atomic_int_add(&in_flight, 1) + 1;
        gint most;
        do
            most = g_atomic_int_get(&most_in_flight);
        while (now > most && !g_atomic_int_compare_and_exchange(&most_in_flight, most, now));
        g_usleep(100);
        g_atomic_int_add(&in_flight, -1);
        sluice_release("slots", NULL, 1);
    }
    return NULL;
}

START_TEST(concurrency_never_has_more_in_flight_than_the_limit)
{
    GThread *threads[THREADS];
    fixture_init("[limit:slots]\nalgorithm = concurrency\nlimit = 3\nwindow = 1m\n");
    for (int i = 0; i < THREADS; i++)
        threads[i] = g_thread_new("hold", hold, NULL);
    for (int i = 0; i < THREADS; i++)
        g_thread_join(threads[i]);
    ck_assert_int_le(most_in_flight, 3);
    ck_assert_int_eq(most_in_flight, 3); /* and the limit was reached */
    sluice_decision d;
    sluice_acquire("slots", NULL, 0, &d, NULL);
    ck_assert_int_eq(d.remaining, 3); /* every permit came back */
    sluice_shutdown();
}
END_TEST

/* ---- reload while threads decide ------------------------------------------------------- */

static gint stop, body_runs, pause_callers, callers_paused;
static int rejected(int x)
{
    return x;
}

RATE_LIMITED_FUNCTION(int, reloaded, (int x), (x), "r", rejected, NULL)
{
    g_atomic_int_inc(&body_runs);
    return x;
}

static gpointer call_reloaded(gpointer data)
{
    (void)data;
    while (!g_atomic_int_get(&stop)) {
        if (g_atomic_int_get(&pause_callers)) { /* between calls, until told to go on */
            g_atomic_int_inc(&callers_paused);
            while (g_atomic_int_get(&pause_callers))
                g_usleep(100);
            g_atomic_int_dec_and_test(&callers_paused);
            continue;
        }
        reloaded(1);
        sluice_acquire("r", "k", 1, NULL, NULL);
    }
    return NULL;
}

START_TEST(reload_rebinds_rules_while_threads_call)
{
    GThread *threads[4];
    g_autofree char *path =
        fixture_write_keyfile("[limit:r]\nalgorithm = fixed_window\nlimit = 1000\nwindow = 1s\n");
    sluice_clock_set(NULL, NULL, NULL);
    ck_assert(sluice_init(path, NULL));
    for (int i = 0; i < 4; i++)
        threads[i] = g_thread_new("caller", call_reloaded, NULL);
    static const char *const variants[] = {
        "[limit:r]\nalgorithm = gcra\nlimit = 1000\nwindow = 1s\n",
        "[limit:r]\nalgorithm = sliding_log\nlimit = 10\nwindow = 1s\nper_key = false\n",
        "# r has no rule\n",
        "[limit:r]\nalgorithm = concurrency\nlimit = 2\n",
    };
    /* under valgrind, which runs one thread at a time, a reload waits for the
     * callers' turns: 40 reloads there (10 of each variant), 200 elsewhere */
    for (int i = 0; i < 200 / fixture_time_scale(); i++) {
        ck_assert(g_file_set_contents(path, variants[i % 4], -1, NULL));
        ck_assert(sluice_reload(NULL));
    }
    /* the callers wait between two calls, none holding a rule, while the last rule
     * comes in: from then on every call is decided by it */
    g_atomic_int_set(&pause_callers, 1);
    while (g_atomic_int_get(&callers_paused) < 4)
        g_usleep(100);
    ck_assert(g_file_set_contents(
        path, "[limit:r]\nalgorithm = fixed_window\nlimit = 5\nwindow = 1h\n", -1, NULL));
    ck_assert(sluice_reload(NULL));
    g_atomic_int_set(&body_runs, 0);
    g_atomic_int_set(&pause_callers, 0);
    g_usleep(100000);
    g_atomic_int_set(&stop, 1);
    for (int i = 0; i < 4; i++)
        g_thread_join(threads[i]);
    /* exactly the 5 of the new rule (a fixed_window after a concurrency rule starts
     * afresh): more would be calls it did not decide, fewer calls sent to the fallback */
    ck_assert_int_eq(g_atomic_int_get(&body_runs), 5);
    sluice_shutdown();
}
END_TEST

/* ---- fork() while threads decide ------------------------------------------------------ */

/* A memory decision holds its limit's lock most of the time a thread spends in it:
 * a child forked meanwhile must not find that lock held (18 of 20 children hung
 * before sluice held it across fork()). The children decide, also wait on a
 * concurrency slot, and exit; a stuck child dies of SIGALRM. */
static gboolean forked_child_decides(void)
{
    gboolean ok = sluice_acquire("forked", NULL, 1, NULL, NULL) == SLUICE_ALLOWED;
    /* a concurrency slot: taken, waited for in vain (the engine's wake lock),
     * given back, taken again */
    ok = ok && sluice_acquire("slot", NULL, 1, NULL, NULL) == SLUICE_ALLOWED;
    ok = ok && sluice_acquire("slot", NULL, 1, NULL, NULL) == SLUICE_DENIED;
    sluice_release("slot", NULL, 1);
    return ok && sluice_acquire("slot", NULL, 1, NULL, NULL) == SLUICE_ALLOWED;
}

START_TEST(a_child_forked_while_threads_decide_decides_too)
{
    fixture_init("[limit:forked]\nalgorithm = token_bucket\nlimit = 1000000\nwindow = 1s\n"
                 "burst = 1000000000000\n"
                 "[limit:slot]\nalgorithm = concurrency\nlimit = 1\nwait = 20ms\n");
    sluice_clock_set(NULL, NULL, NULL);
    fixture_fork_children("forked", 20, 5000, forked_child_decides);
    sluice_shutdown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("hammer");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sliding_log_never_admits_more_than_the_limit_in_any_window);
    tcase_add_test(tc, fixed_window_never_admits_more_than_the_limit_in_one_window);
    tcase_add_test(tc, sliding_window_never_admits_more_than_the_limit_in_an_aligned_window);
    tcase_add_test(tc, token_bucket_never_admits_more_than_burst_plus_refill);
    tcase_add_test(tc, gcra_never_admits_more_than_burst_plus_emission);
    tcase_add_test(tc, hot_limits_admit_exactly_their_capacity_under_contention);
    tcase_add_test(tc, concurrency_never_has_more_in_flight_than_the_limit);
    tcase_add_test(tc, reload_rebinds_rules_while_threads_call);
    tcase_add_test(tc, a_child_forked_while_threads_decide_decides_too);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
