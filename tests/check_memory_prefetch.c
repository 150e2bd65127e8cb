/* SPDX-License-Identifier: MIT */
/* Prefetch on the memory backend, on an injected clock: a thread takes `prefetch`
 * permits of a limit's shared state at once and answers its own later calls from
 * them until they run out or prefetch_ttl passes; a reset or a reload voids them;
 * threads together never use more than the state counted. */
#include "fixture.h"

#define S G_GINT64_CONSTANT(1000250)

static const char *fixed = "[limit:p]\nalgorithm = fixed_window\nlimit = 10\nwindow = 10s\n"
                           "per_key = false\nprefetch = 4\n";

/* One decision on the shared state takes 4; three calls are answered from them;
 * near the limit a refused prefetch is followed by the call's own permits. */
START_TEST(a_thread_takes_prefetch_permits_at_once)
{
    fixture_clock_start(S);
    fixture_init(fixed);
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 6 + 3, -1, 10000); /* 6 left in the state, 3 in hand */
    fixture_clock_advance_ms(1);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 0, -1, 9999); /* the last in hand, reset aged */
    /* another 4 (8 counted), then 2 left: 4 are refused, 1 is taken alone */
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 1, -1, 9999);
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_DENIED);
    ck_assert_decision(d, FALSE, 10, 0, 9999, 9999);
    /* a call for more than prefetch, and a peek, decide on the state as they are */
    ck_assert_int_eq(sluice_acquire("p", NULL, 5, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(sluice_acquire("p", NULL, 0, &d, NULL), SLUICE_DENIED);
    ck_assert_decision(d, FALSE, 10, 0, 9999, 9999);
    sluice_stats s;
    ck_assert(sluice_stats_get("p", &s, NULL));
    ck_assert_uint_eq(s.allowed, 10);
    ck_assert_uint_eq(s.denied, 3);
    sluice_shutdown();
}
END_TEST

/* Permits in hand are used within prefetch_ttl (a tenth of the window by default)
 * of being counted; those left then are lost: the state counted them. */
START_TEST(permits_in_hand_expire_after_prefetch_ttl)
{
    fixture_clock_start(S);
    fixture_init(fixed);
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    fixture_clock_advance_ms(999);
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 2, -1, 9001); /* from the hand: 2 left in it */
    fixture_clock_advance_ms(1);                  /* 1 s since they were counted */
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 2 + 3, -1, 9000); /* 4 more counted: 8 */
    sluice_shutdown();
}
END_TEST

/* sluice_reset and a reload that changes the rule void the permits in hand. */
START_TEST(a_reset_or_a_reload_voids_the_permits_in_hand)
{
    fixture_clock_start(S);
    g_autofree char *path = fixture_write_keyfile(fixed);
    ck_assert(sluice_init(path, NULL));
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert(sluice_reset("p", NULL, NULL));
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 6 + 3, -1, 10000); /* a fresh state, 4 taken */
    ck_assert(g_file_set_contents(path,
                                  "[limit:p]\nalgorithm = fixed_window\nlimit = 12\nwindow = 10s\n"
                                  "per_key = false\nprefetch = 4\n",
                                  -1, NULL));
    ck_assert(sluice_reload(NULL));
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 12, 4 + 3, -1, 10000); /* 8 counted; the 3 in hand lost */
    sluice_shutdown();
}
END_TEST

/* A per-key limit decides each call on its key's state, as without prefetch. */
START_TEST(calls_with_a_key_decide_without_a_hand)
{
    fixture_clock_start(S);
    fixture_init("[limit:k]\nalgorithm = gcra\nlimit = 10\nwindow = 10s\nprefetch = 4\n");
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("k", "a", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 10, 9, -1, 1000);
    sluice_shutdown();
}
END_TEST

#define THREADS 8
#define CALLS   2000

static gint admitted;

static gpointer call(gpointer data)
{
    (void)data;
    for (int i = 0; i < CALLS; i++)
        if (sluice_acquire("p", NULL, 1, NULL, NULL) == SLUICE_ALLOWED)
            g_atomic_int_inc(&admitted);
    return NULL;
}

/* Threads on a stopped clock: the state counts every permit taken, so no more than
 * the limit pass; each thread's hand can hold back at most prefetch - 1. */
START_TEST(threads_never_use_more_than_the_state_counted)
{
    static const char *const rules[] = {
        "[limit:p]\nalgorithm = gcra\nlimit = 10\nwindow = 1h\nburst = 5000\nper_key = "
        "false\nprefetch = 10\n",
        "[limit:p]\nalgorithm = fixed_window\nlimit = 5000\nwindow = 1h\nper_key = "
        "false\nprefetch = 10\n",
    };
    for (guint r = 0; r < G_N_ELEMENTS(rules); r++) {
        GThread *threads[THREADS];
        fixture_clock_start(S);
        fixture_init(rules[r]);
        admitted = 0;
        for (int i = 0; i < THREADS; i++)
            threads[i] = g_thread_new("caller", call, NULL);
        for (int i = 0; i < THREADS; i++)
            g_thread_join(threads[i]);
        ck_assert_int_le(admitted, 5000);
        ck_assert_int_ge(admitted, 5000 - THREADS * (10 - 1));
        sluice_decision d;
        sluice_acquire("p", NULL, 0, &d, NULL);
        ck_assert_int_eq(d.remaining, 0); /* every permit was counted */
        sluice_shutdown();
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory_prefetch");
    TCase *tc = tcase_create("hand");
    tcase_add_test(tc, a_thread_takes_prefetch_permits_at_once);
    tcase_add_test(tc, permits_in_hand_expire_after_prefetch_ttl);
    tcase_add_test(tc, a_reset_or_a_reload_voids_the_permits_in_hand);
    tcase_add_test(tc, calls_with_a_key_decide_without_a_hand);
    tcase_add_test(tc, threads_never_use_more_than_the_state_counted);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
