/* SPDX-License-Identifier: MIT */
/* Threads: 8 threads hammer one limit for a second on the real clock; the times the
 * limiter used are captured, and no window ever admits more than the rule allows.
 * On a stopped clock, threads on one limit, or on many keys of one, admit exactly
 * what one thread would. */
#include <string.h>

#include "fixture.h"
#include "testing.h"

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

/* ---- per key: exact counts on a stopped clock ---------------------------------------- */

#define KEYS          64  /* keys of one per-key limit */
#define CALLS_PER_KEY 40  /* per thread and key */
#define KEY_CAPACITY  100 /* of each key: less than THREADS x CALLS_PER_KEY */

static gint key_admitted[KEYS];

static const char *key_name(guint k)
{
    static char names[KEYS][16];
    static gsize named;
    if (g_once_init_enter(&named)) {
        for (guint i = 0; i < KEYS; i++)
            g_snprintf(names[i], sizeof names[i], "user-%u", i);
        g_once_init_leave(&named, 1);
    }
    return names[k];
}

/* Calls every key CALLS_PER_KEY times, in turn, starting at a key of its own. */
static gpointer call_keys(gpointer data)
{
    guint first = GPOINTER_TO_UINT(data);
    for (guint i = 0; i < CALLS_PER_KEY * KEYS; i++) {
        guint k = (first + i) % KEYS;
        if (sluice_acquire(hammered, key_name(k), 1, NULL, NULL) == SLUICE_ALLOWED)
            g_atomic_int_inc(&key_admitted[k]);
    }
    return NULL;
}

/* THREADS threads on KEYS keys of one limit at once while time stands still, each
 * key's state made by whichever thread comes first: every key admits exactly its
 * capacity (every algorithm; bands all or nothing), and the stats say so. */
START_TEST(per_key_limits_admit_exactly_each_keys_capacity_under_contention)
{
    static const struct {
        const char *rule;
        gint admits;
    } cases[] = {
        {"algorithm = fixed_window\nlimit = 100\nwindow = 1h\n", 100},
        {"algorithm = sliding_window\nlimit = 100\nwindow = 1h\n", 100},
        {"algorithm = sliding_log\nlimit = 100\nwindow = 1h\n", 100},
        {"algorithm = token_bucket\nlimit = 10\nwindow = 1h\nburst = 100\n", 100},
        {"algorithm = gcra\nlimit = 10\nwindow = 1h\nburst = 100\n", 100},
        {"algorithm = concurrency\nlimit = 100\nwindow = 1h\n", 100},
        {"algorithm = gcra\nlimit = 100\nwindow = 1h\nbands = 60/1d\n", 60},
        {"algorithm = fixed_window\nlimit = 100\nwindow = 1h\nbands = 60/1d, 80/2d\n", 60},
    };
    G_STATIC_ASSERT(THREADS * CALLS_PER_KEY > KEY_CAPACITY);
    for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
        GThread *threads[THREADS];
        g_autofree char *keyfile = g_strdup_printf("[limit:x]\n%s", cases[c].rule);
        fixture_clock_start(G_GINT64_CONSTANT(1000250));
        fixture_init(keyfile);
        hammered = "x";
        memset(key_admitted, 0, sizeof key_admitted);
        for (int i = 0; i < THREADS; i++)
            threads[i] = g_thread_new("caller", call_keys, GUINT_TO_POINTER(i * KEYS / THREADS));
        for (int i = 0; i < THREADS; i++)
            g_thread_join(threads[i]);
        sluice_stats s;
        ck_assert(sluice_stats_get("x", &s, NULL));
        ck_assert_uint_eq(s.allowed, (guint64)(KEYS * cases[c].admits));
        ck_assert_uint_eq(s.denied,
                          (guint64)(THREADS * CALLS_PER_KEY * KEYS - KEYS * cases[c].admits));
        ck_assert_uint_eq(sluice_testing_keys_held("x"), KEYS);
        for (guint k = 0; k < KEYS; k++) {
            ck_assert_msg(key_admitted[k] == cases[c].admits,
                          "%s: key %u: %d admitted, expected %d", cases[c].rule, k, key_admitted[k],
                          cases[c].admits);
            sluice_decision d;
            sluice_acquire("x", key_name(k), 0, &d, NULL);
            ck_assert_int_eq(d.remaining, 0);
        }
        sluice_shutdown();
    }
}
END_TEST

#define CHURNED 3000 /* keys each churning thread makes and forgets */

static gint stop_churning, churn_failures;

/* Makes keys of its own and forgets every other one (sluice_reset), until told to
 * stop or CHURNED were made: the table of keys grows, is rebuilt and retires what
 * it unlinked while other threads decide. Counts what went wrong in churn_failures
 * (no ck_assert: check's lock must not be held while a test forks). */
static gpointer churn_keys(gpointer data)
{
    char key[32];
    for (guint i = 0; i < CHURNED && !g_atomic_int_get(&stop_churning); i++) {
        g_snprintf(key, sizeof key, "churn-%u-%u", GPOINTER_TO_UINT(data), i);
        if (sluice_acquire(hammered, key, 1, NULL, NULL) != SLUICE_ALLOWED ||
            (i % 2 == 0 && !sluice_reset(hammered, key, NULL)))
            g_atomic_int_inc(&churn_failures);
    }
    return NULL;
}

/* While two threads make and forget thousands of keys of a limit, six decide on its
 * KEYS other keys: each of those admits exactly its capacity. */
START_TEST(keys_that_come_and_go_leave_the_others_exact)
{
    GThread *churners[2], *callers[THREADS - 2];
    fixture_clock_start(G_GINT64_CONSTANT(1000250));
    fixture_init("[limit:x]\nalgorithm = fixed_window\nlimit = 100\nwindow = 1h\n");
    hammered = "x";
    memset(key_admitted, 0, sizeof key_admitted);
    g_atomic_int_set(&stop_churning, 0);
    g_atomic_int_set(&churn_failures, 0);
    for (guint i = 0; i < G_N_ELEMENTS(churners); i++)
        churners[i] = g_thread_new("churner", churn_keys, GUINT_TO_POINTER(i));
    for (guint i = 0; i < G_N_ELEMENTS(callers); i++)
        callers[i] = g_thread_new("caller", call_keys, GUINT_TO_POINTER(i * KEYS / 6));
    for (guint i = 0; i < G_N_ELEMENTS(callers); i++)
        g_thread_join(callers[i]);
    for (guint i = 0; i < G_N_ELEMENTS(churners); i++)
        g_thread_join(churners[i]);
    G_STATIC_ASSERT((THREADS - 2) * CALLS_PER_KEY > KEY_CAPACITY);
    ck_assert_int_eq(churn_failures, 0);
    for (guint k = 0; k < KEYS; k++)
        ck_assert_int_eq(key_admitted[k], KEY_CAPACITY);
    /* the kept keys: the callers', and half of each churner's */
    ck_assert_uint_eq(sluice_testing_keys_held("x"), KEYS + G_N_ELEMENTS(churners) * CHURNED / 2);
    sluice_shutdown();
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

/* Reloads that add and drop a band of a per-key limit lay every key's states out
 * anew while six threads decide on its keys: the limit's own state and the band
 * that stays move with each key, so each key still admits exactly its capacity. */
START_TEST(reloads_that_change_bands_keep_each_keys_count_exact)
{
    static const char *const variants[] = {
        "[limit:x]\nalgorithm = fixed_window\nlimit = 100\nwindow = 1h\nbands = 1000/1d\n",
        "[limit:x]\nalgorithm = fixed_window\nlimit = 100\nwindow = 1h\n"
        "bands = 1000/1d, 2000/2d\n",
    };
    GThread *callers[THREADS - 2];
    g_autofree char *path = fixture_write_keyfile(variants[0]);
    fixture_clock_start(G_GINT64_CONSTANT(1000250));
    ck_assert(sluice_init(path, NULL));
    hammered = "x";
    memset(key_admitted, 0, sizeof key_admitted);
    for (guint i = 0; i < G_N_ELEMENTS(callers); i++)
        callers[i] = g_thread_new("caller", call_keys, GUINT_TO_POINTER(i * KEYS / 6));
    for (int i = 1; i <= 40 / fixture_time_scale(); i++) {
        ck_assert(g_file_set_contents(path, variants[i % 2], -1, NULL));
        ck_assert(sluice_reload(NULL));
    }
    for (guint i = 0; i < G_N_ELEMENTS(callers); i++)
        g_thread_join(callers[i]);
    for (guint k = 0; k < KEYS; k++)
        ck_assert_int_eq(key_admitted[k], KEY_CAPACITY);
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

/* The child decides on keys too: one its parent's threads made, and a new one. */
static gboolean forked_child_decides_keys(void)
{
    return forked_child_decides() &&
           sluice_acquire("keys", "churn-0-1", 1, NULL, NULL) == SLUICE_ALLOWED &&
           sluice_acquire("keys", "a new key", 1, NULL, NULL) == SLUICE_ALLOWED;
}

/* The same while two more threads make and forget keys (their stripes' locks, the
 * keys' locks, and the memory they retire): a child finds none of them held. */
START_TEST(a_child_forked_while_threads_decide_keys_decides_too)
{
    GThread *churners[2];
    fixture_init("[limit:forked]\nalgorithm = token_bucket\nlimit = 1000000\nwindow = 1s\n"
                 "burst = 1000000000000\n"
                 "[limit:slot]\nalgorithm = concurrency\nlimit = 1\nwait = 20ms\n"
                 "[limit:keys]\nalgorithm = fixed_window\nlimit = 1000000\nwindow = 1h\n");
    sluice_clock_set(NULL, NULL, NULL);
    hammered = "keys";
    g_atomic_int_set(&stop_churning, 0);
    g_atomic_int_set(&churn_failures, 0);
    for (guint i = 0; i < G_N_ELEMENTS(churners); i++)
        churners[i] = g_thread_new("churner", churn_keys, GUINT_TO_POINTER(i));
    fixture_fork_children("forked", 20, 5000, forked_child_decides_keys);
    g_atomic_int_set(&stop_churning, 1);
    for (guint i = 0; i < G_N_ELEMENTS(churners); i++)
        g_thread_join(churners[i]);
    ck_assert_int_eq(churn_failures, 0);
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
    tcase_add_test(tc, per_key_limits_admit_exactly_each_keys_capacity_under_contention);
    tcase_add_test(tc, keys_that_come_and_go_leave_the_others_exact);
    tcase_add_test(tc, concurrency_never_has_more_in_flight_than_the_limit);
    tcase_add_test(tc, reload_rebinds_rules_while_threads_call);
    tcase_add_test(tc, reloads_that_change_bands_keep_each_keys_count_exact);
    tcase_add_test(tc, a_child_forked_while_threads_decide_decides_too);
    tcase_add_test(tc, a_child_forked_while_threads_decide_keys_decides_too);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
