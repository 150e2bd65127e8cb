/* SPDX-License-Identifier: MIT */
/* The public API at its edges: bad arguments, names with no rule, waiting, shadow
 * mode, the on_error policies, eviction of idle keys and reload. */
#include "fixture.h"
#include "testing.h"

#include <string.h>

static const char *fixed2 = "[limit:fixed]\nalgorithm = fixed_window\nlimit = 2\nwindow = 10s\n";

/* ---- bad arguments --------------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *key;
    gint64 permits;
    const char *message;
} bad_call;

static const bad_call bad_calls[] = {
    {NULL, NULL, 1, "name is NULL; expected the name of a limit"},
    {"", NULL, 1, "name is empty; expected the name of a limit"},
    {"fi\xffxed", NULL, 1, "name is not valid UTF-8"},
    {"fixed", NULL, -1, "permits is negative; expected 0 (a peek) or more"},
    {"fixed", NULL, G_MININT64, "permits is negative; expected 0 (a peek) or more"},
    {"fixed", "", 1, "key is empty; expected NULL for no key, or a string"},
    {"fixed", "al\xc3", 1, "key is not valid UTF-8"},
};

START_TEST(bad_arguments_are_refused_with_an_error)
{
    const bad_call *c = &bad_calls[_i];
    sluice_decision d = {TRUE, 1, 1, 1, 1, TRUE};
    g_autoptr(GError) error = NULL;
    fixture_init(fixed2);
    ck_assert_int_eq(sluice_acquire(c->name, c->key, c->permits, &d, &error), SLUICE_FAILED);
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT));
    ck_assert_str_eq(error->message, c->message);
    ck_assert_decision(d, FALSE, 0, 0, -1, 0);
    g_clear_error(&error);
    ck_assert_int_eq(sluice_acquire_wait(c->name, c->key, c->permits, 10, NULL, &error),
                     SLUICE_FAILED);
    ck_assert_str_eq(error->message, c->message);
    sluice_shutdown();
}
END_TEST

START_TEST(huge_keys_and_bad_timeouts_are_refused)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *key = g_strnfill(70000, 'k');
    fixture_init(fixed2);
    ck_assert_int_eq(sluice_acquire("fixed", key, 1, NULL, &error), SLUICE_FAILED);
    ck_assert_str_eq(error->message, "key is longer than 65536 bytes");
    g_clear_error(&error);
    ck_assert_int_eq(sluice_acquire_wait("fixed", NULL, 1, -1, NULL, &error), SLUICE_FAILED);
    ck_assert_str_eq(error->message, "timeout_ms is negative; expected 0 or more");
    g_clear_error(&error);
    ck_assert_int_eq(sluice_acquire_wait("fixed", NULL, 1, G_MAXINT64, NULL, &error),
                     SLUICE_FAILED);
    /* a 64 KiB key is fine */
    key[65536] = '\0';
    ck_assert_int_eq(sluice_acquire("fixed", key, 1, NULL, NULL), SLUICE_ALLOWED);
    sluice_shutdown();
}
END_TEST

START_TEST(the_most_permits_are_denied_without_overflow)
{
    sluice_decision d;
    fixture_clock_start(1000000);
    fixture_init("[limit:gcra]\nalgorithm = gcra\nlimit = 788400000000000\nwindow = 36500d\n"
                 "[limit:log]\nalgorithm = sliding_log\nlimit = 3\nwindow = 36500d\n");
    ck_assert_int_eq(sluice_acquire("gcra", NULL, G_MAXINT64, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(d.retry_after_ms, -1);
    ck_assert_int_eq(sluice_acquire("gcra", NULL, 788400000000000, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 0);
    ck_assert_int_eq(sluice_acquire("log", NULL, G_MAXINT64, &d, NULL), SLUICE_DENIED);
    ck_assert_decision(d, FALSE, 3, 3, -1, 0);
    ck_assert_int_eq(sluice_acquire("log", NULL, 3, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 3, 0, -1, G_GINT64_CONSTANT(36500) * 86400 * 1000);
    sluice_shutdown();
}
END_TEST

/* ---- names with no rule, no init ------------------------------------------------------ */

START_TEST(a_name_with_no_rule_is_not_limited)
{
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("anything", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    fixture_init(fixed2);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(sluice_acquire("nameless", "k", 5, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, G_MAXINT64, G_MAXINT64, -1, 0);
    sluice_release("nameless", NULL, 1); /* nothing to give back: no effect */
    sluice_shutdown();
}
END_TEST

START_TEST(init_without_a_path_reads_sluice_config_or_uses_defaults)
{
    g_autofree char *path = fixture_write_keyfile(fixed2);
    g_unsetenv("SLUICE_CONFIG");
    ck_assert(sluice_init(NULL, NULL));
    ck_assert_int_eq(sluice_acquire("fixed", NULL, 100, NULL, NULL), SLUICE_ALLOWED);
    sluice_shutdown();
    g_setenv("SLUICE_CONFIG", path, TRUE);
    ck_assert(sluice_init(NULL, NULL));
    ck_assert_int_eq(sluice_acquire("fixed", NULL, 100, NULL, NULL), SLUICE_DENIED);
    sluice_shutdown();
    g_unsetenv("SLUICE_CONFIG");
}
END_TEST

/* ---- waiting ---------------------------------------------------------------------------- */

START_TEST(rule_wait_sleeps_exactly_until_the_permits_are_due)
{
    sluice_decision d;
    fixture_clock_start(1000000);
    fixture_init("[limit:w]\nalgorithm = fixed_window\nlimit = 1\nwindow = 1s\nwait = 2s\n");
    ck_assert_int_eq(sluice_acquire("w", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    fixture_clock_advance_ms(300);
    ck_assert_int_eq(sluice_acquire("w", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(fixture_clock_sleeps(), 1);
    ck_assert_int_eq(fixture_clock_now(), 2000000); /* slept 700 ms, no more */
    sluice_shutdown();
}
END_TEST

START_TEST(acquire_wait_does_not_sleep_when_the_permits_are_not_due_in_time)
{
    sluice_decision d;
    fixture_clock_start(1000000);
    fixture_init("[limit:w]\nalgorithm = fixed_window\nlimit = 1\nwindow = 1s\n");
    ck_assert_int_eq(sluice_acquire("w", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire_wait("w", NULL, 1, 999, &d, NULL), SLUICE_DENIED);
    ck_assert_decision(d, FALSE, 1, 0, 1000, 1000);
    ck_assert_int_eq(fixture_clock_sleeps(), 0);
    ck_assert_int_eq(sluice_acquire_wait("w", NULL, 2, 5000, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(d.retry_after_ms, -1); /* can never pass: no wait */
    ck_assert_int_eq(fixture_clock_sleeps(), 0);
    ck_assert_int_eq(sluice_acquire_wait("w", NULL, 1, 1000, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(fixture_clock_sleeps(), 1);
    ck_assert_int_eq(fixture_clock_now(), 2000000);
    sluice_shutdown();
}
END_TEST

static void release_slot(void)
{
    sluice_release("slots", NULL, 1);
}

START_TEST(a_concurrency_waiter_is_woken_by_a_release)
{
    fixture_waiter_woken_by(release_slot);
}
END_TEST

START_TEST(a_real_wait_lasts_the_retry_time_and_not_much_more)
{
    sluice_decision d;
    sluice_clock_set(NULL, NULL, NULL);
    fixture_init("[limit:log]\nalgorithm = sliding_log\nlimit = 2\nwindow = 200ms\n");
    /* taken before the admission that fills the log: its entries expire 200 ms
     * after a decision made at or after `start` (a time taken after the answer
     * could be late by as long as returning took, 14 ms under valgrind) */
    gint64 start = g_get_monotonic_time();
    ck_assert_int_eq(sluice_acquire("log", NULL, 2, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire_wait("log", NULL, 1, 1000, &d, NULL), SLUICE_ALLOWED);
    gint64 waited = g_get_monotonic_time() - start;
    ck_assert_int_ge(waited, 190000);
    ck_assert_int_lt(waited, 1000000);
    sluice_shutdown();
}
END_TEST

/* ---- shadow mode -------------------------------------------------------------------------- */

START_TEST(shadow_mode_always_allows_but_decides_and_counts)
{
    sluice_decision d;
    fixture_clock_start(1000000);
    fixture_init("[limit:s]\nalgorithm = fixed_window\nlimit = 2\nwindow = 10s\n"
                 "mode = shadow\nwait = 5s\n");
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(sluice_acquire("s", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 2, 0, -1, 10000);
    ck_assert_int_eq(sluice_acquire("s", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 2, 0, -1, 10000);
    ck_assert_int_eq(fixture_clock_sleeps(), 0); /* shadow never waits */
    sluice_shutdown();
}
END_TEST

/* ---- on_error ------------------------------------------------------------------------------ */

START_TEST(on_error_allow_and_deny_return_an_error_with_the_verdict)
{
    sluice_decision d;
    g_autoptr(GError) error = NULL;
    fixture_clock_start(1000000);
    fixture_init("[sluice]\non_error = deny\n[limit:f]\nalgorithm = fixed_window\nlimit = 2\n"
                 "window = 10s\n");
    sluice_testing_fail_backend(1, "connection refused");
    ck_assert_int_eq(sluice_acquire("f", NULL, 1, &d, &error), SLUICE_FAILED);
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND));
    ck_assert_str_eq(error->message, "connection refused");
    ck_assert_int_eq(d.allowed, FALSE);
    g_clear_error(&error);
    fixture_init("[sluice]\non_error = allow\n[limit:f]\nalgorithm = fixed_window\nlimit = 2\n"
                 "window = 10s\n");
    sluice_testing_fail_backend(1, "timeout");
    ck_assert_int_eq(sluice_acquire("f", NULL, 1, &d, &error), SLUICE_FAILED);
    ck_assert_int_eq(d.allowed, TRUE);
    /* nothing was consumed by the failed calls */
    ck_assert_int_eq(sluice_acquire("f", NULL, 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 2);
    sluice_shutdown();
}
END_TEST

START_TEST(on_error_local_decides_with_the_same_rules_in_process)
{
    sluice_decision d;
    fixture_clock_start(1000000);
    fixture_init("[sluice]\non_error = local\n[limit:f]\nalgorithm = fixed_window\nlimit = 2\n"
                 "window = 10s\n");
    sluice_testing_fail_backend(3, "down");
    ck_assert_int_eq(sluice_acquire("f", NULL, 1, &d, NULL), SLUICE_FAILED);
    ck_assert_int_eq(d.allowed, TRUE);
    ck_assert_int_eq(sluice_acquire("f", NULL, 1, &d, NULL), SLUICE_FAILED);
    ck_assert_int_eq(d.allowed, TRUE);
    ck_assert_int_eq(sluice_acquire("f", NULL, 1, &d, NULL), SLUICE_FAILED);
    ck_assert_decision(d, FALSE, 2, 0, 10000, 10000);
    sluice_shutdown();
}
END_TEST

/* ---- memory: idle keys are dropped --------------------------------------------------------- */

START_TEST(keys_back_to_full_capacity_are_dropped)
{
    char key[32];
    fixture_clock_start(1000000);
    fixture_init("[limit:user]\nalgorithm = token_bucket\nlimit = 10\nwindow = 1s\n");
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 5000; i++) {
            g_snprintf(key, sizeof key, "user-%d-%d", round, i);
            ck_assert_int_eq(sluice_acquire("user", key, 1, NULL, NULL), SLUICE_ALLOWED);
        }
        fixture_clock_advance_ms(2000);
    }
    /* 100000 keys were used; at most twice the active ones (plus the sweep floor) stay */
    ck_assert_uint_le(sluice_testing_memory_keys("user"), 2 * 5000 + 1024);
    /* a key that is not back to full capacity keeps its state */
    ck_assert_int_eq(sluice_acquire("user", "hot", 10, NULL, NULL), SLUICE_ALLOWED);
    for (int i = 0; i < 5000; i++) {
        g_snprintf(key, sizeof key, "late-%d", i);
        sluice_acquire("user", key, 1, NULL, NULL);
    }
    ck_assert_int_eq(sluice_acquire("user", "hot", 1, NULL, NULL), SLUICE_DENIED);
    sluice_shutdown();
}
END_TEST

START_TEST(denied_calls_and_peeks_store_no_key)
{
    fixture_clock_start(1000000);
    fixture_init("[limit:user]\nalgorithm = fixed_window\nlimit = 1\nwindow = 1s\n");
    for (int i = 0; i < 100; i++) {
        g_autofree char *key = g_strdup_printf("k%d", i);
        sluice_acquire("user", key, 0, NULL, NULL);
        sluice_acquire("user", key, 2, NULL, NULL);
    }
    ck_assert_uint_eq(sluice_testing_keys_held("user"), 0);
    sluice_shutdown();
}
END_TEST

/* ---- reload ---------------------------------------------------------------------------------- */

START_TEST(reload_keeps_state_unless_the_algorithm_changes)
{
    sluice_decision d;
    fixture_clock_start(1000000);
    g_autofree char *path =
        fixture_write_keyfile("[limit:a]\nalgorithm = fixed_window\nlimit = 2\nwindow = 10s\n"
                              "[limit:b]\nalgorithm = fixed_window\nlimit = 2\nwindow = 10s\n"
                              "[limit:c]\nalgorithm = fixed_window\nlimit = 2\nwindow = 10s\n");
    ck_assert(sluice_init(path, NULL));
    ck_assert_int_eq(sluice_acquire("a", NULL, 2, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("b", NULL, 2, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("c", NULL, 2, &d, NULL), SLUICE_ALLOWED);
    ck_assert(g_file_set_contents(path,
                                  "[limit:a]\nalgorithm = fixed_window\nlimit = 2\nwindow = 10s\n"
                                  "mode = shadow\n"
                                  "[limit:b]\nalgorithm = fixed_window\nlimit = 3\nwindow = 10s\n"
                                  "[limit:c]\nalgorithm = sliding_log\nlimit = 2\nwindow = 10s\n",
                                  -1, NULL));
    ck_assert(sluice_reload(NULL));
    /* a: same algorithm and parameters, so still full (shadow only reports it) */
    ck_assert_int_eq(sluice_acquire("a", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 0);
    /* b: a larger limit applies to what was admitted: one more, no free burst */
    ck_assert_int_eq(sluice_acquire("b", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 0);
    ck_assert_int_eq(sluice_acquire("b", NULL, 1, &d, NULL), SLUICE_DENIED);
    /* c: another algorithm keeps state another way: it starts afresh */
    ck_assert_int_eq(sluice_acquire("c", NULL, 2, &d, NULL), SLUICE_ALLOWED);
    sluice_shutdown();
}
END_TEST

START_TEST(a_bad_reload_keeps_the_running_rules)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = fixture_write_keyfile(fixed2);
    ck_assert(sluice_init(path, NULL));
    ck_assert(g_file_set_contents(path, "[limit:fixed]\nlimit = 0\nwindow = 1s\n", -1, NULL));
    ck_assert(!sluice_reload(&error));
    g_autofree char *expected =
        g_strdup_printf("%s: [limit:fixed] limit = 0: must be at least 1", path);
    ck_assert_str_eq(error->message, expected);
    ck_assert_int_eq(sluice_acquire("fixed", NULL, 2, NULL, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("fixed", NULL, 1, NULL, NULL), SLUICE_DENIED);
    sluice_shutdown();
    g_clear_error(&error);
    ck_assert(!sluice_reload(&error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED));
}
END_TEST

START_TEST(removing_a_rule_unlimits_its_name)
{
    g_autofree char *path = fixture_write_keyfile(fixed2);
    ck_assert(sluice_init(path, NULL));
    ck_assert_int_eq(sluice_acquire("fixed", NULL, 3, NULL, NULL), SLUICE_DENIED);
    ck_assert(g_file_set_contents(path, "# no rules\n", -1, NULL));
    ck_assert(sluice_reload(NULL));
    ck_assert_int_eq(sluice_acquire("fixed", NULL, 3, NULL, NULL), SLUICE_ALLOWED);
    sluice_shutdown();
}
END_TEST

START_TEST(error_strings_come_from_one_table)
{
    ck_assert_str_eq(sluice_strerror(SLUICE_ERROR_INVALID_ARGUMENT), "invalid argument");
    ck_assert_str_eq(sluice_strerror(SLUICE_ERROR_BACKEND), "the rate-limit backend failed");
    ck_assert_str_eq(sluice_strerror((sluice_error_code)999), "unknown error");
}
END_TEST

/* The library's version is the headers' (one build), and SLUICE_CHECK_VERSION orders
 * versions as GLIB_CHECK_VERSION does. */
START_TEST(the_version_is_the_headers_at_run_time)
{
    g_autofree char *macros = g_strdup_printf("%d.%d.%d", SLUICE_VERSION_MAJOR,
                                              SLUICE_VERSION_MINOR, SLUICE_VERSION_MICRO);
    ck_assert_str_eq(SLUICE_VERSION_STRING, macros);
    ck_assert_str_eq(sluice_version(), SLUICE_VERSION_STRING);
    ck_assert(
        SLUICE_CHECK_VERSION(SLUICE_VERSION_MAJOR, SLUICE_VERSION_MINOR, SLUICE_VERSION_MICRO));
    ck_assert(SLUICE_CHECK_VERSION(0, 0, 0));
    ck_assert(SLUICE_CHECK_VERSION(SLUICE_VERSION_MAJOR, 0, 0));
    ck_assert(!SLUICE_CHECK_VERSION(SLUICE_VERSION_MAJOR, SLUICE_VERSION_MINOR,
                                    SLUICE_VERSION_MICRO + 1));
    ck_assert(!SLUICE_CHECK_VERSION(SLUICE_VERSION_MAJOR, SLUICE_VERSION_MINOR + 1, 0));
    ck_assert(!SLUICE_CHECK_VERSION(SLUICE_VERSION_MAJOR + 1, 0, 0));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("api");
    tcase_add_loop_test(tc, bad_arguments_are_refused_with_an_error, 0, G_N_ELEMENTS(bad_calls));
    tcase_add_test(tc, huge_keys_and_bad_timeouts_are_refused);
    tcase_add_test(tc, the_most_permits_are_denied_without_overflow);
    tcase_add_test(tc, a_name_with_no_rule_is_not_limited);
    tcase_add_test(tc, init_without_a_path_reads_sluice_config_or_uses_defaults);
    tcase_add_test(tc, rule_wait_sleeps_exactly_until_the_permits_are_due);
    tcase_add_test(tc, acquire_wait_does_not_sleep_when_the_permits_are_not_due_in_time);
    tcase_add_test(tc, a_concurrency_waiter_is_woken_by_a_release);
    tcase_add_test(tc, a_real_wait_lasts_the_retry_time_and_not_much_more);
    tcase_add_test(tc, shadow_mode_always_allows_but_decides_and_counts);
    tcase_add_test(tc, on_error_allow_and_deny_return_an_error_with_the_verdict);
    tcase_add_test(tc, on_error_local_decides_with_the_same_rules_in_process);
    tcase_add_test(tc, keys_back_to_full_capacity_are_dropped);
    tcase_add_test(tc, denied_calls_and_peeks_store_no_key);
    tcase_add_test(tc, reload_keeps_state_unless_the_algorithm_changes);
    tcase_add_test(tc, a_bad_reload_keeps_the_running_rules);
    tcase_add_test(tc, removing_a_rule_unlimits_its_name);
    tcase_add_test(tc, error_strings_come_from_one_table);
    tcase_add_test(tc, the_version_is_the_headers_at_run_time);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
