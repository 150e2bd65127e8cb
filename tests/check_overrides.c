/* SPDX-License-Identifier: MIT */
/* [override:NAME]: named keys of a limit with their own limit, blocked or unlimited, on
 * every backend (SLUICE_TEST_BACKEND), through reloads that change and remove them. */
#include "fixture.h"

#include <glib/gstdio.h>

static char *path; /* the keyfile of the test, for reloads */

static void teardown(void)
{
    sluice_shutdown();
    if (path)
        g_unlink(path);
    g_clear_pointer(&path, g_free);
}

/* Loads contents (on Redis, pointed at the suite's server): sluice_init the first
 * time, sluice_reload of the same file after. */
static void load(const char *contents)
{
    g_autofree char *full = fixture_contents(contents);
    g_autoptr(GError) error = NULL;
    if (!path) {
        fixture_flush();
        path = fixture_write_keyfile(full);
        ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
        return;
    }
    ck_assert(g_file_set_contents(path, full, -1, NULL));
    ck_assert_msg(sluice_reload(&error), "%s", error ? error->message : "");
}

#define SEARCH                                                                                     \
    "[sluice]\nreload = false\n"                                                                   \
    "[limit:search]\nalgorithm = fixed_window\nlimit = 2\nwindow = 1m\n"

static const char overrides[] = SEARCH "[override:search]\n"
                                       "partner-7 = 5/1m   # its own limit\n"
                                       "scraper-3 = blocked\n"
                                       "health    = unlimited\n";

START_TEST(an_overridden_key_has_its_own_limit)
{
    fixture_clock_start(1000000);
    load(overrides);
    for (int i = 0; i < 5; i++)
        ck_acquire("search", "partner-7", 1, TRUE, 5, 4 - i, -1, 60000);
    ck_acquire("search", "partner-7", 1, FALSE, 5, 0, 60000, 60000);
    /* every other key has the limit's own */
    ck_acquire("search", "alice", 2, TRUE, 2, 0, -1, 60000);
    ck_acquire("search", "alice", 1, FALSE, 2, 0, 60000, 60000);
    /* no key: the limit's own rule */
    ck_acquire("search", NULL, 1, TRUE, 2, 1, -1, 60000);
    fixture_clock_advance_ms(60000);
    ck_acquire("search", "partner-7", 5, TRUE, 5, 0, -1, 60000);
}
END_TEST

START_TEST(a_blocked_key_is_always_denied_an_unlimited_one_never_limited)
{
    fixture_clock_start(1000000);
    load(overrides);
    for (int i = 0; i < 3; i++) {
        ck_acquire("search", "scraper-3", 1, FALSE, 2, 0, -1, 0);
        ck_acquire("search", "scraper-3", 0, FALSE, 2, 0, -1, 0); /* a peek too */
        ck_acquire("search", "health", 1000, TRUE, G_MAXINT64, G_MAXINT64, -1, 0);
    }
    /* neither touched the backend: no key was written */
    ck_assert_int_eq(fixture_keys(), 0);
    sluice_stats stats;
    ck_assert(sluice_stats_get("search", &stats, NULL));
    ck_assert_int_eq(stats.allowed, 3);
    ck_assert_int_eq(stats.denied, 6);
    /* the decorated API and the asynchronous one apply them too */
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire_wait("search", "scraper-3", 1, 1000, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(d.retry_after_ms, -1);
}
END_TEST

static void got(GObject *source, GAsyncResult *result, gpointer out)
{
    (void)source;
    *(GAsyncResult **)out = g_object_ref(result);
}

/* One sluice_acquire_async, run to its end on the thread-default main context. */
static int acquire_async(const char *name, const char *key, gint64 permits, sluice_decision *d)
{
    GAsyncResult *result = NULL;
    sluice_acquire_async(name, key, permits, NULL, got, &result);
    while (!result)
        g_main_context_iteration(NULL, TRUE);
    int rc = sluice_acquire_finish(result, d, NULL);
    g_object_unref(result);
    return rc;
}

START_TEST(the_asynchronous_api_applies_overrides)
{
    fixture_clock_start(1000000);
    load(overrides);
    sluice_decision d;
    ck_assert_int_eq(acquire_async("search", "partner-7", 4, &d), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 5, 1, -1, 60000);
    ck_assert_int_eq(acquire_async("search", "scraper-3", 1, &d), SLUICE_DENIED);
    ck_assert_decision(d, FALSE, 2, 0, -1, 0);
    ck_assert_int_eq(acquire_async("search", "health", 9, &d), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, G_MAXINT64, G_MAXINT64, -1, 0);
}
END_TEST

/* A reload that changes a key's override applies it to the key's state as it stands
 * (as a changed limit does); one that removes it puts the key back under the
 * limit's own rule, with the same state. */
START_TEST(a_reload_changes_and_removes_overrides_keeping_the_state)
{
    fixture_clock_start(1000000);
    load(overrides);
    ck_acquire("search", "partner-7", 4, TRUE, 5, 1, -1, 60000);
    ck_acquire("search", "health", 1, TRUE, G_MAXINT64, G_MAXINT64, -1, 0);
    ck_acquire("search", "bob", 1, TRUE, 2, 1, -1, 60000);
    load(SEARCH "[override:search]\npartner-7 = 6/1m\nbob = 3/1m\nhealth = blocked\n");
    ck_acquire("search", "partner-7", 1, TRUE, 6, 1, -1, 60000); /* 5 of 6 */
    ck_acquire("search", "bob", 2, TRUE, 3, 0, -1, 60000);       /* 1 taken before */
    ck_acquire("search", "health", 1, FALSE, 2, 0, -1, 0);
    ck_acquire("search", "scraper-3", 1, TRUE, 2, 1, -1, 60000); /* no longer blocked */
    sluice_rule_info rule;
    sluice_rule_source source;
    ck_assert(sluice_rule_get_key("search", "scraper-3", &rule, &source, NULL));
    ck_assert_int_eq(source, SLUICE_RULE_OWN);
    /* bob's override goes: his 3 taken stay counted against the limit's 2 */
    load(SEARCH "[override:search]\npartner-7 = 6/1m\n");
    ck_assert(sluice_rule_get_key("search", "bob", &rule, &source, NULL));
    ck_assert_int_eq(source, SLUICE_RULE_OWN);
    ck_assert_int_eq(rule.limit, 2);
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("search", "bob", 1, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(d.retry_after_ms, 60000);
    /* and every override gone: partner-7's 5 stay counted too */
    load(SEARCH);
    ck_assert_int_eq(sluice_acquire("search", "partner-7", 1, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(d.limit, 2);
    ck_assert_int_eq(d.retry_after_ms, 60000);
    ck_assert_uint_eq(sluice_rule_overrides("search", NULL), 0);
    fixture_clock_advance_ms(60000);
    ck_acquire("search", "partner-7", 2, TRUE, 2, 0, -1, 60000);
}
END_TEST

/* A key that took less than the limit's own before its override came keeps it. */
START_TEST(a_key_whose_override_comes_and_goes_keeps_its_state)
{
    fixture_clock_start(1000000);
    load(SEARCH);
    ck_acquire("search", "carol", 1, TRUE, 2, 1, -1, 60000);
    load(SEARCH "[override:search]\ncarol = 4/1m\n");
    ck_acquire("search", "carol", 2, TRUE, 4, 1, -1, 60000);
    load(SEARCH); /* 3 taken, the limit's own 2: none left */
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("search", "carol", 1, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(d.retry_after_ms, 60000);
}
END_TEST

/* An override is the key's whole limit: the rule's bands do not apply to it. */
START_TEST(an_override_replaces_the_bands_of_the_rule)
{
    fixture_clock_start(1000000);
    load("[limit:api]\nalgorithm = sliding_window\nlimit = 100\nwindow = 1m\nbands = 2/1s\n"
         "[override:api]\nbatch = 10/1s\n");
    ck_acquire("api", "batch", 10, TRUE, 10, 0, -1, 2000);
    ck_acquire("api", "alice", 2, TRUE, 2, 0, -1, 119000);
    ck_acquire("api", "alice", 1, FALSE, 2, 0, 1500, 119000);
}
END_TEST

/* gcra and token_bucket: an override's burst is its capacity. */
START_TEST(an_override_of_a_bucket_has_its_own_rate_and_burst)
{
    fixture_clock_start(1000000);
    load("[limit:g]\nalgorithm = gcra\nlimit = 1\nwindow = 1s\n"
         "[override:g]\nfast = 10/1s/3\n"
         "[limit:t]\nalgorithm = token_bucket\nlimit = 1\nwindow = 1s\n"
         "[override:t]\nfast = 10/1s/3\n");
    ck_acquire("g", "fast", 3, TRUE, 3, 0, -1, 300);
    ck_acquire("g", "fast", 1, FALSE, 3, 0, 100, 300);
    ck_acquire("g", "slow", 1, TRUE, 1, 0, -1, 1000);
    ck_acquire("t", "fast", 3, TRUE, 3, 0, -1, 300);
    ck_acquire("t", "fast", 1, FALSE, 3, 0, 100, 300);
    fixture_clock_advance_ms(100);
    ck_acquire("g", "fast", 1, TRUE, 3, 0, -1, 300);
    ck_acquire("t", "fast", 1, TRUE, 3, 0, -1, 300);
}
END_TEST

/* concurrency: an override sets the key's calls in flight, and its permits are given
 * back under it. */
START_TEST(a_concurrency_override_sets_the_calls_in_flight_of_a_key)
{
    fixture_clock_start(1000000);
    load("[limit:jobs]\nalgorithm = concurrency\nlimit = 1\n"
         "[override:jobs]\nvip = 3/1m\nnobody = blocked\n");
    ck_acquire("jobs", "vip", 3, TRUE, 3, 0, -1, 60000);
    ck_acquire("jobs", "vip", 1, FALSE, 3, 0, 60000, 60000);
    sluice_release("jobs", "vip", 2);
    ck_acquire("jobs", "vip", 2, TRUE, 3, 0, -1, 60000);
    ck_acquire("jobs", "other", 1, TRUE, 1, 0, -1, 60000);
    ck_acquire("jobs", "nobody", 1, FALSE, 1, 0, -1, 0);
    sluice_release("jobs", "nobody", 1); /* nothing was taken: nothing happens */
}
END_TEST

START_TEST(rule_get_key_says_which_rule_decides_a_key)
{
    load(overrides);
    sluice_rule_info rule;
    sluice_rule_source source = SLUICE_RULE_BLOCKED;
    ck_assert(sluice_rule_get_key("search", "partner-7", &rule, &source, NULL));
    ck_assert_int_eq(source, SLUICE_RULE_OVERRIDE);
    ck_assert_int_eq(rule.limit, 5);
    ck_assert_int_eq(rule.window_ms, 60000);
    ck_assert_str_eq(rule.algorithm, "fixed_window");
    ck_assert(sluice_rule_get_key("search", "scraper-3", &rule, &source, NULL));
    ck_assert_int_eq(source, SLUICE_RULE_BLOCKED);
    ck_assert_int_eq(rule.limit, 2);
    ck_assert(sluice_rule_get_key("search", "health", &rule, &source, NULL));
    ck_assert_int_eq(source, SLUICE_RULE_UNLIMITED);
    ck_assert(sluice_rule_get_key("search", "alice", &rule, &source, NULL));
    ck_assert_int_eq(source, SLUICE_RULE_OWN);
    ck_assert(sluice_rule_get_key("search", NULL, &rule, NULL, NULL));
    ck_assert_uint_eq(sluice_rule_overrides("search", NULL), 3);
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_rule_get_key("search", "", &rule, &source, &error));
    ck_assert_int_eq(error->code, SLUICE_ERROR_INVALID_ARGUMENT);
    g_clear_error(&error);
    ck_assert(!sluice_rule_get_key("nope", "k", &rule, &source, &error));
    ck_assert_int_eq(error->code, SLUICE_ERROR_NO_RULE);
}
END_TEST

/* Thousands of overrides: each key finds its own. */
START_TEST(thousands_of_overrides_each_apply_to_their_key)
{
    fixture_clock_start(1000000);
    GString *file = g_string_new(SEARCH "[override:search]\n");
    for (int i = 0; i < 5000; i++)
        g_string_append_printf(file, "user-%d = %d/1m\n", i, 3 + i % 5);
    load(file->str);
    g_string_free(file, TRUE);
    ck_assert_uint_eq(sluice_rule_overrides("search", NULL), 5000);
    for (int i = 0; i < 5000; i += 499) {
        g_autofree char *key = g_strdup_printf("user-%d", i);
        ck_acquire("search", key, 3 + i % 5, TRUE, 3 + i % 5, 0, -1, 60000);
        ck_acquire("search", key, 1, FALSE, 3 + i % 5, 0, 60000, 60000);
    }
    ck_acquire("search", "user-5000", 2, TRUE, 2, 0, -1, 60000);
}
END_TEST

/* Keys of every length find their own override, and only it: a long key (an API
 * token) as a short one, keys that differ in their last byte, a key that is a prefix
 * of another; every one of many keys, and none of as many others. */
START_TEST(every_key_finds_its_override_whatever_its_length)
{
    GString *file = g_string_new(SEARCH "[override:search]\n");
    GPtrArray *keys = g_ptr_array_new_with_free_func(g_free);
    for (guint len = 1; len <= 120; len++) {
        char *key = g_strnfill(len, 'k');
        key[len - 1] = 'a';
        g_ptr_array_add(keys, key);
    }
    for (guint i = 0; i < 3000; i++)
        g_ptr_array_add(keys, g_strdup_printf("token-%08x-%u", i * 2654435761u, i));
    for (guint i = 0; i < keys->len; i++)
        g_string_append_printf(file, "%s = %u/1m\n", (char *)keys->pdata[i], 3 + i % 7);
    load(file->str);
    g_string_free(file, TRUE);
    ck_assert_uint_eq(sluice_rule_overrides("search", NULL), keys->len);
    sluice_rule_info rule;
    sluice_rule_source source;
    for (guint i = 0; i < keys->len; i++) {
        const char *key = keys->pdata[i];
        ck_assert(sluice_rule_get_key("search", key, &rule, &source, NULL));
        ck_assert_msg(source == SLUICE_RULE_OVERRIDE && rule.limit == 3 + i % 7, "%s", key);
        /* the same key one byte longer, or its last byte changed, has none */
        g_autofree char *longer = g_strconcat(key, "k", NULL);
        g_autofree char *other = g_strdup(key);
        other[strlen(other) - 1] ^= 1;
        ck_assert(sluice_rule_get_key("search", longer, &rule, &source, NULL));
        ck_assert_msg(source == SLUICE_RULE_OWN, "%s", longer);
        ck_assert(sluice_rule_get_key("search", other, &rule, &source, NULL));
        ck_assert_msg(source == SLUICE_RULE_OWN, "%s", other);
    }
    g_ptr_array_unref(keys);
}
END_TEST

/* A limit takes at most 100 000 overrides; one more is refused, with the count. */
START_TEST(more_than_100000_overrides_are_refused)
{
    GString *ini = g_string_new("[limit:a]\nlimit = 2\nwindow = 1s\n[override:a]\n");
    for (int i = 0; i <= 100000; i++)
        g_string_append_printf(ini, "k%d = blocked\n", i);
    fixture_refused(ini->str, "[override:a]: 100001 overrides: at most 100000 for one limit; "
                              "expected fewer keys (a list that long is better kept as limits "
                              "of its own)");
    g_string_free(ini, TRUE);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("overrides");
    TCase *t = tcase_create("overrides");
    tcase_add_checked_fixture(t, NULL, teardown);
    tcase_add_test(t, an_overridden_key_has_its_own_limit);
    tcase_add_test(t, a_blocked_key_is_always_denied_an_unlimited_one_never_limited);
    tcase_add_test(t, the_asynchronous_api_applies_overrides);
    tcase_add_test(t, a_reload_changes_and_removes_overrides_keeping_the_state);
    tcase_add_test(t, a_key_whose_override_comes_and_goes_keeps_its_state);
    tcase_add_test(t, an_override_replaces_the_bands_of_the_rule);
    tcase_add_test(t, an_override_of_a_bucket_has_its_own_rate_and_burst);
    tcase_add_test(t, a_concurrency_override_sets_the_calls_in_flight_of_a_key);
    tcase_add_test(t, rule_get_key_says_which_rule_decides_a_key);
    tcase_add_test(t, thousands_of_overrides_each_apply_to_their_key);
    tcase_add_test(t, every_key_finds_its_override_whatever_its_length);
    suite_add_tcase(s, t);
    if (!fixture_on_redis() && !fixture_on_shm()) { /* the keyfile alone: once */
        TCase *keyfile = tcase_create("keyfile");
        tcase_set_timeout(keyfile, 60);
        tcase_add_test(keyfile, more_than_100000_overrides_are_refused);
        suite_add_tcase(s, keyfile);
    }
    return fixture_run(s);
}
