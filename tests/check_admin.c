/* SPDX-License-Identifier: MIT */
/* The calls of <sluice/admin.h>: sluice_reset, sluice_config_check and sluice_rule_get,
 * and peeks (what `sluice status` reads) consuming nothing, on both backends (Redis as
 * one server, a Cluster or a Sentinel-managed master). */
#include "fixture.h"
#include "testing.h"

#include <string.h>

static const char *const algorithms[] = {"fixed_window", "sliding_log", "sliding_window",
                                         "token_bucket", "gcra",        "concurrency"};

/* A keyfile with one rule `r` of the _i-th algorithm: 3 permits per 3 s. */
static char *rule_of(int i, const char *extra)
{
    return g_strdup_printf("[limit:r]\nalgorithm = %s\nlimit = 3\nwindow = 3s\n%s", algorithms[i],
                           extra ? extra : "");
}

/* A redis backend on a server that is not there (port 1 refuses at once). */
static const char *unreachable = "[sluice]\nbackend = redis\nredis = redis://127.0.0.1:1/0\n"
                                 "[limit:r]\nlimit = 1\nwindow = 1s\n";

static gint64 remaining(const char *name, const char *key)
{
    sluice_decision d;
    g_autoptr(GError) error = NULL;
    int rc = sluice_acquire_wait(name, key, 0, 0, &d, &error);
    ck_assert_msg(rc != SLUICE_FAILED, "peek: %s", error ? error->message : "");
    return d.remaining;
}

/* ---- peeks ------------------------------------------------------------------------------ */

START_TEST(peeks_consume_nothing_for_every_algorithm)
{
    g_autofree char *ini = rule_of(_i, NULL);
    sluice_decision d;
    fixture_clock_start(5000000);
    fixture_init(ini);
    /* a fresh key: peeks store nothing */
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(sluice_acquire("r", "fresh", 0, &d, NULL), SLUICE_ALLOWED);
        ck_assert_decision(d, TRUE, 3, 3, -1, 0);
    }
    if (fixture_on_redis())
        ck_assert_int_eq(fixture_keys(), 0);
    else
        ck_assert_uint_eq(sluice_testing_keys_held("r"), 0);
    /* a used key: peeks leave it as it was */
    ck_assert_int_eq(sluice_acquire("r", "k", 2, &d, NULL), SLUICE_ALLOWED);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(remaining("r", "k"), 1);
    ck_assert_int_eq(sluice_acquire("r", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 0);
    /* a full one: a peek says no, and still takes nothing */
    ck_assert_int_eq(sluice_acquire_wait("r", "k", 0, 0, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(d.remaining, 0);
    ck_assert_int_gt(d.retry_after_ms, 0);
    ck_assert_int_eq(sluice_acquire("r", "k", 1, &d, NULL), SLUICE_DENIED);
    sluice_shutdown();
}
END_TEST

/* ---- reset ------------------------------------------------------------------------------ */

START_TEST(reset_then_acquire_shows_a_full_limit_for_every_algorithm)
{
    g_autofree char *ini = rule_of(_i, NULL);
    g_autoptr(GError) error = NULL;
    sluice_decision d;
    fixture_clock_start(5000000);
    fixture_init(ini);
    ck_assert_int_eq(sluice_acquire("r", "alice", 3, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("r", "bob", 2, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("r", NULL, 3, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("r", "alice", 1, &d, NULL), SLUICE_DENIED);

    ck_assert_msg(sluice_reset("r", "alice", &error), "%s", error ? error->message : "");
    ck_assert_int_eq(sluice_acquire("r", "alice", 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 3, 3, -1, 0);
    /* the other keys and the no-key state keep theirs */
    ck_assert_int_eq(remaining("r", "bob"), 1);
    ck_assert_int_eq(remaining("r", NULL), 0);
    ck_assert(sluice_reset("r", NULL, NULL));
    ck_assert_int_eq(remaining("r", NULL), 3);
    ck_assert_int_eq(sluice_acquire("r", "alice", 3, &d, NULL), SLUICE_ALLOWED);
    /* a reset of a key with no state is fine */
    ck_assert(sluice_reset("r", "nobody", NULL));
    sluice_shutdown();
}
END_TEST

START_TEST(reset_ignores_the_key_when_per_key_is_false)
{
    sluice_decision d;
    fixture_clock_start(5000000);
    fixture_init("[limit:shared]\nalgorithm = fixed_window\nlimit = 2\nwindow = 1m\n"
                 "per_key = false\n");
    ck_assert_int_eq(sluice_acquire("shared", "a", 2, &d, NULL), SLUICE_ALLOWED);
    ck_assert(sluice_reset("shared", "b", NULL));
    ck_assert_int_eq(sluice_acquire("shared", "a", 2, &d, NULL), SLUICE_ALLOWED);
    sluice_shutdown();
}
END_TEST

START_TEST(reset_deletes_the_limit_key_and_its_seq_key_in_redis)
{
    fixture_clock_start(5000000);
    fixture_init("[limit:log]\nalgorithm = sliding_log\nlimit = 5\nwindow = 1m\n"
                 "[limit:cc]\nalgorithm = concurrency\nlimit = 5\n");
    ck_assert_int_eq(sluice_acquire("log", "k", 2, NULL, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("cc", NULL, 2, NULL, NULL), SLUICE_ALLOWED);
    /* each a ZSET, concurrency's with its :seq counter; and the :seq counter an older
     * sluice kept for sliding_log */
    freeReplyObject(fixture_command("sluice:sl:{3:log:k}:seq", "SET sluice:sl:{3:log:k}:seq 7"));
    ck_assert_int_eq(fixture_keys(), 4);
    ck_assert(sluice_reset("log", "k", NULL));
    ck_assert_int_eq(fixture_keys(), 2);
    ck_assert(sluice_reset("cc", NULL, NULL));
    ck_assert_int_eq(fixture_keys(), 0);
    sluice_shutdown();
}
END_TEST

START_TEST(keys_written_on_the_injected_clock_outlive_their_window_in_real_time)
{
    /* virtual time stands still while real time passes: the state must stay */
    fixture_clock_start(5000000);
    fixture_init("[limit:short]\nalgorithm = fixed_window\nlimit = 2\nwindow = 20ms\n");
    ck_assert_int_eq(sluice_acquire("short", NULL, 2, NULL, NULL), SLUICE_ALLOWED);
    redisReply *r = fixture_command("sluice:fw:{5:short:}", "PTTL sluice:fw:{5:short:}");
    ck_assert_int_ge(r->integer, 3599000);
    freeReplyObject(r);
    g_usleep(60000);
    ck_assert_int_eq(remaining("short", NULL), 0);
    fixture_clock_advance_ms(20);
    ck_assert_int_eq(remaining("short", NULL), 2);
    sluice_shutdown();
}
END_TEST

static void reset_slots(void)
{
    ck_assert(sluice_reset("slots", NULL, NULL));
}

START_TEST(reset_wakes_a_concurrency_waiter)
{
    fixture_waiter_woken_by(reset_slots);
}
END_TEST

START_TEST(reset_refuses_bad_arguments_and_needs_init)
{
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_reset("r", NULL, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED));
    g_clear_error(&error);

    fixture_init("[limit:r]\nlimit = 1\nwindow = 1s\n");
    const char *names[] = {NULL, "", "r\xff"};
    const char *messages[] = {"name is NULL; expected the name of a limit",
                              "name is empty; expected the name of a limit",
                              "name is not valid UTF-8"};
    for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
        ck_assert(!sluice_reset(names[i], NULL, &error));
        ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT));
        ck_assert_str_eq(error->message, messages[i]);
        g_clear_error(&error);
    }
    ck_assert(!sluice_reset("r", "", &error));
    ck_assert_str_eq(error->message, "key is empty; expected NULL for no key, or a string");
    g_clear_error(&error);
    ck_assert(!sluice_reset("r", "k\xc3", &error));
    ck_assert_str_eq(error->message, "key is not valid UTF-8");
    g_clear_error(&error);
    g_autofree char *huge = g_strnfill(70000, 'k');
    ck_assert(!sluice_reset("r", huge, &error));
    ck_assert_str_eq(error->message, "key is longer than 65536 bytes");
    g_clear_error(&error);
    /* a name with no rule has nothing to forget */
    ck_assert(sluice_reset("unknown", "k", &error));
    sluice_shutdown();
}
END_TEST

START_TEST(reset_fails_with_the_backend)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = fixture_write_keyfile(unreachable);
    ck_assert(sluice_init(path, NULL));
    ck_assert(!sluice_reset("r", NULL, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND));
    ck_assert_msg(strstr(error->message, "redis 127.0.0.1:1: connect"), "%s", error->message);
    sluice_shutdown();
}
END_TEST

/* ---- config_check and rule_get ------------------------------------------------------------ */

START_TEST(config_check_lists_every_problem_without_loading)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *good = fixture_write_keyfile(unreachable);
    ck_assert(sluice_config_check(good, &error));
    ck_assert(!sluice_rule_get("r", &(sluice_rule_info){0}, NULL)); /* nothing was loaded */

    g_autofree char *bad = fixture_write_keyfile("[limit:a]\nlimit = 0\nwindow = 10\n"
                                                 "[limit:b]\nalgorithm = bogus\nlimit = 1\n"
                                                 "window = 1s\n");
    ck_assert(!sluice_config_check(bad, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG));
    g_autofree char *expected =
        g_strdup_printf("%s: [limit:a] limit = 0: must be at least 1\n"
                        "%s: [limit:a] window = 10: missing unit, e.g. 10s\n"
                        "%s: [limit:b] algorithm = bogus: expected fixed_window, sliding_log, "
                        "sliding_window, token_bucket, gcra, concurrency or adaptive",
                        bad, bad, bad);
    ck_assert_str_eq(error->message, expected);
    g_clear_error(&error);

    ck_assert(!sluice_config_check("/nonexistent/limits.ini", &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_IO));
}
END_TEST

START_TEST(rule_get_describes_the_running_rule)
{
    g_autoptr(GError) error = NULL;
    sluice_rule_info info = {0};
    ck_assert(!sluice_rule_get("tb", &info, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED));
    g_clear_error(&error);
    fixture_init("[limit:tb]\nalgorithm = token_bucket\nlimit = 10\nwindow = 1m\nburst = 4\n"
                 "wait = 250ms\nmode = shadow\nper_key = false\n"
                 "[limit:plain]\nlimit = 5\nwindow = 10s\n"
                 "[limit:fw]\nalgorithm = fixed_window\nlimit = 5\nwindow = 1d\n"
                 "[limit:day]\nalgorithm = fixed_window\nlimit = 5\nwindow = 1d\n"
                 "anchor = epoch\n");
    ck_assert(sluice_rule_get("tb", &info, &error));
    ck_assert_str_eq(info.algorithm, "token_bucket");
    ck_assert_int_eq(info.limit, 10);
    ck_assert_int_eq(info.burst, 4);
    ck_assert_int_eq(info.window_ms, 60000);
    ck_assert_int_eq(info.wait_ms, 250);
    ck_assert(info.shadow);
    ck_assert(!info.per_key);
    ck_assert_ptr_null(info.anchor); /* fixed_window's alone */
    ck_assert(sluice_rule_get("fw", &info, NULL));
    ck_assert_str_eq(info.anchor, "first_hit");
    ck_assert(sluice_rule_get("day", &info, NULL));
    ck_assert_str_eq(info.anchor, "epoch");
    ck_assert_int_eq(info.window_ms, 86400000);
    ck_assert(sluice_rule_get("plain", &info, NULL));
    ck_assert_str_eq(info.algorithm, "sliding_log");
    ck_assert_int_eq(info.burst, 5);
    ck_assert_int_eq(info.wait_ms, 0);
    ck_assert(!info.shadow);
    ck_assert(info.per_key);
    ck_assert(!sluice_rule_get("none", &info, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_NO_RULE));
    ck_assert_str_eq(error->message, "the keyfile has no rule [limit:none]");
    g_clear_error(&error);
    sluice_shutdown();
    ck_assert(!sluice_rule_get("plain", &info, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("admin");
    TCase *tc = tcase_create("admin");
    tcase_add_loop_test(tc, peeks_consume_nothing_for_every_algorithm, 0, G_N_ELEMENTS(algorithms));
    tcase_add_loop_test(tc, reset_then_acquire_shows_a_full_limit_for_every_algorithm, 0,
                        G_N_ELEMENTS(algorithms));
    tcase_add_test(tc, reset_ignores_the_key_when_per_key_is_false);
    if (fixture_on_redis())
        tcase_add_test(tc, reset_deletes_the_limit_key_and_its_seq_key_in_redis);
    if (fixture_on_redis())
        tcase_add_test(tc, keys_written_on_the_injected_clock_outlive_their_window_in_real_time);
    tcase_add_test(tc, reset_wakes_a_concurrency_waiter);
    tcase_add_test(tc, reset_refuses_bad_arguments_and_needs_init);
    tcase_add_test(tc, reset_fails_with_the_backend);
    tcase_add_test(tc, config_check_lists_every_problem_without_loading);
    tcase_add_test(tc, rule_get_describes_the_running_rule);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
