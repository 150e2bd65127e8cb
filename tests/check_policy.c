/* SPDX-License-Identifier: MIT */
/* Per-key policy: sluice_penalize, sluice_block and sluice_block_retry_after on every
 * backend (SLUICE_TEST_BACKEND), and, on a backend processes share, a block or a
 * penalty made by another process (the sluice command) seen at the next decision. */
#include "fixture.h"
#include "unconst.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH: the path of the built sluice command (tests/CMakeLists.txt)"
#endif

static void teardown(void)
{
    sluice_shutdown();
    sluice_clock_set(NULL, NULL, NULL);
}

/* Asserts that call fails with the error code `expected`. */
#define ck_refused(call, expected)                                                                 \
    do {                                                                                           \
        GError *e_ = NULL;                                                                         \
        ck_assert_msg(!(call), "%s succeeded", #call);                                             \
        ck_assert_msg(e_ && e_->domain == SLUICE_ERROR && e_->code == (expected), "%s: %s", #call, \
                      e_ ? e_->message : "no error");                                              \
        g_error_free(e_);                                                                          \
    } while (0)

/* Asserts that call succeeds. */
#define ck_done(call)                                                                              \
    do {                                                                                           \
        GError *e_ = NULL;                                                                         \
        ck_assert_msg((call), "%s: %s", #call, e_ ? e_->message : "");                             \
    } while (0)

/* Asserts a blocked denial: limit, retry and reset (ms). */
#define ck_blocked(name, key, limit, retry, reset)                                                 \
    do {                                                                                           \
        sluice_decision d_;                                                                        \
        ck_assert_int_eq(sluice_acquire((name), (key), 1, &d_, NULL), SLUICE_DENIED);              \
        ck_assert_decision(d_, FALSE, (limit), 0, (retry), (reset));                               \
        ck_assert_msg(d_.blocked, "not blocked");                                                  \
    } while (0)

/* ---- penalties ----------------------------------------------------------------------- */

static const char rules[] =
    "[limit:fw]\nalgorithm = fixed_window\nlimit = 4\nwindow = 1m\n"
    "[limit:sl]\nalgorithm = sliding_log\nlimit = 4\nwindow = 10s\n"
    "[limit:sw]\nalgorithm = sliding_window\nlimit = 4\nwindow = 10s\n"
    "[limit:tb]\nalgorithm = token_bucket\nlimit = 10\nwindow = 1s\n"
    "[limit:gc]\nalgorithm = gcra\nlimit = 10\nwindow = 1s\n"
    "[limit:cc]\nalgorithm = concurrency\nlimit = 2\n"
    "[limit:ad]\nalgorithm = adaptive\nlimit = 10\n"
    "[limit:shared]\nalgorithm = gcra\nlimit = 10\nwindow = 1s\nper_key = false\n"
    "[limit:log]\nalgorithm = sliding_log\nlimit = 2\nwindow = 1s\nper_key = false\n"
    "[limit:preview]\nalgorithm = fixed_window\nlimit = 1\nwindow = 1m\nmode = shadow\n"
    "[limit:banded]\nalgorithm = fixed_window\nlimit = 10\nwindow = 1m\nbands = 3/1s\n"
    "[override:fw]\nbig = 8/1m\nhealth = unlimited\nbanned = blocked\n";

/* A penalty's permits count as admitted now: the key has that many fewer, and waits
 * for them as for its own. */
START_TEST(a_penalty_counts_as_admitted_now)
{
    fixture_clock_start(1000000);
    fixture_init(rules);
    ck_done(sluice_penalize("fw", "k", 3, &e_));
    ck_acquire("fw", "k", 1, TRUE, 4, 0, -1, 60000);
    ck_acquire("fw", "k", 1, FALSE, 4, 0, 60000, 60000);
    ck_done(sluice_penalize("sl", "k", 3, &e_));
    ck_acquire("sl", "k", 1, TRUE, 4, 0, -1, 10000);
    ck_acquire("sl", "k", 1, FALSE, 4, 0, 10000, 10000);
    ck_done(sluice_penalize("sw", "k", 3, &e_));
    ck_acquire("sw", "k", 1, TRUE, 4, 0, -1, 19000);
    /* token_bucket and gcra: 15 of a burst of 10, a token each 100 ms: 5 in debt */
    ck_done(sluice_penalize("tb", "k", 15, &e_));
    ck_acquire("tb", "k", 0, FALSE, 10, 0, 600, 1500);
    ck_done(sluice_penalize("gc", "k", 15, &e_));
    ck_acquire("gc", "k", 0, FALSE, 10, 0, 600, 1500);
    fixture_clock_advance_ms(600);
    ck_acquire("tb", "k", 1, TRUE, 10, 0, -1, 1000);
    ck_acquire("gc", "k", 1, TRUE, 10, 0, -1, 1000);
    /* another key is untouched */
    ck_acquire("gc", "other", 1, TRUE, 10, 9, -1, 100);
}
END_TEST

/* A penalty takes at most one capacity of debt: twice the capacity in use. */
START_TEST(a_penalty_leaves_at_most_one_capacity_of_debt)
{
    fixture_clock_start(1000000);
    fixture_init(rules);
    for (int i = 0; i < 3; i++) {
        ck_done(sluice_penalize("fw", "k", 100, &e_));
        ck_done(sluice_penalize("sl", "k", 100, &e_));
        ck_done(sluice_penalize("tb", "k", G_MAXINT64, &e_));
        ck_done(sluice_penalize("gc", "k", 1000, &e_));
    }
    ck_acquire("fw", "k", 0, FALSE, 4, 0, 60000, 60000);
    ck_acquire("sl", "k", 0, FALSE, 4, 0, 10000, 10000);
    /* tokens at -10: 11 missing for one, 20 to full */
    ck_acquire("tb", "k", 0, FALSE, 10, 0, 1100, 2000);
    ck_acquire("gc", "k", 0, FALSE, 10, 0, 1100, 2000);
    /* the sliding log frees all at once after its window: 8 were logged at 1 s */
    fixture_clock_advance_ms(10000);
    ck_acquire("sl", "k", 4, TRUE, 4, 0, -1, 10000);
}
END_TEST

START_TEST(a_penalty_applies_the_override_and_every_band)
{
    fixture_clock_start(1000000);
    fixture_init(rules);
    ck_done(sluice_penalize("fw", "big", 7, &e_));
    ck_acquire("fw", "big", 1, TRUE, 8, 0, -1, 60000);
    ck_done(sluice_penalize("fw", "health", 7, &e_)); /* decided by its override alone */
    ck_acquire("fw", "health", 1, TRUE, G_MAXINT64, G_MAXINT64, -1, 0);
    ck_done(sluice_penalize("fw", "banned", 1, &e_));
    /* bands: 3 of the 1 s band and of the rule's 10 per minute */
    ck_done(sluice_penalize("banded", "k", 3, &e_));
    ck_acquire("banded", "k", 1, FALSE, 3, 0, 1000, 60000);
    fixture_clock_advance_ms(1000);
    ck_acquire("banded", "k", 3, TRUE, 3, 0, -1, 59000);
    ck_acquire("banded", "k", 4, FALSE, 3, 0, -1, 59000);
    /* a rule with per_key = false takes it from the one shared state */
    ck_done(sluice_penalize("shared", "anyone", 10, &e_));
    ck_acquire("shared", NULL, 0, FALSE, 10, 0, 100, 1000);
    ck_done(sluice_penalize("log", NULL, 2, &e_));
    ck_acquire("log", "x", 1, FALSE, 2, 0, 1000, 1000);
}
END_TEST

START_TEST(a_penalty_is_refused_where_it_means_nothing)
{
    fixture_init(rules);
    ck_refused(sluice_penalize("cc", "k", 1, &e_), SLUICE_ERROR_NOT_SUPPORTED);
    ck_refused(sluice_penalize("ad", NULL, 1, &e_), SLUICE_ERROR_NOT_SUPPORTED);
    ck_refused(sluice_block("ad", NULL, 1000, &e_), SLUICE_ERROR_NOT_SUPPORTED);
    ck_refused(sluice_penalize("fw", "k", -1, &e_), SLUICE_ERROR_INVALID_ARGUMENT);
    ck_refused(sluice_penalize("fw", "", 1, &e_), SLUICE_ERROR_INVALID_ARGUMENT);
    ck_refused(sluice_penalize(NULL, "k", 1, &e_), SLUICE_ERROR_INVALID_ARGUMENT);
    ck_done(sluice_penalize("no.rule", "k", 5, &e_)); /* not limited: nothing to take */
    ck_done(sluice_penalize("fw", "k", 0, &e_));
    ck_acquire("fw", "k", 4, TRUE, 4, 0, -1, 60000);
    sluice_shutdown();
    ck_refused(sluice_penalize("fw", "k", 1, &e_), SLUICE_ERROR_NOT_INITIALIZED);
    ck_refused(sluice_block("fw", "k", 1, &e_), SLUICE_ERROR_NOT_INITIALIZED);
}
END_TEST

/* warm-up keeps the time the limit is free, not tokens: a penalty is not defined for it
 * (blocks are). In process only: the scripts have no warm-up yet. */
START_TEST(a_penalty_of_a_warming_limit_is_refused)
{
    fixture_clock_start(1000000);
    fixture_init("[limit:w]\nalgorithm = token_bucket\nlimit = 10\nwindow = 1s\nwarmup = 5s\n");
    ck_refused(sluice_penalize("w", "k", 1, &e_), SLUICE_ERROR_NOT_SUPPORTED);
    ck_done(sluice_block("w", "k", 100, &e_));
    ck_blocked("w", "k", 10, 100, 100);
}
END_TEST

/* ---- blocks ------------------------------------------------------------------------ */

START_TEST(a_block_denies_every_call_of_the_key_until_it_ends)
{
    fixture_clock_start(1000000);
    fixture_init(rules);
    ck_done(sluice_block("gc", "k", 1500, &e_));
    ck_blocked("gc", "k", 10, 1500, 1500);
    ck_acquire("gc", "other", 1, TRUE, 10, 9, -1, 100);
    fixture_clock_advance_ms(1499);
    ck_blocked("gc", "k", 10, 1, 1);
    fixture_clock_advance_ms(1);
    ck_acquire("gc", "k", 1, TRUE, 10, 9, -1, 100);
    /* a block replaces the one in force: a shorter one too */
    ck_done(sluice_block("fw", "k", 60000, &e_));
    ck_done(sluice_block("fw", "k", 10, &e_));
    ck_blocked("fw", "k", 4, 10, 10);
    /* the key's state stays as it is under a block, and 0 lifts the block alone */
    ck_acquire("sl", "k", 3, TRUE, 4, 1, -1, 10000);
    ck_done(sluice_block("sl", "k", 5000, &e_));
    ck_blocked("sl", "k", 4, 5000, 5000);
    ck_done(sluice_block("sl", "k", 0, &e_));
    ck_acquire("sl", "k", 1, TRUE, 4, 0, -1, 10000);
    ck_acquire("sl", "k", 1, FALSE, 4, 0, 10000, 10000);
}
END_TEST

/* concurrency: a block holds while leases come and go under it. */
START_TEST(a_block_of_a_concurrency_key_outlives_its_leases)
{
    fixture_clock_start(1000000);
    fixture_init(rules);
    ck_acquire("cc", "k", 1, TRUE, 2, 1, -1, 60000);
    ck_done(sluice_block("cc", "k", 1000, &e_));
    ck_blocked("cc", "k", 2, 1000, 1000);
    sluice_release("cc", "k", 1);
    sluice_release("cc", "k", 2); /* more than it holds */
    ck_blocked("cc", "k", 2, 1000, 1000);
    ck_acquire("cc", "other", 2, TRUE, 2, 0, -1, 60000);
    fixture_clock_advance_ms(1000);
    ck_acquire("cc", "k", 2, TRUE, 2, 0, -1, 60000);
    sluice_release("cc", "k", 2);
    ck_acquire("cc", "k", 0, TRUE, 2, 2, -1, 0);
}
END_TEST

START_TEST(reset_lifts_a_block_and_a_penalty_at_once)
{
    fixture_clock_start(1000000);
    fixture_init(rules);
    ck_done(sluice_penalize("tb", "k", 20, &e_));
    ck_done(sluice_block("tb", "k", 60000, &e_));
    ck_blocked("tb", "k", 10, 60000, 60000);
    ck_done(sluice_reset("tb", "k", &e_));
    ck_acquire("tb", "k", 10, TRUE, 10, 0, -1, 1000);
}
END_TEST

/* Without a key: every call of a rule with per_key = false, on the state kept without
 * a lock (gcra) and under it (sliding_log). */
START_TEST(a_block_without_a_key_blocks_a_shared_limit)
{
    fixture_clock_start(1000000);
    fixture_init(rules);
    ck_acquire("shared", NULL, 1, TRUE, 10, 9, -1, 100);
    ck_done(sluice_block("shared", "whoever", 2000, &e_));
    for (int i = 0; i < 3; i++) {
        ck_blocked("shared", NULL, 10, 2000, 2000);
        ck_blocked("shared", "anyone", 10, 2000, 2000);
    }
    fixture_clock_advance_ms(2000);
    ck_acquire("shared", NULL, 10, TRUE, 10, 0, -1, 1000);
    ck_done(sluice_block("log", NULL, 300, &e_));
    ck_blocked("log", "x", 2, 300, 300);
    ck_done(sluice_reset("shared", NULL, &e_));
    ck_done(sluice_reset("log", NULL, &e_));
    ck_acquire("log", NULL, 2, TRUE, 2, 0, -1, 1000);
    ck_acquire("shared", NULL, 10, TRUE, 10, 0, -1, 1000);
}
END_TEST

/* The decision, the stats and the Prometheus text say blocked. */
START_TEST(a_blocked_answer_says_blocked)
{
    fixture_clock_start(1000000);
    fixture_init(rules);
    ck_done(sluice_block("fw", "k", 1000, &e_));
    ck_blocked("fw", "k", 4, 1000, 1000);
    ck_blocked("fw", "k", 4, 1000, 1000);
    sluice_decision d; /* a key whose override is blocked: for good */
    ck_assert_int_eq(sluice_acquire("fw", "banned", 1, &d, NULL), SLUICE_DENIED);
    ck_assert_decision(d, FALSE, 4, 0, -1, 0);
    ck_assert(d.blocked);
    /* a block cannot lift an override, nor limit an unlimited key */
    ck_done(sluice_block("fw", "banned", 0, &e_));
    ck_done(sluice_block("fw", "health", 60000, &e_));
    ck_acquire("fw", "health", 1, TRUE, G_MAXINT64, G_MAXINT64, -1, 0);
    /* a denial by the limit is not blocked */
    ck_acquire("fw", "j", 4, TRUE, 4, 0, -1, 60000);
    ck_assert_int_eq(sluice_acquire("fw", "j", 1, &d, NULL), SLUICE_DENIED);
    ck_assert(!d.blocked);
    sluice_stats stats;
    ck_assert(sluice_stats_get("fw", &stats, NULL));
    ck_assert_uint_eq(stats.blocked, 3);
    ck_assert_uint_eq(stats.denied, 4);
    g_autofree char *text = sluice_stats_prometheus();
    ck_assert_msg(strstr(text, "sluice_blocked_total{name=\"fw\"} 3\n"), "%s", text);
    /* shadow mode: decided, counted as shadow_denied, never enforced */
    ck_done(sluice_block("preview", "k", 1000, &e_));
    ck_assert_int_eq(sluice_acquire("preview", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert(!d.blocked);
    ck_assert(sluice_stats_get("preview", &stats, NULL));
    ck_assert_uint_eq(stats.shadow_denied, 1);
    ck_assert_uint_eq(stats.blocked, 0);
}
END_TEST

START_TEST(a_block_is_refused_when_it_makes_no_sense)
{
    fixture_init(rules);
    ck_refused(sluice_block("fw", "k", -1, &e_), SLUICE_ERROR_INVALID_ARGUMENT);
    ck_refused(sluice_block("fw", "k", G_GINT64_CONSTANT(3153600000001), &e_),
               SLUICE_ERROR_INVALID_ARGUMENT);
    ck_done(sluice_block("fw", "k", G_GINT64_CONSTANT(3153600000000), &e_));
    ck_refused(sluice_block("fw", "\xff", 1, &e_), SLUICE_ERROR_INVALID_ARGUMENT);
    ck_done(sluice_block("no.rule", "k", 1000, &e_)); /* not limited */
    ck_acquire("no.rule", "k", 1, TRUE, G_MAXINT64, G_MAXINT64, -1, 0);
}
END_TEST

/* What sluice_acquire_async answered. */
typedef struct {
    int code; /* -1 until it has */
    sluice_decision d;
} async_answer;

static void async_done(GObject *source, GAsyncResult *result, gpointer data)
{
    (void)source;
    async_answer *a = data;
    a->code = sluice_acquire_finish(result, &a->d, NULL);
}

/* The asynchronous API and a wait see the block: a waiter does not wait for it
 * beyond its own timeout. */
START_TEST(every_way_of_deciding_sees_the_block)
{
    fixture_clock_start(1000000);
    fixture_init(rules);
    ck_done(sluice_block("gc", "k", 800, &e_));
    async_answer a = {-1, {0}};
    sluice_acquire_async("gc", "k", 1, NULL, async_done, &a);
    while (a.code < 0)
        g_main_context_iteration(NULL, TRUE);
    ck_assert_int_eq(a.code, SLUICE_DENIED);
    ck_assert(a.d.blocked);
    ck_assert_int_eq(a.d.retry_after_ms, 800);
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire_wait("gc", "k", 1, 500, &d, NULL), SLUICE_DENIED);
    ck_assert(d.blocked);
    ck_assert_int_eq(d.retry_after_ms, 800);
    ck_assert_int_eq(sluice_acquire_wait("gc", "k", 1, 1000, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(fixture_clock_now(), 1800000);
}
END_TEST

/* ---- Retry-After ------------------------------------------------------------------------ */

/* 2015-10-21T07:28:00Z, a Wednesday, on the virtual clock. */
#define NOW_US G_GINT64_CONSTANT(1445412480000000)

typedef struct {
    const char *value;
    gint64 block_ms; /* the block it makes; 0: none; -1: refused */
} retry_after_case;

static const retry_after_case retry_after_cases[] = {
    {"120", 120000},
    {" 30\t", 30000},
    {"007", 7000},
    {"0", 0},
    {"86400", 86400000},
    {"Wed, 21 Oct 2015 07:28:30 GMT", 30000},
    {"Wednesday, 21-Oct-15 07:29:00 GMT", 60000},
    {"Wed Oct 21 07:28:10 2015", 10000},
    {"Thu Oct 22 07:27:59 2015", 86399000},
    {"Wed, 21 Oct 2015 07:28:00 GMT", 0}, /* now */
    {"Tue, 20 Oct 2015 07:28:00 GMT", 0}, /* passed */
    {"Sun Nov  6 08:49:37 1994", 0},
    {"Sunday, 06-Nov-94 08:49:37 GMT", 0},
    {"Wed, 21 Oct 2015 07:28:00 GMT ", 0},
    /* refused */
    {"86401", -1},
    {"99999999999999999999999", -1},
    {"Fri, 23 Oct 2015 07:28:00 GMT", -1}, /* two days away */
    {"-5", -1},
    {"+5", -1},
    {"1.5", -1},
    {"120s", -1},
    {"soon", -1},
    {"", -1},
    {"Wed, 21 Oct 2015 07:28:30 UTC", -1},
    {"Thu, 21 Oct 2015 07:28:30 GMT", -1}, /* not a Thursday */
    {"Wed, 32 Oct 2015 07:28:30 GMT", -1},
    {"Sat, 29 Feb 2015 07:28:30 GMT", -1},
    {"Wed, 21 Oct 2015 24:00:00 GMT", -1},
    {"Wed, 21 Oct 2015 07:28 GMT", -1},
    {"wed, 21 oct 2015 07:28:30 gmt", -1},
    {"Wed, 21 Oct 2015 07:28:30 GMT; x", -1},
};

START_TEST(retry_after_is_read_in_both_forms_and_nonsense_refused)
{
    const retry_after_case *c = &retry_after_cases[_i];
    fixture_clock_start(NOW_US);
    fixture_init(rules);
    GError *error = NULL;
    gboolean ok = sluice_block_retry_after("gc", "k", c->value, &error);
    if (c->block_ms < 0) {
        ck_assert_msg(!ok, "\"%s\" accepted", c->value);
        ck_assert_msg(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT) &&
                          g_str_has_prefix(error->message, "Retry-After: "),
                      "\"%s\": %s", c->value, error ? error->message : "");
        g_error_free(error);
        ck_acquire("gc", "k", 1, TRUE, 10, 9, -1, 100);
        return;
    }
    ck_assert_msg(ok, "\"%s\": %s", c->value, error ? error->message : "");
    if (c->block_ms == 0)
        ck_acquire("gc", "k", 1, TRUE, 10, 9, -1, 100);
    else
        ck_blocked("gc", "k", 10, c->block_ms, c->block_ms);
}
END_TEST

START_TEST(retry_after_refuses_what_is_not_a_header)
{
    fixture_clock_start(NOW_US);
    fixture_init(rules);
    ck_refused(sluice_block_retry_after("gc", "k", NULL, &e_), SLUICE_ERROR_INVALID_ARGUMENT);
    ck_refused(sluice_block_retry_after("gc", "", "5", &e_), SLUICE_ERROR_INVALID_ARGUMENT);
    ck_refused(sluice_block_retry_after("", "k", "0", &e_), SLUICE_ERROR_INVALID_ARGUMENT);
    GError *error = NULL;
    ck_assert(!sluice_block_retry_after("gc", "k", "soon", &error));
    ck_assert_str_eq(error->message, "Retry-After: \"soon\" is neither delay-seconds (\"120\") "
                                     "nor an HTTP-date (\"Wed, 21 Oct 2015 07:28:00 GMT\")");
    g_clear_error(&error);
    ck_assert(!sluice_block_retry_after("gc", "k", "90000", &error));
    ck_assert_str_eq(error->message,
                     "Retry-After: \"90000\" seconds is more than a day; refused as nonsense");
    g_clear_error(&error);
}
END_TEST

/* ---- what a block costs on Redis -------------------------------------------------------- */

/* The commands a script may run, as INFO commandstats names them. */
static const char *const commands[] = {
    "time",
    "get",
    "set",
    "setrange",
    "incrby",
    "decrby",
    "pttl",
    "pexpire",
    "exists",
    "del",
    "zcount",
    "zcard",
    "zrange",
    "zscore",
    "zrangebyscore",
    "zrevrangebyscore",
    "zadd",
    "zrem",
    "zremrangebyscore",
    "zremrangebyrank",
};

static gint64 commands_run(void)
{
    gint64 n = 0;
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++)
        n += test_redis_command_calls(fixture_redis(), commands[i]);
    return n;
}

/* The common path of each algorithm runs as many Redis commands with blocks as it
 * did before them, and a block of another key costs it nothing: the block is read
 * only by the path that reads a state the common path does not know. (Real time:
 * the common path reads Redis TIME; a virtual clock takes the exact path.) */
START_TEST(an_unblocked_decision_costs_no_redis_command_more)
{
    static const struct {
        const char *name;
        gint64 commands; /* an admission on a key that has a state */
    } costs[] = {
        {"fw", 2},                       /* INCRBY, PTTL */
        {"gc", 3},                       /* TIME, GET, SET or SETRANGE */
        {"tb", 3}, {"sw", 3}, {"sl", 4}, /* TIME, ZCOUNT, ZRANGE, ZADD */
        {"cc", 8}, /* TIME, ZREMRANGEBYSCORE, ZCARD, ZRANGE, INCRBY, ZADD, PEXPIRE x 2 */
    };
    fixture_init("[limit:fw]\nalgorithm = fixed_window\nlimit = 1000\nwindow = 1h\n"
                 "[limit:gc]\nalgorithm = gcra\nlimit = 1000\nwindow = 1s\n"
                 "[limit:tb]\nalgorithm = token_bucket\nlimit = 1000\nwindow = 1s\n"
                 "[limit:sw]\nalgorithm = sliding_window\nlimit = 1000\nwindow = 1h\n"
                 "[limit:sl]\nalgorithm = sliding_log\nlimit = 1000\nwindow = 1h\n"
                 "[limit:cc]\nalgorithm = concurrency\nlimit = 1000\nwindow = 1h\n");
    for (gsize i = 0; i < G_N_ELEMENTS(costs); i++) {
        sluice_decision d;
        ck_assert_int_eq(sluice_acquire(costs[i].name, "k", 1, &d, NULL), SLUICE_ALLOWED);
        ck_done(sluice_block(costs[i].name, "other", 60000, &e_));
        ck_assert_int_eq(sluice_acquire(costs[i].name, "other", 1, &d, NULL), SLUICE_DENIED);
        ck_assert(d.blocked);
        gint64 before = commands_run();
        for (int n = 0; n < 10; n++)
            ck_assert_int_eq(sluice_acquire(costs[i].name, "k", 1, &d, NULL), SLUICE_ALLOWED);
        gint64 per = (commands_run() - before) / 10;
        ck_assert_msg(per == costs[i].commands, "%s: %" G_GINT64_FORMAT " commands a decision",
                      costs[i].name, per);
    }
}
END_TEST

/* ---- another process ------------------------------------------------------------------- */

/* Runs the sluice command with args (NULL-terminated) and asserts it exits 0. */
static void sluice_command(const char *first, ...)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, test_unconst(SLUICE_CLI_PATH));
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *))
        g_ptr_array_add(argv, test_unconst(a));
    va_end(ap);
    g_ptr_array_add(argv, NULL);
    g_autofree char *err = NULL;
    int status = -1;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL,
                               &err, &status, &error),
                  "%s", error ? error->message : "");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "sluice %s: %s", first, err);
}

/* The keyfile this process and the sluice command share, and this process on it;
 * `more` is added at its end. */
static char *shared_keyfile_with(const char *more)
{
    g_autofree char *shared = fixture_contents(
        "[limit:api]\nalgorithm = fixed_window\nlimit = 5\nwindow = 1m\n"
        "[limit:down]\nalgorithm = gcra\nlimit = 100\nwindow = 1s\nper_key = false\n");
    g_autofree char *contents = g_strconcat(shared, more, NULL);
    fixture_flush();
    char *path = fixture_write_keyfile(contents);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    return path;
}

static char *shared_keyfile(void)
{
    return shared_keyfile_with("");
}

/* A block another process makes is seen by this one's next decision, ends on time,
 * and a reset by another process lifts it at once. */
START_TEST(a_block_made_by_another_process_is_seen_at_once)
{
    g_autofree char *path = shared_keyfile();
    ck_acquire("api", "k", 1, TRUE, 5, 4, -1, 60000);
    gint64 before = g_get_monotonic_time();
    sluice_command("block", "-c", path, "api", "--key", "k", "--for", "700ms", NULL);
    gint64 made = g_get_monotonic_time(); /* the block was made in between */
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("api", "k", 1, &d, NULL), SLUICE_DENIED);
    ck_assert(d.blocked);
    ck_assert_int_le(d.retry_after_ms, 700);
    ck_acquire("api", "other", 1, TRUE, 5, 4, -1, 60000);
    /* it ends on time: denied until 700 ms after it was made (between `before` and
     * `made`: the command's start-up is not the block's), allowed from then */
    while (sluice_acquire("api", "k", 0, &d, NULL) == SLUICE_DENIED) {
        ck_assert_msg(g_get_monotonic_time() < made + (700 + 500 * fixture_time_scale()) * 1000,
                      "still blocked %" G_GINT64_FORMAT " ms after the command returned",
                      (g_get_monotonic_time() - made) / 1000);
        g_usleep(5000);
    }
    ck_assert_int_ge(g_get_monotonic_time(), before + 700 * 1000);
    ck_assert(!d.blocked);
    ck_assert_int_eq(d.remaining, 4); /* the state stayed as it was */
    /* the whole limit of one downstream, for every caller */
    sluice_command("block", "-c", path, "down", "--for", "10m", NULL);
    ck_assert_int_eq(sluice_acquire("down", "anyone", 1, &d, NULL), SLUICE_DENIED);
    ck_assert(d.blocked);
    ck_assert_int_gt(d.retry_after_ms, 590000);
    sluice_command("reset", "-c", path, "down", NULL);
    ck_assert_int_eq(sluice_acquire("down", "anyone", 1, &d, NULL), SLUICE_ALLOWED);
    g_unlink(path);
}
END_TEST

START_TEST(a_penalty_made_by_another_process_is_seen_at_once)
{
    g_autofree char *path = shared_keyfile();
    ck_acquire("api", "k", 1, TRUE, 5, 4, -1, 60000);
    sluice_command("penalize", "-c", path, "api", "--key", "k", "4", NULL);
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("api", "k", 1, &d, NULL), SLUICE_DENIED);
    ck_assert(!d.blocked);
    ck_assert_int_eq(d.remaining, 0);
    ck_assert_int_gt(d.retry_after_ms, 50000);
    sluice_command("reset", "-c", path, "api", "--key", "k", NULL);
    ck_acquire("api", "k", 5, TRUE, 5, 0, -1, 60000);
    g_unlink(path);
}
END_TEST

/* With the denial cache on (the default; the fixture turns it off): a blocked call is
 * never answered from it, so a block another process lifts is lifted at this one's
 * next call; a denial of the limit is, and this process's reset, or its block, drops
 * it at once. */
START_TEST(a_block_lifted_by_another_process_is_seen_at_once_with_the_denial_cache)
{
    g_autofree char *path = shared_keyfile_with("[sluice]\ndenial_cache = true\n");
    sluice_command("block", "-c", path, "api", "--key", "k", "--for", "10m", NULL);
    sluice_decision d;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(sluice_acquire("api", "k", 1, &d, NULL), SLUICE_DENIED);
        ck_assert(d.blocked);
    }
    sluice_stats stats;
    ck_assert(sluice_stats_get("api", &stats, NULL));
    ck_assert_uint_eq(stats.blocked, 3);
    ck_assert_uint_eq(stats.cached_denied, 0);
    sluice_command("reset", "-c", path, "api", "--key", "k", NULL);
    ck_assert_int_eq(sluice_acquire("api", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 4);
    /* another process's block --for 0 too */
    sluice_command("block", "-c", path, "api", "--key", "k", "--for", "10m", NULL);
    ck_assert_int_eq(sluice_acquire("api", "k", 1, &d, NULL), SLUICE_DENIED);
    ck_assert(d.blocked);
    sluice_command("block", "-c", path, "api", "--key", "k", "--for", "0", NULL);
    ck_assert_int_eq(sluice_acquire("api", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 3);
    /* a penalty's denial is the limit's: kept, then dropped by this process's reset */
    ck_done(sluice_penalize("api", "k", 5, &e_));
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(sluice_acquire("api", "k", 1, &d, NULL), SLUICE_DENIED);
        ck_assert(!d.blocked);
    }
    ck_assert(sluice_stats_get("api", &stats, NULL));
    ck_assert_uint_eq(stats.cached_denied, 1);
    ck_done(sluice_reset("api", "k", &e_));
    ck_assert_int_eq(sluice_acquire("api", "k", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 4);
    /* and this process's block replaces a kept denial at once */
    ck_done(sluice_penalize("api", "k", 5, &e_));
    ck_assert_int_eq(sluice_acquire("api", "k", 1, &d, NULL), SLUICE_DENIED);
    ck_assert(!d.blocked);
    ck_done(sluice_block("api", "k", 60000, &e_));
    ck_assert_int_eq(sluice_acquire("api", "k", 1, &d, NULL), SLUICE_DENIED);
    ck_assert(d.blocked);
    g_unlink(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("policy");
    TCase *t = tcase_create("policy");
    tcase_add_checked_fixture(t, NULL, teardown);
    tcase_add_test(t, a_penalty_counts_as_admitted_now);
    tcase_add_test(t, a_penalty_leaves_at_most_one_capacity_of_debt);
    tcase_add_test(t, a_penalty_applies_the_override_and_every_band);
    tcase_add_test(t, a_penalty_is_refused_where_it_means_nothing);
    if (!fixture_on_redis())
        tcase_add_test(t, a_penalty_of_a_warming_limit_is_refused);
    tcase_add_test(t, a_block_denies_every_call_of_the_key_until_it_ends);
    tcase_add_test(t, a_block_of_a_concurrency_key_outlives_its_leases);
    tcase_add_test(t, reset_lifts_a_block_and_a_penalty_at_once);
    tcase_add_test(t, a_block_without_a_key_blocks_a_shared_limit);
    tcase_add_test(t, a_blocked_answer_says_blocked);
    tcase_add_test(t, a_block_is_refused_when_it_makes_no_sense);
    tcase_add_test(t, every_way_of_deciding_sees_the_block);
    tcase_add_loop_test(t, retry_after_is_read_in_both_forms_and_nonsense_refused, 0,
                        (int)G_N_ELEMENTS(retry_after_cases));
    tcase_add_test(t, retry_after_refuses_what_is_not_a_header);
    if (fixture_on_redis() && !fixture_on_cluster() && !fixture_on_sentinel()) /* one server */
        tcase_add_test(t, an_unblocked_decision_costs_no_redis_command_more);
    /* another process shares the limits only on Redis and in a zone */
    if (fixture_on_redis() || fixture_on_shm()) {
        tcase_add_test(t, a_block_made_by_another_process_is_seen_at_once);
        tcase_add_test(t, a_penalty_made_by_another_process_is_seen_at_once);
    }
    if (fixture_on_redis()) /* the denial cache is a Redis backend's */
        tcase_add_test(t, a_block_lifted_by_another_process_is_seen_at_once_with_the_denial_cache);
    suite_add_tcase(s, t);
    return fixture_run(s);
}
