/* SPDX-License-Identifier: MIT */
/* Pins fixed_window's calendar windows (anchor = epoch) to the exact answers of
 * docs/algorithms.md on an injected clock, and to the UTC clock with real time. */
#include "fixture.h"

/* 2026-11-24T00:00:00Z in µs since the epoch: the injected clock reads µs since
 * the epoch (on Redis it replaces TIME, on memory the wall clock). */
#define MIDNIGHT G_GINT64_CONSTANT(1795478400000000)
#define HOUR     G_GINT64_CONSTANT(3600000000)

#define ck_at(now_us, name, ...) ck_acquire_at(now_us, name, "k", __VA_ARGS__)

static const char *calendar = "[limit:daily]\nalgorithm = fixed_window\nlimit = 2\nwindow = 1d\n"
                              "anchor = epoch\n"
                              "[limit:hourly]\nalgorithm = fixed_window\nlimit = 3\nwindow = 1h\n"
                              "anchor = epoch\n"
                              "[limit:first]\nalgorithm = fixed_window\nlimit = 3\nwindow = 1h\n"
                              "anchor = first_hit\n"
                              "[limit:default]\nalgorithm = fixed_window\nlimit = 3\nwindow = 1h\n";

START_TEST(a_daily_window_resets_at_midnight_utc)
{
    fixture_clock_start(MIDNIGHT - 500);
    fixture_init(calendar);
    /* half a millisecond before midnight: the day's window ends in 500 µs */
    ck_at(MIDNIGHT - 500, "daily", 2, TRUE, 2, 0, -1, 1);
    ck_at(MIDNIGHT - 1, "daily", 1, FALSE, 2, 0, 1, 1);
    /* midnight: a new day, a whole day long */
    ck_at(MIDNIGHT, "daily", 1, TRUE, 2, 1, -1, 86400000);
    ck_at(MIDNIGHT + 3 * HOUR + 250, "daily", 1, TRUE, 2, 0, -1, 75600000);
    ck_at(MIDNIGHT + 3 * HOUR + 250, "daily", 1, FALSE, 2, 0, 75600000, 75600000);
    sluice_shutdown();
}
END_TEST

START_TEST(an_hourly_window_starts_on_the_hour_whenever_its_first_hit_comes)
{
    const gint64 t = MIDNIGHT + 5 * HOUR + 1234567; /* 05:00:01.234567 */
    fixture_clock_start(t);
    fixture_init(calendar);
    /* on the UTC clock: the window began at 05:00, ends at 06:00 */
    ck_at(t, "hourly", 1, TRUE, 3, 2, -1, 3598766);
    ck_at(t, "first", 1, TRUE, 3, 2, -1, 3600000);   /* from its first hit */
    ck_at(t, "default", 1, TRUE, 3, 2, -1, 3600000); /* first_hit is the default */
    ck_at(MIDNIGHT + 6 * HOUR - 1, "hourly", 2, TRUE, 3, 0, -1, 1);
    ck_at(MIDNIGHT + 6 * HOUR - 1, "hourly", 0, FALSE, 3, 0, 1, 1);
    /* the edge: 06:00:00.000000 starts the next window */
    ck_at(MIDNIGHT + 6 * HOUR, "hourly", 3, TRUE, 3, 0, -1, 3600000);
    ck_at(MIDNIGHT + 6 * HOUR, "first", 2, TRUE, 3, 0, -1, 1235); /* ends at 06:00:01.234567 */
    sluice_shutdown();
}
END_TEST

START_TEST(a_peek_starts_no_calendar_window)
{
    fixture_clock_start(MIDNIGHT + 10);
    fixture_init(calendar);
    ck_at(MIDNIGHT + 10, "hourly", 0, TRUE, 3, 3, -1, 0);
    /* an hour and a bit later the first hit lands in the window of 01:00 */
    ck_at(MIDNIGHT + HOUR + 500000, "hourly", 1, TRUE, 3, 2, -1, 3599500);
    sluice_shutdown();
}
END_TEST

/* With the real clock the window ends on the next whole second of the UTC clock
 * (Redis TIME, or the memory backend's wall clock), within the time the call took. */
START_TEST(with_the_real_clock_a_window_ends_on_the_utc_clock)
{
    sluice_clock_set(NULL, NULL, NULL);
    fixture_init("[limit:s]\nalgorithm = fixed_window\nlimit = 1000000\nwindow = 1s\n"
                 "anchor = epoch\n");
    for (int i = 0; i < 20; i++) {
        sluice_decision d;
        gint64 before = g_get_real_time();
        ck_assert_int_eq(sluice_acquire("s", NULL, 1, &d, NULL), SLUICE_ALLOWED);
        gint64 after = g_get_real_time();
        gint64 end = (before / 1000000 + 1) * 1000000;
        if (after >= end)
            continue; /* a second ended during the call: either answer could be right */
        /* reset = end - now for some now in [before, after], rounded up */
        ck_assert_int_le(d.reset_after_ms, (end - before + 999) / 1000);
        ck_assert_int_ge(d.reset_after_ms, (end - after) / 1000);
        g_usleep(37000);
    }
    sluice_shutdown();
}
END_TEST

START_TEST(anchor_is_only_for_fixed_window_and_is_first_hit_or_epoch)
{
    static const struct {
        const char *ini, *message;
    } bad[] = {
        {"[limit:a]\nalgorithm = token_bucket\nlimit = 5\nwindow = 1s\nanchor = epoch\n",
         "[limit:a] anchor = epoch: applies only to fixed_window, not token_bucket"},
        {"[limit:a]\nalgorithm = fixed_window\nlimit = 5\nwindow = 1s\nanchor = midnight\n",
         "[limit:a] anchor = midnight: expected first_hit or epoch"},
    };
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++)
        fixture_refused(bad[i].ini, bad[i].message);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("calendar");
    TCase *tc = tcase_create("epoch");
    tcase_add_test(tc, a_daily_window_resets_at_midnight_utc);
    tcase_add_test(tc, an_hourly_window_starts_on_the_hour_whenever_its_first_hit_comes);
    tcase_add_test(tc, a_peek_starts_no_calendar_window);
    tcase_add_test(tc, with_the_real_clock_a_window_ends_on_the_utc_clock);
    tcase_add_test(tc, anchor_is_only_for_fixed_window_and_is_first_hit_or_epoch);
    suite_add_tcase(suite, tc);
    return fixture_run(suite);
}
