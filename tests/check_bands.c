/* SPDX-License-Identifier: MIT */
/* Pins bands and shadow bands to docs/algorithms.md: every band must admit and then
 * every band takes the permits; the decision reports the band with the fewest
 * remaining, the latest retry and reset; shadow bands are counted, never refuse;
 * a reload keeps the state of the bands that stay. On an injected clock. */
#include <string.h>

#include <glib/gstdio.h>

#include "fixture.h"

#define S G_GINT64_CONSTANT(1000250)

#define SECOND G_GINT64_CONSTANT(1000000)

#define ck_at(now_us, name, ...) ck_acquire_at(now_us, name, "k", __VA_ARGS__)

/* Asserts how many calls each band of name refused (sluice_stats_bands), in order. */
static void ck_refused(const char *name, guint n, const guint64 *want)
{
    sluice_band_stats got[SLUICE_RULE_BANDS_MAX];
    g_autoptr(GError) error = NULL;
    ck_assert_uint_eq(sluice_stats_bands(name, got, G_N_ELEMENTS(got), &error), n);
    ck_assert(error == NULL);
    for (guint i = 0; i < n; i++)
        ck_assert_msg(got[i].refused == want[i],
                      "%s band %u: refused %" G_GUINT64_FORMAT ", expected %" G_GUINT64_FORMAT,
                      name, i, got[i].refused, want[i]);
}

/* Asserts that the Prometheus text has this line. */
static void ck_prometheus_has(const char *line)
{
    g_autofree char *text = sluice_stats_prometheus();
    g_autofree char *with_newline = g_strconcat("\n", line, "\n", NULL);
    ck_assert_msg(strstr(text, with_newline), "no line %s in:\n%s", line, text);
}

static const char *bands =
    "[limit:fw]\nalgorithm = fixed_window\nlimit = 5\nwindow = 10s\nbands = 2/1s\n"
    "[limit:tb]\nalgorithm = token_bucket\nlimit = 10\nwindow = 1s\nbands = 20/10s/20\n"
    "[limit:log]\nalgorithm = sliding_log\nlimit = 3\nwindow = 1s\nbands = 4/1m, 10/1h\n"
    "[limit:sh]\nalgorithm = fixed_window\nlimit = 10\nwindow = 1s\nshadow_bands = 2/1s\n"
    "[limit:g]\nalgorithm = gcra\nlimit = 3000\nwindow = 1s\nburst = 1\nbands = 7/1s\n";

START_TEST(a_call_one_band_refuses_takes_nothing_from_any_band)
{
    fixture_clock_start(S);
    fixture_init(bands);
    /* 5 per 10 s and 2 per 1 s: the 1 s band has the fewest left; reset the latest */
    ck_at(S, "fw", 2, TRUE, 2, 0, -1, 10000);
    /* the 10 s band would admit, the 1 s band refuses until its window ends */
    ck_at(S, "fw", 1, FALSE, 2, 0, 1000, 10000);
    /* a new 1 s window: the 10 s band still has 3 (the denied call took none) */
    ck_at(S + SECOND, "fw", 2, TRUE, 2, 0, -1, 9000);
    ck_at(S + 2 * SECOND, "fw", 1, TRUE, 5, 0, -1, 8000); /* now the 10 s band is tightest */
    /* refused by the 10 s band alone; the 1 s band's window ended: reset 0 there */
    ck_at(S + 3 * SECOND, "fw", 1, FALSE, 5, 0, 7000, 7000);
    ck_at(S + 3 * SECOND, "fw", 0, FALSE, 5, 0, 7000, 7000);
    /* the 1 s band refused one call, the rule's own 10 s band two */
    ck_refused("fw", 2, (const guint64[]){2, 1});
    sluice_stats stats;
    ck_assert(sluice_stats_get("fw", &stats, NULL));
    ck_assert_uint_eq(stats.denied, 3);
    ck_prometheus_has("sluice_band_refusals_total{name=\"fw\",band=\"5/10s\",shadow=\"false\"} 2");
    ck_prometheus_has("sluice_band_refusals_total{name=\"fw\",band=\"2/1s\",shadow=\"false\"} 1");
    sluice_shutdown();
}
END_TEST

START_TEST(the_decision_reports_the_latest_retry_and_reset_of_the_bands)
{
    fixture_clock_start(S);
    fixture_init(bands);
    /* 10 per 1 s (T 100 ms, burst 10) and 20 per 10 s (T 500 ms, burst 20) */
    ck_at(S, "tb", 10, TRUE, 10, 0, -1, 5000);
    ck_at(S, "tb", 1, FALSE, 10, 0, 100, 5000);
    /* a second later: 10 again in the first, 12 in the second */
    ck_at(S + SECOND, "tb", 10, TRUE, 10, 0, -1, 9000);
    /* 3 more: the first has them in 300 ms, the second in 500 ms: the later */
    ck_at(S + SECOND, "tb", 3, FALSE, 10, 0, 500, 9000);
    /* more than the first band's burst can never pass */
    ck_at(S + SECOND, "tb", 11, FALSE, 10, 0, -1, 9000);
    /* a call two bands refuse counts in each */
    ck_refused("tb", 2, (const guint64[]){3, 2});
    ck_prometheus_has("sluice_band_refusals_total{name=\"tb\",band=\"20/10s\",shadow=\"false\"} 2");
    /* on a tie of remaining the first listed is reported: both full */
    ck_at(S + 100 * SECOND, "tb", 0, TRUE, 10, 10, -1, 0);
    sluice_shutdown();
}
END_TEST

START_TEST(sliding_log_bands_count_each_permit_in_every_band)
{
    fixture_clock_start(S);
    fixture_init(bands);
    /* 3 per 1 s, 4 per 1 min, 10 per 1 h */
    ck_at(S, "log", 3, TRUE, 3, 0, -1, 3600000);
    ck_at(S + SECOND, "log", 1, TRUE, 4, 0, -1, 3600000);
    /* the minute band refuses until the first 3 leave it, 59 s later */
    ck_at(S + 2 * SECOND, "log", 1, FALSE, 4, 0, 58000, 3599000);
    /* both the second and the minute band are full: on a tie the first is reported */
    ck_at(S + 60 * SECOND, "log", 3, TRUE, 3, 0, -1, 3600000);
    /* 7 of 10 in the hour; the minute band holds the 3 of S + 60 s */
    ck_at(S + 61 * SECOND, "log", 0, TRUE, 4, 1, -1, 3599000);
    ck_at(S + 61 * SECOND, "log", 2, FALSE, 4, 1, 59000, 3599000);
    sluice_shutdown();
}
END_TEST

START_TEST(a_shadow_band_is_counted_and_never_refuses)
{
    sluice_stats stats;
    fixture_clock_start(S);
    fixture_init(bands);
    /* the enforced band alone is reported */
    ck_at(S, "sh", 1, TRUE, 10, 9, -1, 1000);
    ck_at(S, "sh", 1, TRUE, 10, 8, -1, 1000);
    ck_at(S, "sh", 1, TRUE, 10, 7, -1, 1000); /* 2 per 1 s would refuse it */
    ck_at(S, "sh", 1, TRUE, 10, 6, -1, 1000);
    ck_assert(sluice_stats_get("sh", &stats, NULL));
    ck_assert_uint_eq(stats.allowed, 2);
    ck_assert_uint_eq(stats.shadow_denied, 2);
    ck_assert_uint_eq(stats.denied, 0);
    /* the shadow band took only what it admitted: 2 again in the next second */
    ck_at(S + SECOND, "sh", 2, TRUE, 10, 8, -1, 1000);
    ck_at(S + SECOND, "sh", 1, TRUE, 10, 7, -1, 1000);
    ck_assert(sluice_stats_get("sh", &stats, NULL));
    ck_assert_uint_eq(stats.allowed, 3);
    ck_assert_uint_eq(stats.shadow_denied, 3);
    /* the shadow band would have refused the 3; the enforced band refused nothing */
    ck_refused("sh", 2, (const guint64[]){0, 3});
    ck_prometheus_has("sluice_decisions_total{name=\"sh\",outcome=\"shadow_denied\"} 3");
    ck_prometheus_has("sluice_band_refusals_total{name=\"sh\",band=\"10/1s\",shadow=\"false\"} 0");
    ck_prometheus_has("sluice_band_refusals_total{name=\"sh\",band=\"2/1s\",shadow=\"true\"} 3");
    sluice_shutdown();
}
END_TEST

START_TEST(a_reload_that_changes_bands_keeps_the_state_of_the_bands_that_stay)
{
    g_autofree char *first = fixture_contents(
        "[limit:r]\nalgorithm = fixed_window\nlimit = 10\nwindow = 1s\nbands = 3/10s, 5/1m\n");
    g_autofree char *second = fixture_contents(
        "[limit:r]\nalgorithm = fixed_window\nlimit = 10\nwindow = 1s\nbands = 5/1m, 4/10s\n");
    g_autofree char *path = fixture_write_keyfile(first);
    g_autoptr(GError) error = NULL;
    fixture_clock_start(S);
    fixture_init(first); /* flushes the suite's server */
    sluice_shutdown();
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    ck_at(S, "r", 3, TRUE, 3, 0, -1, 60000);
    ck_at(S, "r", 3, FALSE, 3, 0, 60000, 60000); /* refused by 3/10s and 5/1m */
    ck_refused("r", 3, (const guint64[]){0, 1, 1});
    ck_assert(g_file_set_contents(path, second, -1, NULL));
    ck_assert_msg(sluice_reload(&error), "%s", error ? error->message : "");
    /* 5/1m kept its 3; 4/10s is new; the rule's own 10/1s kept its 3 */
    ck_at(S + 500000, "r", 0, TRUE, 5, 2, -1, 59500);
    ck_at(S + 500000, "r", 2, TRUE, 5, 0, -1, 59500);
    ck_at(S + 500000, "r", 1, FALSE, 5, 0, 59500, 59500);
    /* 5/1m kept its refusal and adds one; 4/10s starts at 0 */
    ck_refused("r", 3, (const guint64[]){0, 2, 0});
    sluice_shutdown();
    g_unlink(path);
}
END_TEST

/* On Redis a denial the denial cache answers counts the bands that refused it. */
START_TEST(a_cached_denial_counts_its_bands)
{
    g_autofree char *cached = g_strconcat(bands, "[sluice]\ndenial_cache = true\n", NULL);
    sluice_stats stats;
    fixture_clock_start(S);
    fixture_init(cached);
    ck_at(S, "fw", 2, TRUE, 2, 0, -1, 10000);
    ck_at(S, "fw", 1, FALSE, 2, 0, 1000, 10000);
    ck_at(S + 1, "fw", 1, FALSE, 2, 0, 1000, 10000);
    ck_assert(sluice_stats_get("fw", &stats, NULL));
    ck_assert_uint_eq(stats.denied, 2);
    ck_assert_uint_eq(stats.cached_denied, (fixture_on_redis() ? 1 : 0));
    ck_refused("fw", 2, (const guint64[]){0, 2});
    sluice_shutdown();
}
END_TEST

typedef struct {
    gboolean done;
    int rc;
    sluice_decision d;
} async_call;

static void on_async(GObject *source, GAsyncResult *result, gpointer p)
{
    async_call *call = p;
    (void)source;
    call->rc = sluice_acquire_finish(result, &call->d, NULL);
    call->done = TRUE;
}

/* sluice_acquire_async decides bands as sluice_acquire does, and counts them. */
START_TEST(an_asynchronous_call_decides_the_bands_as_sluice_acquire_does)
{
    async_call call = {0};
    fixture_clock_start(S);
    fixture_init(bands);
    ck_at(S, "fw", 2, TRUE, 2, 0, -1, 10000);
    sluice_acquire_async("fw", "k", 1, NULL, on_async, &call);
    while (!call.done)
        g_main_context_iteration(NULL, TRUE);
    ck_assert_int_eq(call.rc, SLUICE_DENIED);
    ck_assert_decision(call.d, FALSE, 2, 0, 1000, 10000);
    ck_refused("fw", 2, (const guint64[]){0, 1});
    sluice_shutdown();
}
END_TEST

/* A band at a rate that does not divide its window is exact, as the rule's own:
 * gcra 3000/s (T = 333 1/3 µs, burst 1) beside 7/s (T = 142 857 1/7 µs, burst 7). */
START_TEST(bands_at_any_rate_are_exact)
{
    fixture_clock_start(S);
    fixture_init(bands);
    /* 3000/s has 0 left, 7/s 6: reset the latest, ceil(T of 7/s) = 142 858 µs */
    ck_at(S, "g", 1, TRUE, 1, 0, -1, 143);
    /* 1/3 µs early for 3000/s: retry 1 µs; 7/s's ttl 142 524 1/7 µs */
    ck_at(S + 333, "g", 1, FALSE, 1, 0, 1, 143);
    /* 7/s: ttl 2T - 334 = 285 380 2/7 µs, remaining floor((7T - ttl) / T) = 5 */
    ck_at(S + 334, "g", 1, TRUE, 1, 0, -1, 286);
    ck_at(S + 334, "g", 0, FALSE, 1, 0, 1, 286);
    sluice_shutdown();
}
END_TEST

/* A token_bucket rule with bands reserves nothing: a waiting caller sleeps until the
 * latest band's retry and asks again; permits not due within the wait are refused at
 * once, taking nothing. */
START_TEST(a_waiting_caller_with_bands_asks_again_when_every_band_admits)
{
    fixture_clock_start(S);
    fixture_init(bands);
    /* 10 per 1 s (burst 10) and 20 per 10 s (burst 20) */
    ck_at(S, "tb", 10, TRUE, 10, 0, -1, 5000);
    /* 5 are due in 500 ms in the first band: not within 100 ms, refused, no sleep */
    ck_acquire_wait("tb", "k", 5, 100, FALSE, 10, 0, 500, 5000);
    ck_assert_uint_eq(fixture_clock_sleeps(), 0);
    ck_assert_int_eq(fixture_clock_now(), S);
    /* 3 are due in 300 ms: it sleeps once and takes them then; the second band has 7
     * left, due back in 13 × 500 ms from S */
    ck_acquire_wait("tb", "k", 3, 1000, TRUE, 10, 0, -1, 6200);
    ck_assert_uint_eq(fixture_clock_sleeps(), 1);
    ck_assert_int_eq(fixture_clock_now(), S + 300000);
    /* nothing was reserved ahead: a peek sees the first band empty, not below it */
    ck_acquire("tb", "k", 0, FALSE, 10, 0, 100, 6200);
    sluice_shutdown();
}
END_TEST

/* The HTTP headers of a decision with bands say the band it reports: the one with
 * the fewest remaining, with the latest reset and retry. */
START_TEST(the_headers_of_a_decision_with_bands_say_the_tightest_band)
{
    sluice_decision d;
    sluice_headers h;
    fixture_clock_start(S);
    fixture_init(bands);
    ck_at(S, "fw", 2, TRUE, 2, 0, -1, 10000);
    fixture_clock_set(S + 500000);
    ck_assert_int_eq(sluice_acquire("fw", "k", 1, &d, NULL), SLUICE_DENIED);
    ck_assert(sluice_headers_from_decision(&d, &h, NULL));
    ck_assert_uint_eq(h.n, 4);
    ck_assert_str_eq(h.header[0].name, "RateLimit-Limit");
    ck_assert_str_eq(h.header[0].value, "2"); /* 2 per 1 s, not 5 per 10 s */
    ck_assert_str_eq(h.header[1].value, "0");
    ck_assert_str_eq(h.header[2].value, "10"); /* 9.5 s: the 10 s band's reset */
    ck_assert_str_eq(h.header[3].name, "Retry-After");
    ck_assert_str_eq(h.header[3].value, "1"); /* 500 ms: the 1 s band's retry */
    sluice_shutdown();
}
END_TEST

/* sluice_rule_bands lists the rule's own band, then bands, then shadow bands. */
START_TEST(the_bands_of_a_rule_are_listed_in_keyfile_order)
{
    sluice_band_info b[SLUICE_RULE_BANDS_MAX];
    fixture_clock_start(S);
    fixture_init(bands);
    ck_assert_uint_eq(sluice_rule_bands("tb", b, G_N_ELEMENTS(b), NULL), 2);
    ck_assert_int_eq(b[0].limit, 10);
    ck_assert_int_eq(b[0].window_ms, 1000);
    ck_assert_int_eq(b[1].limit, 20);
    ck_assert_int_eq(b[1].window_ms, 10000);
    ck_assert_int_eq(b[1].burst, 20);
    ck_assert(!b[1].shadow);
    ck_assert_uint_eq(sluice_rule_bands("log", b, 1, NULL), 3); /* fills 1, says 3 */
    ck_assert_int_eq(b[0].limit, 3);
    ck_assert_uint_eq(sluice_rule_bands("log", NULL, 0, NULL), 3);
    ck_assert_uint_eq(sluice_rule_bands("sh", b, G_N_ELEMENTS(b), NULL), 2);
    ck_assert(!b[0].shadow);
    ck_assert(b[1].shadow);
    ck_assert_int_eq(b[1].limit, 2);
    g_autoptr(GError) error = NULL;
    ck_assert_uint_eq(sluice_rule_bands("nope", b, G_N_ELEMENTS(b), &error), 0);
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_NO_RULE));
    g_clear_error(&error);
    sluice_band_stats s[SLUICE_RULE_BANDS_MAX];
    ck_assert_uint_eq(sluice_stats_bands("sh", s, G_N_ELEMENTS(s), NULL), 2);
    ck_assert(s[1].shadow && s[1].limit == 2 && s[1].window_ms == 1000 && s[1].refused == 0);
    ck_assert_uint_eq(sluice_stats_bands("nope", s, G_N_ELEMENTS(s), NULL), 0);
    sluice_shutdown();
    ck_assert_uint_eq(sluice_rule_bands("tb", b, G_N_ELEMENTS(b), &error), 0);
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED));
    g_clear_error(&error);
    ck_assert_uint_eq(sluice_stats_bands("tb", s, G_N_ELEMENTS(s), &error), 0);
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED));
}
END_TEST

START_TEST(bands_are_refused_with_what_would_be_right)
{
    static const struct {
        const char *ini, *message;
    } bad[] = {
        {"[limit:a]\nalgorithm = concurrency\nlimit = 5\nbands = 3/1s\n",
         "[limit:a] bands = 3/1s: applies to every algorithm but concurrency and adaptive"},
        {"[limit:a]\nalgorithm = fixed_window\nlimit = 5\nwindow = 1s\nbands = 3/1s/2\n",
         "[limit:a] bands = 3/1s/2: \"3/1s/2\": expected LIMIT/WINDOW, e.g. 1000/1h"},
        {"[limit:a]\nalgorithm = gcra\nlimit = 5\nwindow = 1s\nbands = 30/1x\n",
         "[limit:a] bands = 30/1x: \"30/1x\": window 1x: unknown unit \"x\"; expected ms, s, "
         "m, h or d"},
        {"[limit:a]\nalgorithm = fixed_window\nlimit = 5\nwindow = 1s\nbands = 9/1m, 5/1s\n",
         "[limit:a] bands = 9/1m, 5/1s: \"5/1s\" repeats the rule's limit and window or another "
         "band; expected each band once"},
        {"[limit:a]\nalgorithm = sliding_log\nlimit = 5\nwindow = 1s\nshadow_bands = "
         "100001/1h\n",
         "[limit:a] shadow_bands = 100001/1h: limit 100001: too large for sliding_log, which "
         "keeps one entry per permit (on Redis, a call for all of them writes as many); at most "
         "100000; sliding_window or token_bucket keep O(1) state"},
        {"[limit:a]\nalgorithm = gcra\nlimit = 5\nwindow = 1s\nbands = 5/0.5s\n",
         "[limit:a] bands = 5/0.5s: \"5/0.5s\": window 0.5s: not a whole number; write it as "
         "500ms"},
        {"[limit:a]\nalgorithm = gcra\nlimit = 5\nwindow = 1s\nbands = 1/1d/36501\n",
         "[limit:a] bands = 1/1d/36501: burst 36501: too large: refilling it would take more "
         "than 36500d; at most 36500"},
        {"[limit:a]\nalgorithm = token_bucket\nlimit = 10\nwindow = 1s\nprefetch = 3\n"
         "bands = 100/1m, 2/100ms\n",
         "[limit:a] prefetch = 3: more than the 2 permits the band 2/100ms can pass at once; "
         "expected at most 2"},
        {"[limit:a]\nalgorithm = fixed_window\nlimit = 10\nwindow = 1s\nprefetch = 2\n"
         "shadow_bands = 5/1s\n",
         "[limit:a] prefetch = 2: not with shadow_bands: a shadow band would decide the "
         "permits taken at once, not each call's; expected prefetch = 0 where shadow_bands are "
         "watched"},
    };
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++)
        fixture_refused(bad[i].ini, bad[i].message);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("bands");
    TCase *tc = tcase_create("bands");
    tcase_add_test(tc, a_call_one_band_refuses_takes_nothing_from_any_band);
    tcase_add_test(tc, the_decision_reports_the_latest_retry_and_reset_of_the_bands);
    tcase_add_test(tc, sliding_log_bands_count_each_permit_in_every_band);
    tcase_add_test(tc, a_shadow_band_is_counted_and_never_refuses);
    tcase_add_test(tc, a_reload_that_changes_bands_keeps_the_state_of_the_bands_that_stay);
    tcase_add_test(tc, a_cached_denial_counts_its_bands);
    tcase_add_test(tc, an_asynchronous_call_decides_the_bands_as_sluice_acquire_does);
    tcase_add_test(tc, bands_at_any_rate_are_exact);
    tcase_add_test(tc, a_waiting_caller_with_bands_asks_again_when_every_band_admits);
    tcase_add_test(tc, the_headers_of_a_decision_with_bands_say_the_tightest_band);
    tcase_add_test(tc, the_bands_of_a_rule_are_listed_in_keyfile_order);
    tcase_add_test(tc, bands_are_refused_with_what_would_be_right);
    suite_add_tcase(suite, tc);
    return fixture_run(suite);
}
