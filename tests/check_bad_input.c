/* SPDX-License-Identifier: MIT */
/* Bad input to every public function (NULL, empty, huge, not UTF-8, negative or
 * overflowing), and every algorithm decided at the extremes the keyfile accepts. */
#include "fixture.h"
#include "testing.h"

#include <glib/gstdio.h>
#include <sluice/admin.h>
#include <sluice/async.h>
#include <string.h>

#define HUGE_BYTES (10 * 1024 * 1024)

/* The largest duration, and the largest limit and burst (src/value.h). */
#define MAX_US      (G_GINT64_CONSTANT(36500) * 86400 * 1000000)
#define MAX_MS      (MAX_US / 1000)
#define MAX_PERMITS (G_GINT64_CONSTANT(1) << 50)
/* A late time for the injected clock: 2^52 µs (year 2112); plus 36500d it stays
 * under 2^53, where Lua's doubles are exact. */
#define LATE (G_GINT64_CONSTANT(1) << 52)

static char *huge;      /* 10 MB of 'n': a valid, huge name or key */
static char *huge_path; /* 10 MB of '/': a path no system accepts  */

static const char *fixed = "[limit:fixed]\nalgorithm = fixed_window\nlimit = 2\nwindow = 10s\n"
                           "[limit:cc]\nalgorithm = concurrency\nlimit = 2\n";

#define ck_assert_invalid(error)                                                                   \
    do {                                                                                           \
        ck_assert_msg(g_error_matches((error), SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT), "%s", \
                      (error) ? (error)->message : "no error");                                    \
        ck_assert(g_utf8_validate((error)->message, -1, NULL));                                    \
        ck_assert_int_lt(strlen((error)->message), 200);                                           \
    } while (0)

/* ---- names and keys --------------------------------------------------------------- */

static const char *bad_name(int i)
{
    const char *const names[] = {NULL, "", "fi\xffxed", "\xc3", huge};
    return names[i];
}
#define BAD_NAMES 5

START_TEST(every_call_that_takes_a_name_refuses_a_bad_one)
{
    const char *name = bad_name(_i);
    sluice_decision d = {TRUE, 1, 1, 1, 1, TRUE};
    sluice_stats stats;
    g_autoptr(GError) error = NULL;
    fixture_init(fixed);

    ck_assert_int_eq(sluice_acquire(name, NULL, 1, &d, &error), SLUICE_FAILED);
    ck_assert_invalid(error);
    ck_assert_decision(d, FALSE, 0, 0, -1, 0);
    g_clear_error(&error);
    ck_assert_int_eq(sluice_acquire_wait(name, "k", 1, 10, &d, &error), SLUICE_FAILED);
    ck_assert_invalid(error);
    g_clear_error(&error);
    ck_assert(!sluice_stats_get(name, &stats, &error));
    ck_assert_invalid(error);
    sluice_release(name, NULL, 1); /* ignored */
    ck_assert_uint_eq(sluice_testing_memory_keys(name), 0);
    sluice_shutdown();
}
END_TEST

START_TEST(a_name_is_at_most_1024_bytes)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *longest = g_strnfill(1024, 'n');
    g_autofree char *longer = g_strnfill(1025, 'n');
    g_autofree char *ini = g_strdup_printf("[limit:%s]\nlimit = 1\nwindow = 1m\n", longest);
    fixture_init(ini);
    ck_assert_int_eq(sluice_acquire(longest, NULL, 1, NULL, &error), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire(longest, NULL, 1, NULL, &error), SLUICE_DENIED);
    ck_assert_int_eq(sluice_acquire(longer, NULL, 1, NULL, &error), SLUICE_FAILED);
    ck_assert_invalid(error);
    ck_assert_str_eq(error->message, "name is longer than 1024 bytes");
    sluice_shutdown();
}
END_TEST

START_TEST(every_call_that_takes_a_key_refuses_a_bad_one)
{
    const char *const keys[] = {"", "k\xff", "\xe2\x82", huge};
    sluice_decision d;
    g_autoptr(GError) error = NULL;
    fixture_init(fixed);
    ck_assert_int_eq(sluice_acquire("fixed", keys[_i], 1, &d, &error), SLUICE_FAILED);
    ck_assert_invalid(error);
    g_clear_error(&error);
    ck_assert_int_eq(sluice_acquire_wait("cc", keys[_i], 1, 10, &d, &error), SLUICE_FAILED);
    ck_assert_invalid(error);
    /* release with a bad key gives nothing back */
    ck_assert_int_eq(sluice_acquire("cc", "k", 2, &d, NULL), SLUICE_ALLOWED);
    sluice_release("cc", keys[_i], 2);
    ck_assert_int_eq(sluice_acquire("cc", "k", 0, &d, NULL), SLUICE_DENIED);
    sluice_shutdown();
}
END_TEST

/* ---- permits and timeouts ------------------------------------------------------------ */

START_TEST(negative_permits_are_refused_and_overflowing_ones_never_pass)
{
    sluice_decision d;
    g_autoptr(GError) error = NULL;
    fixture_clock_start(1000000);
    fixture_init(fixed);
    const gint64 negative[] = {-1, G_MININT64, G_MININT64 + 1};
    for (gsize i = 0; i < G_N_ELEMENTS(negative); i++) {
        ck_assert_int_eq(sluice_acquire("fixed", NULL, negative[i], &d, &error), SLUICE_FAILED);
        ck_assert_invalid(error);
        g_clear_error(&error);
    }
    const gint64 too_many[] = {3, MAX_PERMITS + 1, G_MAXINT64 / 2, G_MAXINT64 - 1, G_MAXINT64};
    for (gsize i = 0; i < G_N_ELEMENTS(too_many); i++) {
        ck_assert_int_eq(sluice_acquire("fixed", NULL, too_many[i], &d, &error), SLUICE_DENIED);
        ck_assert_ptr_null(error);
        ck_assert_decision(d, FALSE, 2, 2, -1, 0); /* can never pass; nothing taken */
        ck_assert_int_eq(sluice_acquire_wait("cc", "k", too_many[i], 1000, &d, &error),
                         SLUICE_DENIED);
        ck_assert_decision(d, FALSE, 2, 2, -1, 0);
    }
    /* releasing more than was taken, or a negative number, changes nothing else */
    ck_assert_int_eq(sluice_acquire("cc", "k", 1, &d, NULL), SLUICE_ALLOWED);
    sluice_release("cc", "k", -5);
    sluice_release("cc", "k", G_MININT64);
    ck_assert_int_eq(sluice_acquire("cc", "k", 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 1);
    sluice_release("cc", "k", G_MAXINT64);
    ck_assert_int_eq(sluice_acquire("cc", "k", 2, &d, NULL), SLUICE_ALLOWED);
    sluice_release("cc", "k", G_MAXINT64);
    ck_assert_int_eq(sluice_acquire("cc", "k", 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 2);
    sluice_shutdown();
}
END_TEST

START_TEST(wait_timeouts_beyond_36500d_or_negative_are_refused)
{
    sluice_decision d;
    g_autoptr(GError) error = NULL;
    fixture_clock_start(LATE);
    fixture_init(fixed);
    const gint64 bad[] = {-1, G_MININT64, MAX_MS + 1, G_MAXINT64 / 1000, G_MAXINT64};
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        ck_assert_int_eq(sluice_acquire_wait("fixed", NULL, 1, bad[i], &d, &error), SLUICE_FAILED);
        ck_assert_invalid(error);
        g_clear_error(&error);
    }
    /* the longest wait is fine: the window ends first */
    ck_assert_int_eq(sluice_acquire_wait("fixed", NULL, 2, MAX_MS, &d, &error), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire_wait("fixed", NULL, 1, MAX_MS, &d, &error), SLUICE_ALLOWED);
    ck_assert_int_eq(fixture_clock_now(), LATE + 10000000);
    sluice_shutdown();
}
END_TEST

/* ---- the other public functions --------------------------------------------------- */

START_TEST(init_refuses_bad_paths_and_files)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("sluice-bad-XXXXXX", NULL);
    const char *const paths[] = {"", huge_path, "/nonexistent/\xff\xfe.ini", dir, "/dev/zero"};
    for (gsize i = 0; i < G_N_ELEMENTS(paths); i++) {
        ck_assert(!sluice_init(paths[i], &error));
        ck_assert_msg(
            error && error->domain == SLUICE_ERROR &&
                (error->code == SLUICE_ERROR_INVALID_ARGUMENT || error->code == SLUICE_ERROR_IO),
            "%s", error ? error->message : "no error");
        ck_assert(g_utf8_validate(error->message, -1, NULL));
        ck_assert_int_lt(strlen(error->message), 300);
        g_clear_error(&error);
    }
    g_rmdir(dir);
    /* nothing was loaded: names are not limited */
    ck_assert_int_eq(sluice_acquire("fixed", NULL, 100, NULL, NULL), SLUICE_ALLOWED);
}
END_TEST

START_TEST(init_refuses_huge_or_broken_keyfiles_with_a_short_message)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *big_limit = g_strnfill(HUGE_BYTES, '9');
    g_autofree char *big_unit = g_strnfill(HUGE_BYTES, 'x');
    char *files[] = {
        g_strdup_printf("[limit:%s]\nlimit = 1\nwindow = 1s\n", huge),
        g_strdup_printf("[limit:a]\nlimit = %s\nwindow = 1s\n", big_limit),
        g_strdup_printf("[limit:a]\nlimit = 1\nwindow = 1%s\n", big_unit),
        g_strdup_printf("[limit:a]\nlimit = 1\nwindow = 1s\nmode = %s\n", huge),
        g_strdup_printf("[limit:a]\nlimit = 1\nwindow = 1s\n%s = 1\n", huge),
        g_strdup("[limit:\xff\xfe]\nlimit = 1\nwindow = 1s\n"),
        g_strdup("[limit:a]\nlimit = 1\nwindow = 1\xffs\n"),
        g_strdup("[limit:]\nlimit = 1\nwindow = 1s\n"),
        g_strdup("\x01\x02\x03 not a keyfile\n"),
        g_strdup_printf("[sluice]\nkey_prefix = %s\nbackend = %s\n", huge, huge),
    };
    for (gsize i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *path = fixture_write_keyfile(files[i]);
        ck_assert_msg(!sluice_init(path, &error), "file %zu was accepted", i);
        ck_assert_int_eq(error->domain, SLUICE_ERROR);
        ck_assert(g_utf8_validate(error->message, -1, NULL));
        ck_assert_msg(strlen(error->message) < 600, "file %zu: a message of %zu bytes", i,
                      strlen(error->message));
        g_clear_error(&error);
        g_unlink(path);
        g_free(files[i]);
    }
}
END_TEST

static int busy(void)
{
    return 0;
}

RATE_LIMITED_FUNCTION(int, empty_name, (void), (), "", busy, NULL)
{
    return 1;
}

RATE_LIMITED_FUNCTION(int, broken_name, (void), (), "br\xffoken", busy, NULL)
{
    return 1;
}

static void count_bad_name(const gchar *domain, GLogLevelFlags level, const gchar *message,
                           gpointer user_data)
{
    (void)domain;
    (void)level;
    if (strstr(message, "the limit name is empty, too long or not UTF-8"))
        (*(int *)user_data)++;
}

/* A decorated function whose name no rule can have is said once per function (at
 * init), not at each call, and its calls run the body. */
START_TEST(a_decorated_name_no_rule_can_have_is_said_once)
{
    int warned = 0;
    guint handler = g_log_set_handler("sluice", G_LOG_LEVEL_WARNING, count_bad_name, &warned);
    fixture_init(fixed);
    ck_assert_int_eq(warned, 2); /* empty_name and broken_name */
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(empty_name(), 1);
        ck_assert_int_eq(broken_name(), 1);
    }
    ck_assert_int_eq(warned, 2);
    g_log_remove_handler("sluice", handler);
    sluice_shutdown();
}
END_TEST

static void count_descriptor(const sluice_descriptor *d, gboolean has_rule, gpointer n)
{
    (void)d;
    (void)has_rule;
    (*(int *)n)++;
}

START_TEST(the_other_public_functions_refuse_null)
{
    g_autoptr(GError) error = NULL;
    sluice_stats stats;
    sluice_decision d = {TRUE, 1, 1, 1, 1, TRUE};

    /* before init and after shutdown, twice */
    sluice_shutdown();
    sluice_shutdown();
    ck_assert(!sluice_reload(&error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED));
    g_clear_error(&error);
    ck_assert(!sluice_stats_get("fixed", &stats, &error));
    g_clear_error(&error);

    fixture_init(fixed);
    ck_assert(!sluice_stats_get("fixed", NULL, &error));
    ck_assert_invalid(error);
    g_clear_error(&error);
    sluice_descriptor_stats(NULL, &stats);
    ck_assert_uint_eq(stats.allowed, 0);
    sluice_descriptor_stats(NULL, NULL);
    sluice_descriptors_foreach(NULL, NULL);
    int n = 0;
    sluice_descriptors_foreach(count_descriptor, &n);
    ck_assert_int_ge(n, 2);
    ck_assert_str_eq(sluice_strerror((sluice_error_code)-1), "unknown error");
    ck_assert_str_eq(sluice_strerror((sluice_error_code)9999), "unknown error");
    ck_assert_int_eq(sluice_acquire_finish(NULL, &d, &error), SLUICE_FAILED);
    ck_assert_invalid(error);
    ck_assert_int_eq(d.allowed, FALSE);
    g_clear_error(&error);
    ck_assert_uint_eq(sluice_testing_memory_keys(NULL), 0);
    ck_assert_uint_eq(sluice_testing_memory_keys(huge), 0);
    sluice_testing_fail_backend(1, NULL);
    ck_assert_int_eq(sluice_acquire("fixed", NULL, 1, &d, &error), SLUICE_FAILED);
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND));
    g_clear_error(&error);
    sluice_testing_fail_backend(0, huge);

    /* what the macros call, called wrongly */
    sluice_lease lease = {NULL, NULL, 0};
    static sluice_descriptor descriptor = SLUICE__DESCRIPTOR("fixed", "test"); /* registered */
    ck_assert_int_eq(sluice__enter(NULL, NULL, &lease, NULL, NULL), SLUICE__DEGRADE);
    ck_assert_int_eq(sluice__enter(&descriptor, NULL, NULL, NULL, NULL), SLUICE__DEGRADE);
    ck_assert_int_eq(sluice__enter(&descriptor, NULL, &lease, NULL, &error), SLUICE__FAILED);
    ck_assert_invalid(error);
    g_clear_error(&error);
    ck_assert_int_eq(sluice__enter(&descriptor, huge, &lease, &d, &error), SLUICE__FAILED);
    ck_assert_invalid(error);
    g_clear_error(&error);
    sluice__leave(NULL);
    sluice__register(NULL);

    /* the operators' functions */
    const char *const paths[] = {NULL, "", huge_path, "/dev/zero", "/nonexistent/\xff.ini"};
    for (gsize i = 0; i < G_N_ELEMENTS(paths); i++) {
        ck_assert(!sluice_config_check(paths[i], &error));
        ck_assert(g_utf8_validate(error->message, -1, NULL));
        ck_assert_int_lt(strlen(error->message), 300);
        g_clear_error(&error);
    }
    sluice_rule_info info;
    ck_assert(!sluice_rule_get(NULL, &info, &error));
    ck_assert_invalid(error);
    g_clear_error(&error);
    ck_assert(!sluice_rule_get(huge, &info, &error));
    ck_assert_invalid(error);
    g_clear_error(&error);
    ck_assert(!sluice_rule_get("fixed", NULL, &error));
    ck_assert_invalid(error);
    g_clear_error(&error);
    ck_assert(sluice_rule_get("fixed", &info, &error));
    ck_assert_uint_eq(sluice_rule_bands(huge, NULL, 0, &error), 0);
    ck_assert_invalid(error);
    g_clear_error(&error);
    for (int i = 0; i < BAD_NAMES; i++) {
        ck_assert(!sluice_reset(bad_name(i), NULL, &error));
        ck_assert_invalid(error);
        g_clear_error(&error);
    }
    ck_assert(!sluice_reset("fixed", huge, &error));
    ck_assert_invalid(error);
    g_clear_error(&error);

    /* decorated with a name no rule can have: the body runs */
    ck_assert_int_eq(empty_name(), 1);
    ck_assert_int_eq(broken_name(), 1);
    sluice_shutdown();
}
END_TEST

static void finished(GObject *source, GAsyncResult *result, gpointer data)
{
    (void)source;
    GError **error = data;
    sluice_decision d = {TRUE, 1, 1, 1, 1, TRUE};
    ck_assert_int_eq(sluice_acquire_finish(result, &d, error), SLUICE_FAILED);
    ck_assert_int_eq(d.allowed, FALSE);
}

START_TEST(the_asynchronous_call_refuses_bad_input_too)
{
    fixture_init(fixed);
    struct {
        const char *name, *key;
        gint64 permits;
    } const calls[] = {
        {NULL, NULL, 1},  {"", NULL, 1},      {huge, NULL, 1},     {"fi\xffxed", NULL, 1},
        {"fixed", "", 1}, {"fixed", huge, 1}, {"fixed", NULL, -1}, {"fixed", NULL, G_MININT64},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(calls); i++) {
        GError *error = NULL;
        sluice_acquire_async(calls[i].name, calls[i].key, calls[i].permits, NULL, finished, &error);
        while (!error)
            g_main_context_iteration(NULL, TRUE);
        ck_assert_invalid(error);
        g_error_free(error);
    }
    sluice_shutdown();
}
END_TEST

/* ---- the extremes, on every algorithm ------------------------------------------------ */

/* The rule at the edge of what the keyfile accepts, and what one step past it is. */
typedef struct {
    const char *rule;    /* accepted                                  */
    const char *refused; /* one step further: refused                 */
    const char *why;     /* in the refusal                            */
} edge;

#define W36500 "window = 36500d\n"
static const edge edges[] = {
    {"algorithm = fixed_window\nlimit = 1125899906842624\n" W36500,
     "algorithm = fixed_window\nlimit = 1125899906842625\n" W36500, "at most 1125899906842624"},
    {"algorithm = fixed_window\nlimit = 1\n" W36500,
     "algorithm = fixed_window\nlimit = 1\nwindow = 36501d\n", "too long; at most 36500d"},
    {"algorithm = sliding_log\nlimit = 100000\n" W36500,
     "algorithm = sliding_log\nlimit = 100001\n" W36500, "at most 100000"},
    {"algorithm = concurrency\nlimit = 100000\n" W36500,
     "algorithm = concurrency\nlimit = 100001\n" W36500, "at most 100000"},
    {"algorithm = sliding_window\nlimit = 1428\n" W36500,
     "algorithm = sliding_window\nlimit = 1429\n" W36500, "at most 1428"},
    {"algorithm = sliding_window\nlimit = 1125899906842624\nwindow = 4ms\n",
     "algorithm = sliding_window\nlimit = 1125899906842624\nwindow = 5ms\n",
     "at most 900719925474099"},
    {"algorithm = token_bucket\nlimit = 1125899906842624\n" W36500,
     "algorithm = token_bucket\nlimit = 1125899906842625\n" W36500, "at most 1125899906842624"},
    {"algorithm = token_bucket\nlimit = 1000000\nwindow = 1s\nburst = 1125899906842624\n",
     "algorithm = token_bucket\nlimit = 1000000\nwindow = 1s\nburst = 1125899906842625\n",
     "at most 1125899906842624"},
    {"algorithm = gcra\nlimit = 1051200000000000\n" W36500,
     "algorithm = gcra\nlimit = 1051200000000000\nburst = 1051200000000001\n" W36500,
     "refilling it would take more than 36500d"},
};

START_TEST(limits_and_windows_are_accepted_up_to_the_edge_and_refused_past_it)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *good = g_strdup_printf("[limit:e]\n%s", edges[_i].rule);
    fixture_init(good);
    sluice_shutdown();
    g_autofree char *bad = g_strdup_printf("[limit:e]\n%s", edges[_i].refused);
    g_autofree char *path = fixture_write_keyfile(bad);
    ck_assert(!sluice_init(path, &error));
    ck_assert_msg(strstr(error->message, edges[_i].why), "%s", error->message);
}
END_TEST

/* The longest timeout: sliding_log and concurrency on Redis write one member per
 * permit, 100000 of them in one call. */
#define EXTREME(rule) "[sluice]\ntimeout = 10s\n[limit:x]\n" rule

static void decide(gint64 permits, sluice_decision *d, int expected)
{
    g_autoptr(GError) error = NULL;
    int r = sluice_acquire("x", NULL, permits, d, &error);
    ck_assert_msg(r == expected, "%" G_GINT64_FORMAT " permits: %d, expected %d (%s)", permits, r,
                  expected, error ? error->message : "");
}

/* What every algorithm answers alike at its edge, at a late time: `capacity`
 * permits pass at once, the next one waits `retry_ms`, and no number of permits
 * overflows anything. */
static void full_then_one_more(gint64 capacity, gint64 reset_ms, gint64 retry_ms)
{
    sluice_decision d;
    decide(G_MAXINT64, &d, SLUICE_DENIED);
    ck_assert_decision(d, FALSE, capacity, capacity, -1, 0);
    decide(capacity + 1, &d, SLUICE_DENIED);
    ck_assert_decision(d, FALSE, capacity, capacity, -1, 0);
    decide(capacity, &d, SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, capacity, 0, -1, reset_ms);
    decide(1, &d, SLUICE_DENIED);
    ck_assert_decision(d, FALSE, capacity, 0, retry_ms, reset_ms);
    decide(G_MAXINT64, &d, SLUICE_DENIED);
    ck_assert_int_eq(d.retry_after_ms, -1);
}

START_TEST(fixed_window_at_its_edges)
{
    sluice_decision d;
    fixture_clock_start(LATE);
    fixture_init(EXTREME("algorithm = fixed_window\nlimit = 1125899906842624\n" W36500));
    full_then_one_more(MAX_PERMITS, MAX_MS, MAX_MS);
    fixture_clock_set(LATE + MAX_US);
    decide(1, &d, SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, MAX_PERMITS, MAX_PERMITS - 1, -1, MAX_MS);
    sluice_shutdown();
}
END_TEST

START_TEST(sliding_log_and_concurrency_at_their_edges)
{
    const char *algorithm = _i ? "concurrency" : "sliding_log";
    g_autofree char *rule = g_strdup_printf(
        "[sluice]\ntimeout = 10s\n[limit:x]\nalgorithm = %s\nlimit = 100000\n" W36500, algorithm);
    sluice_decision d;
    fixture_clock_start(LATE);
    fixture_init(rule);
    full_then_one_more(100000, MAX_MS, MAX_MS);
    fixture_clock_set(LATE + MAX_US - 1);
    decide(1, &d, SLUICE_DENIED);
    ck_assert_int_eq(d.retry_after_ms, 1);
    fixture_clock_set(LATE + MAX_US);
    decide(1, &d, SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 100000, 99999, -1, MAX_MS);
    if (_i) { /* concurrency: giving back more than is held empties it */
        sluice_release("x", NULL, G_MAXINT64);
        decide(0, &d, SLUICE_ALLOWED);
        ck_assert_decision(d, TRUE, 100000, 100000, -1, 0);
    }
    sluice_shutdown();
}
END_TEST

/* sliding_window's answers by docs/algorithms.md, in exact integers. */
static void sliding_window_at(gint64 limit, gint64 w, gint64 now)
{
    sluice_decision d;
    gint64 w_ms = w / 1000, start = now - now % w;
#define CEIL_MS(us) (((us) + 999) / 1000)
    decide(G_MAXINT64, &d, SLUICE_DENIED);
    ck_assert_decision(d, FALSE, limit, limit, -1, 0);
    decide(limit, &d, SLUICE_ALLOWED); /* cur = limit, prev = 0 */
    ck_assert_decision(d, TRUE, limit, 0, -1, CEIL_MS(start + 2 * w - now));
    /* one more waits for the next window, where cur becomes prev and weighs
     * (w_ms - e) / w_ms: it passes once limit * (w_ms - e) + w_ms <= limit * w_ms */
    gint64 e_next = w_ms - (limit - 1) * w_ms / limit;
    decide(1, &d, SLUICE_DENIED);
    ck_assert_decision(d, FALSE, limit, 0, CEIL_MS(start + w + e_next * 1000 - now),
                       CEIL_MS(start + 2 * w - now));
    decide(G_MAXINT64, &d, SLUICE_DENIED);
    ck_assert_decision(d, FALSE, limit, 0, -1, CEIL_MS(start + 2 * w - now));
    fixture_clock_set(start + w + e_next * 1000);
    decide(1, &d, SLUICE_ALLOWED);
    fixture_clock_set(start + 3 * w); /* both windows are over */
    decide(0, &d, SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, limit, limit, -1, 0);
#undef CEIL_MS
}

START_TEST(sliding_window_at_its_edges)
{
    fixture_clock_start(LATE);
    fixture_init(EXTREME("algorithm = sliding_window\nlimit = 1428\n" W36500));
    sliding_window_at(1428, MAX_US, LATE);
    sluice_shutdown();
    fixture_clock_start(LATE);
    fixture_init(EXTREME("algorithm = sliding_window\nlimit = 1125899906842624\nwindow = 4ms\n"));
    sliding_window_at(MAX_PERMITS, 4000, LATE);
    sluice_shutdown();
}
END_TEST

START_TEST(token_bucket_and_gcra_at_their_edges)
{
    const char *algorithm = _i ? "gcra" : "token_bucket";
    sluice_decision d;
    /* the largest limit over the longest window: one permit per 3 µs */
    g_autofree char *longest = g_strdup_printf(
        "[sluice]\ntimeout = 10s\n[limit:x]\nalgorithm = %s\nlimit = 1051200000000000\n" W36500,
        algorithm);
    fixture_clock_start(LATE);
    fixture_init(longest);
    full_then_one_more(1051200000000000, MAX_MS, 1);
    fixture_clock_set(LATE + 3);
    decide(1, &d, SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 1051200000000000, 0, -1, MAX_MS);
    /* a waiting caller at the longest wait */
    ck_assert_int_eq(sluice_acquire_wait("x", NULL, 1, MAX_MS, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(fixture_clock_now(), LATE + 6);
    sluice_shutdown();

    /* the largest burst: one permit per µs, 2^50 at once, refilled in 2^50 µs */
    g_autofree char *deepest =
        g_strdup_printf("[sluice]\ntimeout = 10s\n[limit:x]\nalgorithm = "
                        "%s\nlimit = 1000000\nwindow = 1s\nburst = %" G_GINT64_FORMAT "\n",
                        algorithm, MAX_PERMITS);
    fixture_clock_start(LATE);
    fixture_init(deepest);
    full_then_one_more(MAX_PERMITS, (MAX_PERMITS + 999) / 1000, 1);
    fixture_clock_set(LATE + MAX_PERMITS);
    decide(0, &d, SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, MAX_PERMITS, MAX_PERMITS, -1, 0);
    sluice_shutdown();
}
END_TEST

int main(void)
{
    huge = g_strnfill(HUGE_BYTES, 'n');
    huge_path = g_strnfill(HUGE_BYTES, '/');

    Suite *s = suite_create("bad_input");
    TCase *tc = tcase_create("arguments");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, every_call_that_takes_a_name_refuses_a_bad_one, 0, BAD_NAMES);
    tcase_add_test(tc, a_name_is_at_most_1024_bytes);
    tcase_add_loop_test(tc, every_call_that_takes_a_key_refuses_a_bad_one, 0, 4);
    tcase_add_test(tc, negative_permits_are_refused_and_overflowing_ones_never_pass);
    tcase_add_test(tc, wait_timeouts_beyond_36500d_or_negative_are_refused);
    tcase_add_test(tc, init_refuses_bad_paths_and_files);
    tcase_add_test(tc, init_refuses_huge_or_broken_keyfiles_with_a_short_message);
    tcase_add_test(tc, the_other_public_functions_refuse_null);
    tcase_add_test(tc, a_decorated_name_no_rule_can_have_is_said_once);
    tcase_add_test(tc, the_asynchronous_call_refuses_bad_input_too);
    suite_add_tcase(s, tc);

    TCase *extremes = tcase_create("extremes");
    tcase_set_timeout(extremes, 60);
    tcase_add_loop_test(extremes,
                        limits_and_windows_are_accepted_up_to_the_edge_and_refused_past_it, 0,
                        G_N_ELEMENTS(edges));
    tcase_add_test(extremes, fixed_window_at_its_edges);
    tcase_add_loop_test(extremes, sliding_log_and_concurrency_at_their_edges, 0, 2);
    tcase_add_test(extremes, sliding_window_at_its_edges);
    tcase_add_loop_test(extremes, token_bucket_and_gcra_at_their_edges, 0, 2);
    suite_add_tcase(s, extremes);

    int status = fixture_run(s);
    g_free(huge);
    g_free(huge_path);
    return status;
}
