/* SPDX-License-Identifier: MIT */
/* Pins the six algorithms to the exact answers docs/algorithms.md defines, on an injected clock. */
#include "fixture.h"

/* Every test starts the clock here: 250 µs past a whole millisecond, so that times
 * measured from it are not whole milliseconds and the rounding up shows. The
 * expected numbers below are worked out by hand from docs/algorithms.md; the
 * comments show the arithmetic in µs. Only the public API is used, so the same
 * tests can run against any backend whose clock the test controls. */
#define S G_GINT64_CONSTANT(1000250)

/* Sets the clock to S + offset_us. */
static void at(gint64 offset_us)
{
    fixture_clock_set(S + offset_us);
}

/* ==== fixed_window: L = 3, W = 10 s =============================================== */

static const char fixed_window[] = "[limit:fw]\n"
                                   "algorithm = fixed_window\n"
                                   "limit = 3\n"
                                   "window = 10s\n"
                                   "[limit:fw_shared]\n"
                                   "algorithm = fixed_window\n"
                                   "limit = 3\n"
                                   "window = 10s\n"
                                   "per_key = false\n";

START_TEST(fixed_window_fresh_key_counts_down_from_the_limit)
{
    fixture_clock_start(S);
    fixture_init(fixed_window);
    /* the window starts at this first hit: reset = W */
    ck_acquire("fw", "alice", 1, TRUE, 3, 2, -1, 10000);
    at(400); /* reset = 10 000 000 - 400 = 9 999 600 µs, rounded up */
    ck_acquire("fw", "alice", 1, TRUE, 3, 1, -1, 10000);
    at(2000700); /* 10 000 000 - 2 000 700 = 7 999 300 µs */
    ck_acquire("fw", "alice", 1, TRUE, 3, 0, -1, 8000);
    sluice_shutdown();
}
END_TEST

START_TEST(fixed_window_denies_until_the_window_ends)
{
    fixture_clock_start(S);
    fixture_init(fixed_window);
    ck_acquire("fw", "alice", 3, TRUE, 3, 0, -1, 10000);
    at(3000700); /* retry = reset = start + W - now = 6 999 300 µs */
    ck_acquire("fw", "alice", 1, FALSE, 3, 0, 7000, 7000);
    fixture_clock_advance_ms(6999); /* 300 µs before the edge */
    ck_acquire("fw", "alice", 1, FALSE, 3, 0, 1, 1);
    fixture_clock_advance_ms(1); /* waited exactly 7000 ms: a new window starts here */
    ck_acquire("fw", "alice", 1, TRUE, 3, 2, -1, 10000);
    sluice_shutdown();
}
END_TEST

START_TEST(fixed_window_ends_exactly_one_window_after_its_first_hit)
{
    fixture_clock_start(S);
    fixture_init(fixed_window);
    ck_acquire("fw", "alice", 1, TRUE, 3, 2, -1, 10000);
    at(10000000 - 1); /* the last microsecond of the window: 1 µs left */
    ck_acquire("fw", "alice", 2, TRUE, 3, 0, -1, 1);
    ck_acquire("fw", "alice", 1, FALSE, 3, 0, 1, 1);
    at(10000000); /* the edge: a new window, so L more pass right after L */
    ck_acquire("fw", "alice", 3, TRUE, 3, 0, -1, 10000);
    ck_acquire("fw", "alice", 1, FALSE, 3, 0, 10000, 10000);
    sluice_shutdown();
}
END_TEST

START_TEST(fixed_window_peek_consumes_nothing_and_starts_no_window)
{
    fixture_clock_start(S);
    fixture_init(fixed_window);
    ck_acquire("fw", "alice", 0, TRUE, 3, 3, -1, 0);
    ck_acquire("fw", "alice", 0, TRUE, 3, 3, -1, 0);
    at(5000300); /* the first admitted hit starts the window, not the peeks */
    ck_acquire("fw", "alice", 1, TRUE, 3, 2, -1, 10000);
    ck_acquire("fw", "alice", 0, TRUE, 3, 2, -1, 10000);
    ck_acquire("fw", "alice", 2, TRUE, 3, 0, -1, 10000);
    at(6000000); /* start + W - now = 15 000 300 - 6 000 000 = 9 000 300 µs */
    ck_acquire("fw", "alice", 0, FALSE, 3, 0, 9001, 9001);
    ck_acquire("fw", "alice", 0, FALSE, 3, 0, 9001, 9001);
    at(15000300); /* the window is over: full capacity again */
    ck_acquire("fw", "alice", 0, TRUE, 3, 3, -1, 0);
    sluice_shutdown();
}
END_TEST

START_TEST(fixed_window_multi_permit_call_takes_all_or_nothing)
{
    fixture_clock_start(S);
    fixture_init(fixed_window);
    ck_acquire("fw", "alice", 2, TRUE, 3, 1, -1, 10000);
    at(1500500); /* 10 000 000 - 1 500 500 = 8 499 500 µs */
    ck_acquire("fw", "alice", 2, FALSE, 3, 1, 8500, 8500);
    ck_acquire("fw", "alice", 1, TRUE, 3, 0, -1, 8500);
    sluice_shutdown();
}
END_TEST

START_TEST(fixed_window_more_permits_than_the_limit_never_pass)
{
    fixture_clock_start(S);
    fixture_init(fixed_window);
    ck_acquire("fw", "alice", 4, FALSE, 3, 3, -1, 0);
    ck_acquire("fw", "alice", 1, TRUE, 3, 2, -1, 10000);
    at(250); /* 9 999 750 µs */
    ck_acquire("fw", "alice", 4, FALSE, 3, 2, -1, 10000);
    /* a waiter gives up at once: it can never pass */
    ck_acquire_wait("fw", "alice", 4, 60000, FALSE, 3, 2, -1, 10000);
    ck_assert_uint_eq(fixture_clock_sleeps(), 0);
    ck_assert_int_eq(fixture_clock_now(), S + 250);
    sluice_shutdown();
}
END_TEST

/* ==== sliding_log: L = 3, W = 10 s ================================================ */

static const char sliding_log[] = "[limit:log]\n"
                                  "algorithm = sliding_log\n"
                                  "limit = 3\n"
                                  "window = 10s\n"
                                  "[limit:log_shared]\n"
                                  "algorithm = sliding_log\n"
                                  "limit = 3\n"
                                  "window = 10s\n"
                                  "per_key = false\n";

START_TEST(sliding_log_fresh_key_counts_down_and_resets_from_the_newest_permit)
{
    fixture_clock_start(S);
    fixture_init(sliding_log);
    ck_acquire("log", "alice", 1, TRUE, 3, 2, -1, 10000);
    at(2000400); /* reset = newest t + W - now = W */
    ck_acquire("log", "alice", 1, TRUE, 3, 1, -1, 10000);
    at(4000700);
    ck_acquire("log", "alice", 1, TRUE, 3, 0, -1, 10000);
    sluice_shutdown();
}
END_TEST

START_TEST(sliding_log_denies_until_the_oldest_permit_leaves)
{
    fixture_clock_start(S);
    fixture_init(sliding_log);
    ck_acquire("log", "alice", 1, TRUE, 3, 2, -1, 10000);
    at(2000400);
    ck_acquire("log", "alice", 1, TRUE, 3, 1, -1, 10000);
    at(4000700);
    ck_acquire("log", "alice", 1, TRUE, 3, 0, -1, 10000);
    /* retry = t(0) + W - now = 10 000 000 - 5 000 100 = 4 999 900 µs;
     * reset = t(4 000 700) + W - now = 9 000 600 µs */
    at(5000100);
    ck_acquire("log", "alice", 1, FALSE, 3, 0, 5000, 9001);
    fixture_clock_advance_ms(4999); /* now 9 999 100: retry 900 µs, reset 4 001 600 µs */
    ck_acquire("log", "alice", 1, FALSE, 3, 0, 1, 4002);
    fixture_clock_advance_ms(1); /* waited exactly 5000 ms: the permit at 0 has left */
    ck_acquire("log", "alice", 1, TRUE, 3, 0, -1, 10000);
    sluice_shutdown();
}
END_TEST

START_TEST(sliding_log_permit_leaves_exactly_one_window_after_it_passed)
{
    fixture_clock_start(S);
    fixture_init(sliding_log);
    ck_acquire("log", "alice", 3, TRUE, 3, 0, -1, 10000);
    at(10000000 - 1); /* t = 0 still satisfies now - W < t */
    ck_acquire("log", "alice", 1, FALSE, 3, 0, 1, 1);
    at(10000000); /* now - W = t: no longer counted */
    ck_acquire("log", "alice", 1, TRUE, 3, 2, -1, 10000);
    sluice_shutdown();
}
END_TEST

START_TEST(sliding_log_multi_permit_waits_until_enough_permits_have_left)
{
    fixture_clock_start(S);
    fixture_init(sliding_log);
    ck_acquire("log", "alice", 2, TRUE, 3, 1, -1, 10000); /* two permits logged at 0 */
    at(1000300);
    ck_acquire("log", "alice", 1, TRUE, 3, 0, -1, 10000);
    /* at 2 000 000: reset = 1 000 300 + W - now = 9 000 300 µs.
     * 1 permit must leave: permit 1, t = 0     -> 8 000 000 µs
     * 2 permits:           permit 2, t = 0     -> 8 000 000 µs
     * 3 permits:           permit 3, t = 1 000 300 -> 9 000 300 µs */
    at(2000000);
    ck_acquire("log", "alice", 1, FALSE, 3, 0, 8000, 9001);
    ck_acquire("log", "alice", 2, FALSE, 3, 0, 8000, 9001);
    ck_acquire("log", "alice", 3, FALSE, 3, 0, 9001, 9001);
    /* 1 ms short: now 11 000 000, now - W = 1 000 000 < 1 000 300, one permit left */
    fixture_clock_advance_ms(9000);
    ck_acquire("log", "alice", 3, FALSE, 3, 2, 1, 1);
    fixture_clock_advance_ms(1); /* waited exactly 9001 ms */
    ck_acquire("log", "alice", 3, TRUE, 3, 0, -1, 10000);
    sluice_shutdown();
}
END_TEST

START_TEST(sliding_log_more_permits_than_the_limit_never_pass)
{
    fixture_clock_start(S);
    fixture_init(sliding_log);
    ck_acquire("log", "alice", 4, FALSE, 3, 3, -1, 0);
    ck_acquire("log", "alice", 3, TRUE, 3, 0, -1, 10000);
    at(700);
    ck_acquire("log", "alice", 4, FALSE, 3, 0, -1, 10000);
    sluice_shutdown();
}
END_TEST

/* ==== sliding_window: L = 10, W = 1 s (Wms = 1000) ================================
 * Windows are aligned to multiples of W: S = 1 000 250 lies in [1 000 000, 2 000 000).
 * In these tests offsets are absolute clock times, set with fixture_clock_set. */

static const char sliding_window[] = "[limit:sw]\n"
                                     "algorithm = sliding_window\n"
                                     "limit = 10\n"
                                     "window = 1s\n"
                                     "[limit:sw_shared]\n"
                                     "algorithm = sliding_window\n"
                                     "limit = 10\n"
                                     "window = 1s\n"
                                     "per_key = false\n";

START_TEST(sliding_window_fresh_key_counts_down)
{
    fixture_clock_start(S);
    fixture_init(sliding_window);
    /* remaining = floor((10 000 - 1 * 1000) / 1000) = 9;
     * reset = start + 2W - now = 3 000 000 - 1 000 250 = 1 999 750 µs */
    ck_acquire("sw", "alice", 1, TRUE, 10, 9, -1, 2000);
    ck_acquire("sw", "alice", 9, TRUE, 10, 0, -1, 2000);
    sluice_shutdown();
}
END_TEST

START_TEST(sliding_window_full_window_denies_until_the_previous_weighs_less)
{
    fixture_clock_start(S);
    fixture_init(sliding_window);
    ck_acquire("sw", "alice", 10, TRUE, 10, 0, -1, 2000);
    /* cur + need = 11 > L: in the next window prev = 10, and 10 * (1000 - e) + 1000
     * <= 10 000 first at e = 100, i.e. at 2 100 000: retry 1 099 750 µs */
    ck_acquire("sw", "alice", 1, FALSE, 10, 0, 1100, 2000);
    /* 1 ms short, at 2 099 250: e = 99, 10 * 901 + 1000 = 10 010 > 10 000.
     * retry = 2 100 000 - 2 099 250 = 750 µs; only prev: reset = 3 000 000 - now
     * = 900 750 µs; remaining = floor((10 000 - 9010) / 1000) = 0 */
    fixture_clock_advance_ms(1099);
    ck_acquire("sw", "alice", 1, FALSE, 10, 0, 1, 901);
    /* waited exactly 1100 ms, at 2 100 250: e = 100, 9000 + 1000 = 10 000 passes;
     * reset = 4 000 000 - 2 100 250 = 1 899 750 µs */
    fixture_clock_advance_ms(1);
    ck_acquire("sw", "alice", 1, TRUE, 10, 0, -1, 1900);
    sluice_shutdown();
}
END_TEST

START_TEST(sliding_window_edge_turns_the_current_count_into_the_previous)
{
    fixture_clock_start(S);
    fixture_init(sliding_window);
    ck_acquire("sw", "alice", 10, TRUE, 10, 0, -1, 2000);
    /* the last microsecond of the window: retry = 2 100 000 - 1 999 999 = 100 001 µs,
     * reset = 3 000 000 - 1 999 999 = 1 000 001 µs */
    fixture_clock_set(1999999);
    ck_acquire("sw", "alice", 1, FALSE, 10, 0, 101, 1001);
    /* the edge: e = 0, prev = 10 weighs fully; reset = 3 000 000 - now */
    fixture_clock_set(2000000);
    ck_acquire("sw", "alice", 1, FALSE, 10, 0, 100, 1000);
    ck_acquire("sw", "alice", 0, FALSE, 10, 0, 100, 1000);
    /* a window with no hits in between: both counts are 0 */
    fixture_clock_set(3000000);
    ck_acquire("sw", "alice", 0, TRUE, 10, 10, -1, 0);
    ck_acquire("sw", "alice", 10, TRUE, 10, 0, -1, 2000);
    sluice_shutdown();
}
END_TEST

START_TEST(sliding_window_previous_window_weighs_by_its_remaining_overlap)
{
    fixture_clock_start(S);
    fixture_init(sliding_window);
    ck_acquire("sw", "alice", 10, TRUE, 10, 0, -1, 2000);
    /* e = 250: prev weighs 10 * 750 = 7500; remaining = floor(2500 / 1000) = 2;
     * reset (only prev) = 3 000 000 - 2 250 300 = 749 700 µs */
    fixture_clock_set(2250300);
    ck_acquire("sw", "alice", 0, TRUE, 10, 2, -1, 750);
    /* e = 500: prev weighs 5000; remaining 5; reset = 499 700 µs */
    fixture_clock_set(2500300);
    ck_acquire("sw", "alice", 0, TRUE, 10, 5, -1, 500);
    /* 6 permits: 5000 + 6000 > 10 000; cur + need <= L, so in this window at
     * 10 * (1000 - e) <= 4000, e = 600: retry = 2 600 000 - 2 500 300 = 99 700 µs */
    ck_acquire("sw", "alice", 6, FALSE, 10, 5, 100, 500);
    /* 5 permits: 5000 + 5000 = 10 000 passes; reset = 4 000 000 - now = 1 499 700 µs */
    ck_acquire("sw", "alice", 5, TRUE, 10, 0, -1, 1500);
    /* one more: 5000 + 6000 > 10 000 -> e = 600 again */
    ck_acquire("sw", "alice", 1, FALSE, 10, 0, 100, 1500);
    /* 1 ms short, e = 599: 4010 + 6000 > 10 000; retry 700 µs, reset 1 400 700 µs */
    fixture_clock_advance_ms(99);
    ck_acquire("sw", "alice", 1, FALSE, 10, 0, 1, 1401);
    /* waited exactly 100 ms, e = 600: 4000 + 6000 = 10 000; reset 1 399 700 µs */
    fixture_clock_advance_ms(1);
    ck_acquire("sw", "alice", 1, TRUE, 10, 0, -1, 1400);
    sluice_shutdown();
}
END_TEST

START_TEST(sliding_window_multi_permit_over_the_limit_waits_for_the_next_window)
{
    fixture_clock_start(S);
    fixture_init(sliding_window);
    ck_acquire("sw", "alice", 7, TRUE, 10, 3, -1, 2000);
    /* 4 more: cur + need = 11 > L. Next window, prev = 7: 7 * (1000 - e) + 4000 <=
     * 10 000 first at e = 143 (7 * 857 = 5999; e = 142 gives 6006):
     * retry = 2 143 000 - 1 000 250 = 1 142 750 µs */
    ck_acquire("sw", "alice", 4, FALSE, 10, 3, 1143, 2000);
    /* 1 ms short, at 2 142 250: e = 142, retry 750 µs; remaining = floor((10 000 -
     * 6006) / 1000) = 3; only prev: reset = 3 000 000 - now = 857 750 µs */
    fixture_clock_advance_ms(1142);
    ck_acquire("sw", "alice", 4, FALSE, 10, 3, 1, 858);
    /* exactly 1143 ms, at 2 143 250: e = 143; remaining = floor((10 000 - 5999 - 4000)
     * / 1000) = 0; reset = 4 000 000 - now = 1 856 750 µs */
    fixture_clock_advance_ms(1);
    ck_acquire("sw", "alice", 4, TRUE, 10, 0, -1, 1857);
    sluice_shutdown();
}
END_TEST

START_TEST(sliding_window_more_permits_than_the_limit_never_pass)
{
    fixture_clock_start(S);
    fixture_init(sliding_window);
    ck_acquire("sw", "alice", 11, FALSE, 10, 10, -1, 0);
    ck_acquire("sw", "alice", 3, TRUE, 10, 7, -1, 2000);
    ck_acquire("sw", "alice", 11, FALSE, 10, 7, -1, 2000);
    sluice_shutdown();
}
END_TEST

/* ==== token_bucket: L = 10, W = 1 s, B = 5: T = 100 000 µs ========================= */

static const char token_bucket[] = "[limit:tb]\n"
                                   "algorithm = token_bucket\n"
                                   "limit = 10\n"
                                   "window = 1s\n"
                                   "burst = 5\n"
                                   "[limit:tb_shared]\n"
                                   "algorithm = token_bucket\n"
                                   "limit = 10\n"
                                   "window = 1s\n"
                                   "burst = 5\n"
                                   "per_key = false\n"
                                   "[limit:tb_wait]\n"
                                   "algorithm = token_bucket\n"
                                   "limit = 10\n"
                                   "window = 1s\n"
                                   "burst = 5\n"
                                   "wait = 500ms\n";

START_TEST(token_bucket_fresh_key_is_a_full_bucket)
{
    fixture_clock_start(S);
    fixture_init(token_bucket);
    ck_acquire("tb", "alice", 0, TRUE, 5, 5, -1, 0);
    /* last = 0, tokens 4: reset = 0 + 1 * T - 0 */
    ck_acquire("tb", "alice", 1, TRUE, 5, 4, -1, 100);
    /* at 30 300, g = 0: tokens 0, reset = 5 * T - 30 300 = 469 700 µs */
    at(30300);
    ck_acquire("tb", "alice", 4, TRUE, 5, 0, -1, 470);
    sluice_shutdown();
}
END_TEST

START_TEST(token_bucket_denies_until_the_next_token_is_due)
{
    fixture_clock_start(S);
    fixture_init(token_bucket);
    ck_acquire("tb", "alice", 5, TRUE, 5, 0, -1, 500);
    /* retry = last + 1 * T - now = 69 700 µs; reset = 5 * T - now = 469 700 µs */
    at(30300);
    ck_acquire("tb", "alice", 1, FALSE, 5, 0, 70, 470);
    fixture_clock_advance_ms(69); /* at 99 300: retry 700 µs, reset 400 700 µs */
    ck_acquire("tb", "alice", 1, FALSE, 5, 0, 1, 401);
    /* waited exactly 70 ms, at 100 300: g = 1, last = 100 000; taken, tokens 0:
     * reset = 100 000 + 5 * T - 100 300 = 499 700 µs */
    fixture_clock_advance_ms(1);
    ck_acquire("tb", "alice", 1, TRUE, 5, 0, -1, 500);
    sluice_shutdown();
}
END_TEST

START_TEST(token_bucket_token_arrives_exactly_one_interval_after_the_last_refill)
{
    fixture_clock_start(S);
    fixture_init(token_bucket);
    ck_acquire("tb", "alice", 5, TRUE, 5, 0, -1, 500);
    at(100000 - 1); /* retry 1 µs, reset 400 001 µs */
    ck_acquire("tb", "alice", 1, FALSE, 5, 0, 1, 401);
    at(100000);
    ck_acquire("tb", "alice", 1, TRUE, 5, 0, -1, 500);
    sluice_shutdown();
}
END_TEST

START_TEST(token_bucket_multi_permit_waits_for_all_its_tokens)
{
    fixture_clock_start(S);
    fixture_init(token_bucket);
    ck_acquire("tb", "alice", 5, TRUE, 5, 0, -1, 500);
    /* retry = 0 + 3 * T - 30 300 = 269 700 µs */
    at(30300);
    ck_acquire("tb", "alice", 3, FALSE, 5, 0, 270, 470);
    /* 1 ms short, at 299 300: g = 2, tokens 2, last 200 000; retry = 200 000 + T -
     * 299 300 = 700 µs; reset = 200 000 + 3 * T - 299 300 = 200 700 µs */
    fixture_clock_advance_ms(269);
    ck_acquire("tb", "alice", 3, FALSE, 5, 2, 1, 201);
    /* exactly 270 ms, at 300 300: g = 1, tokens 3, last 300 000; all taken:
     * reset = 300 000 + 5 * T - 300 300 = 499 700 µs */
    fixture_clock_advance_ms(1);
    ck_acquire("tb", "alice", 3, TRUE, 5, 0, -1, 500);
    sluice_shutdown();
}
END_TEST

START_TEST(token_bucket_full_bucket_refills_from_the_moment_it_is_seen_full)
{
    fixture_clock_start(S);
    fixture_init(token_bucket);
    ck_acquire("tb", "alice", 5, TRUE, 5, 0, -1, 500);
    /* at 650 000: g = 6, the bucket reaches B, so it is full and last = now (not
     * 600 000): after one token, reset = T */
    at(650000);
    ck_acquire("tb", "alice", 1, TRUE, 5, 4, -1, 100);
    /* at 730 000, g = 0: reset = 650 000 + 5 * T - 730 000 = 420 000 µs */
    at(730000);
    ck_acquire("tb", "alice", 4, TRUE, 5, 0, -1, 420);
    /* retry = 650 000 + T - 730 000 = 20 000 µs */
    ck_acquire("tb", "alice", 1, FALSE, 5, 0, 20, 420);
    sluice_shutdown();
}
END_TEST

START_TEST(token_bucket_more_permits_than_the_burst_never_pass)
{
    fixture_clock_start(S);
    fixture_init(token_bucket);
    /* the capacity is burst (5), not limit (10) */
    ck_acquire("tb", "alice", 6, FALSE, 5, 5, -1, 0);
    ck_acquire_wait("tb", "alice", 6, 10000, FALSE, 5, 5, -1, 0);
    ck_assert_uint_eq(fixture_clock_sleeps(), 0);
    ck_acquire("tb", "alice", 5, TRUE, 5, 0, -1, 500);
    sluice_shutdown();
}
END_TEST

START_TEST(token_bucket_waiter_reserves_its_tokens_and_sleeps_until_they_are_due)
{
    fixture_clock_start(S);
    fixture_init(token_bucket);
    ck_acquire("tb", "alice", 5, TRUE, 5, 0, -1, 500);
    /* at 30 300 two tokens are due at 200 000, within 1000 ms: they are taken now
     * (tokens -2, last 0) and the caller sleeps until 200 000.
     * reset = 0 + (5 - (-2)) * T - 30 300 = 669 700 µs */
    at(30300);
    ck_acquire_wait("tb", "alice", 2, 1000, TRUE, 5, 0, -1, 670);
    ck_assert_uint_eq(fixture_clock_sleeps(), 1);
    ck_assert_int_eq(fixture_clock_now(), S + 200000);
    /* the reserved tokens are spent: at 200 000, g = 2, tokens 0, last 200 000 */
    ck_acquire("tb", "alice", 1, FALSE, 5, 0, 100, 500);
    sluice_shutdown();
}
END_TEST

/* A sleep hook for the next test: while the waiter sleeps, another caller asks. */
static sluice_decision during_sleep;
static int during_sleep_rc = -2;
static gint64 during_sleep_at;

static gint64 hook_now(gpointer user_data)
{
    (void)user_data;
    return fixture_clock_now();
}

static void hook_sleep(gint64 until_us, gpointer user_data)
{
    (void)user_data;
    if (during_sleep_rc == -2) {
        during_sleep_at = fixture_clock_now();
        during_sleep_rc = sluice_acquire("tb", "alice", 1, &during_sleep, NULL);
    }
    if (until_us > fixture_clock_now())
        fixture_clock_set(until_us);
}

START_TEST(token_bucket_caller_arriving_during_a_reservation_queues_behind_it)
{
    fixture_clock_start(S);
    sluice_clock_set(hook_now, hook_sleep, NULL);
    fixture_init(token_bucket);
    ck_acquire("tb", "alice", 5, TRUE, 5, 0, -1, 500);
    at(30300);
    ck_acquire_wait("tb", "alice", 2, 1000, TRUE, 5, 0, -1, 670);
    ck_assert_int_eq(fixture_clock_now(), S + 200000);
    /* the other caller asked at 30 300 while tokens were -2: without the
     * reservation its token would be due in 69 700 µs; behind it, the third token
     * from last = 0: retry = 3 * T - 30 300 = 269 700 µs */
    ck_assert_int_eq(during_sleep_at, S + 30300);
    ck_assert_int_eq(during_sleep_rc, SLUICE_DENIED);
    ck_assert_decision(during_sleep, FALSE, 5, 0, 270, 670);
    /* at 300 000: g = 3, tokens 1, last 300 000 */
    at(300000);
    ck_acquire("tb", "alice", 1, TRUE, 5, 0, -1, 500);
    sluice_shutdown();
}
END_TEST

START_TEST(token_bucket_waiter_whose_tokens_are_not_due_in_time_returns_at_once)
{
    fixture_clock_start(S);
    fixture_init(token_bucket);
    ck_acquire("tb", "alice", 5, TRUE, 5, 0, -1, 500);
    /* two tokens are due in 169 700 µs: a 169 ms wait is too short */
    at(30300);
    ck_acquire_wait("tb", "alice", 2, 169, FALSE, 5, 0, 170, 470);
    ck_assert_uint_eq(fixture_clock_sleeps(), 0);
    ck_assert_int_eq(fixture_clock_now(), S + 30300);
    /* nothing was reserved */
    ck_acquire("tb", "alice", 0, FALSE, 5, 0, 70, 470);
    /* 170 ms is enough */
    ck_acquire_wait("tb", "alice", 2, 170, TRUE, 5, 0, -1, 670);
    ck_assert_uint_eq(fixture_clock_sleeps(), 1);
    ck_assert_int_eq(fixture_clock_now(), S + 200000);
    sluice_shutdown();
}
END_TEST

START_TEST(token_bucket_rule_wait_reserves_for_a_plain_acquire)
{
    fixture_clock_start(S);
    fixture_init(token_bucket);
    ck_acquire("tb_wait", "alice", 5, TRUE, 5, 0, -1, 500);
    /* due at 100 000, within wait = 500ms: reserved, tokens -1;
     * reset = (5 + 1) * T - 30 300 = 569 700 µs */
    at(30300);
    ck_acquire("tb_wait", "alice", 1, TRUE, 5, 0, -1, 570);
    ck_assert_uint_eq(fixture_clock_sleeps(), 1);
    ck_assert_int_eq(fixture_clock_now(), S + 100000);
    sluice_shutdown();
}
END_TEST

/* ==== gcra: L = 5, W = 10 s, B = 5: T = 2 000 000 µs, DVT = 10 000 000 µs ========= */

static const char gcra[] = "[limit:gcra]\n"
                           "algorithm = gcra\n"
                           "limit = 5\n"
                           "window = 10s\n"
                           "burst = 5\n"
                           "[limit:gcra_shared]\n"
                           "algorithm = gcra\n"
                           "limit = 5\n"
                           "window = 10s\n"
                           "burst = 5\n"
                           "per_key = false\n"
                           "[limit:cell]\n" /* CL.THROTTLE user123 15 30 60 */
                           "algorithm = gcra\n"
                           "limit = 30\n"
                           "window = 60s\n"
                           "burst = 16\n"
                           "[limit:thirds]\n" /* T = 10 000 000 / 3 = 3 333 333 1/3 */
                           "algorithm = gcra\n"
                           "limit = 3\n"
                           "window = 10s\n";

START_TEST(gcra_answers_as_redis_cell_cl_throttle_would)
{
    fixture_clock_start(S);
    fixture_init(gcra);
    /* CL.THROTTLE k 4 5 10 -> 0 5 4 -1 2, then 3/4, 2/6, 1/8, 0/10, and a denial
     * with retry 2 s, reset 10 s */
    ck_acquire("gcra", "alice", 1, TRUE, 5, 4, -1, 2000);
    ck_acquire("gcra", "alice", 1, TRUE, 5, 3, -1, 4000);
    ck_acquire("gcra", "alice", 1, TRUE, 5, 2, -1, 6000);
    ck_acquire("gcra", "alice", 1, TRUE, 5, 1, -1, 8000);
    ck_acquire("gcra", "alice", 1, TRUE, 5, 0, -1, 10000);
    ck_acquire("gcra", "alice", 1, FALSE, 5, 0, 2000, 10000);
    /* redis-cell's README: CL.THROTTLE user123 15 30 60 1 -> 0 16 15 -1 2 */
    ck_acquire("cell", "user123", 1, TRUE, 16, 15, -1, 2000);
    sluice_shutdown();
}
END_TEST

START_TEST(gcra_denies_until_one_emission_interval_has_passed)
{
    fixture_clock_start(S);
    fixture_init(gcra);
    ck_acquire("gcra", "alice", 5, TRUE, 5, 0, -1, 10000); /* tat = 10 000 000 */
    /* at 700 300: allow_at = 12 000 000 - DVT = 2 000 000, retry 1 299 700 µs;
     * ttl = tat - now = 9 299 700 µs; remaining = floor(700 300 / T) = 0 */
    at(700300);
    ck_acquire("gcra", "alice", 1, FALSE, 5, 0, 1300, 9300);
    fixture_clock_advance_ms(1299); /* at 1 999 300: retry 700 µs, ttl 8 000 700 µs */
    ck_acquire("gcra", "alice", 1, FALSE, 5, 0, 1, 8001);
    /* exactly 1300 ms, at 2 000 300: tat 12 000 000, ttl 9 999 700 µs */
    fixture_clock_advance_ms(1);
    ck_acquire("gcra", "alice", 1, TRUE, 5, 0, -1, 10000);
    /* at 6 000 800: a peek, ttl = 5 999 200 µs; remaining = floor(4 000 800 / T) = 2 */
    at(6000800);
    ck_acquire("gcra", "alice", 0, TRUE, 5, 2, -1, 6000);
    sluice_shutdown();
}
END_TEST

START_TEST(gcra_edge_is_exact_to_the_microsecond)
{
    fixture_clock_start(S);
    fixture_init(gcra);
    ck_acquire("gcra", "alice", 5, TRUE, 5, 0, -1, 10000);
    at(2000000 - 1); /* retry 1 µs, ttl 8 000 001 µs */
    ck_acquire("gcra", "alice", 1, FALSE, 5, 0, 1, 8001);
    at(2000000);
    ck_acquire("gcra", "alice", 1, TRUE, 5, 0, -1, 10000);
    sluice_shutdown();
}
END_TEST

START_TEST(gcra_multi_permit_call_advances_the_arrival_time_by_each_permit)
{
    fixture_clock_start(S);
    fixture_init(gcra);
    /* new_tat = 6 000 000: ttl 6 s, remaining = floor(4 000 000 / T) = 2 */
    ck_acquire("gcra", "alice", 3, TRUE, 5, 2, -1, 6000);
    /* at 500 400: new_tat = 12 000 000, allow_at = 2 000 000: retry 1 499 600 µs;
     * ttl = 6 000 000 - 500 400 = 5 499 600 µs; remaining floor(4 500 400 / T) = 2 */
    at(500400);
    ck_acquire("gcra", "alice", 3, FALSE, 5, 2, 1500, 5500);
    /* 2 permits: new_tat = 10 000 000, allow_at = 0; ttl 9 499 600 µs */
    ck_acquire("gcra", "alice", 2, TRUE, 5, 0, -1, 9500);
    sluice_shutdown();
}
END_TEST

START_TEST(gcra_more_permits_than_the_burst_never_pass)
{
    fixture_clock_start(S);
    fixture_init(gcra);
    ck_acquire("gcra", "alice", 6, FALSE, 5, 5, -1, 0);
    ck_acquire("gcra", "alice", 1, TRUE, 5, 4, -1, 2000);
    ck_acquire("gcra", "alice", 6, FALSE, 5, 4, -1, 2000);
    ck_acquire("cell", "alice", 17, FALSE, 16, 16, -1, 0);
    sluice_shutdown();
}
END_TEST

START_TEST(gcra_emission_interval_is_the_window_over_the_limit_exactly)
{
    fixture_clock_start(S);
    fixture_init(gcra);
    /* T = 3 333 333 1/3, B = L = 3, DVT = 10 000 000: ttl 3 333 333 1/3 µs,
     * remaining = floor(6 666 666 2/3 / T) = 2 */
    ck_acquire("thirds", "alice", 1, TRUE, 3, 2, -1, 3334);
    ck_acquire("thirds", "alice", 2, TRUE, 3, 0, -1, 10000); /* ttl 10 000 000 µs */
    /* allow_at = 13 333 333 1/3 - 10 000 000 = 3 333 333 1/3 */
    ck_acquire("thirds", "alice", 1, FALSE, 3, 0, 3334, 10000);
    at(3333333 - 1); /* retry 1 1/3 µs, ttl 6 666 668 µs */
    ck_acquire("thirds", "alice", 1, FALSE, 3, 0, 1, 6667);
    at(3333333); /* 1/3 µs early: retry 1/3 µs, ttl 6 666 667 µs */
    ck_acquire("thirds", "alice", 1, FALSE, 3, 0, 1, 6667);
    at(3333334); /* ttl = 13 333 333 1/3 - 3 333 334 = 9 999 999 1/3 µs */
    ck_acquire("thirds", "alice", 1, TRUE, 3, 0, -1, 10000);
    sluice_shutdown();
}
END_TEST

/* ==== concurrency: L = 2 in flight, leases live W = 1 s ============================ */

static const char concurrency[] = "[limit:cc]\n"
                                  "algorithm = concurrency\n"
                                  "limit = 2\n"
                                  "window = 1s\n"
                                  "[limit:cc_shared]\n"
                                  "algorithm = concurrency\n"
                                  "limit = 2\n"
                                  "window = 1s\n"
                                  "per_key = false\n";

START_TEST(concurrency_fresh_key_counts_leases_down)
{
    fixture_clock_start(S);
    fixture_init(concurrency);
    ck_acquire("cc", "alice", 0, TRUE, 2, 2, -1, 0);
    ck_acquire("cc", "alice", 1, TRUE, 2, 1, -1, 1000);
    at(200300); /* reset = the newest lease's expiry - now = W */
    ck_acquire("cc", "alice", 1, TRUE, 2, 0, -1, 1000);
    sluice_shutdown();
}
END_TEST

START_TEST(concurrency_denies_until_the_oldest_lease_expires)
{
    fixture_clock_start(S);
    fixture_init(concurrency);
    ck_acquire("cc", "alice", 1, TRUE, 2, 1, -1, 1000); /* expires at 1 000 000 */
    at(200300);
    ck_acquire("cc", "alice", 1, TRUE, 2, 0, -1, 1000); /* expires at 1 200 300 */
    /* at 400 700: retry = 1 000 000 - now = 599 300 µs; reset = 1 200 300 - now =
     * 799 600 µs */
    at(400700);
    ck_acquire("cc", "alice", 1, FALSE, 2, 0, 600, 800);
    fixture_clock_advance_ms(599); /* at 999 700: retry 300 µs, reset 200 600 µs */
    ck_acquire("cc", "alice", 1, FALSE, 2, 0, 1, 201);
    fixture_clock_advance_ms(1); /* waited exactly 600 ms */
    ck_acquire("cc", "alice", 1, TRUE, 2, 0, -1, 1000);
    sluice_shutdown();
}
END_TEST

START_TEST(concurrency_lease_expires_exactly_one_window_after_it_was_taken)
{
    fixture_clock_start(S);
    fixture_init(concurrency);
    ck_acquire("cc", "alice", 2, TRUE, 2, 0, -1, 1000);
    at(1000000 - 1);
    ck_acquire("cc", "alice", 1, FALSE, 2, 0, 1, 1);
    at(1000000);
    ck_acquire("cc", "alice", 0, TRUE, 2, 2, -1, 0);
    ck_acquire("cc", "alice", 1, TRUE, 2, 1, -1, 1000);
    sluice_shutdown();
}
END_TEST

START_TEST(concurrency_release_gives_back_the_oldest_lease_first)
{
    fixture_clock_start(S);
    fixture_init(concurrency);
    ck_acquire("cc", "alice", 1, TRUE, 2, 1, -1, 1000); /* expires at 1 000 000 */
    at(200300);
    ck_acquire("cc", "alice", 1, TRUE, 2, 0, -1, 1000); /* expires at 1 200 300 */
    at(400700);
    sluice_release("cc", "alice", 1);
    /* the lease left expires at 1 200 300: reset 799 600 µs */
    ck_acquire("cc", "alice", 0, TRUE, 2, 1, -1, 800);
    ck_acquire("cc", "alice", 1, TRUE, 2, 0, -1, 1000);
    /* the oldest now expires at 1 200 300: retry 799 600 µs (600 had the newest
     * been given back) */
    ck_acquire("cc", "alice", 1, FALSE, 2, 0, 800, 1000);
    sluice_release("cc", "alice", 2);
    ck_acquire("cc", "alice", 0, TRUE, 2, 2, -1, 0);
    /* giving back more than is held, or on a fresh key, changes nothing */
    sluice_release("cc", "alice", 1);
    sluice_release("cc", "carol", 3);
    ck_acquire("cc", "alice", 0, TRUE, 2, 2, -1, 0);
    ck_acquire("cc", "carol", 2, TRUE, 2, 0, -1, 1000);
    sluice_shutdown();
}
END_TEST

START_TEST(concurrency_multi_permit_call_takes_all_or_nothing)
{
    fixture_clock_start(S);
    fixture_init(concurrency);
    ck_acquire("cc", "alice", 2, TRUE, 2, 0, -1, 1000);
    at(300500); /* both leases expire at 1 000 000: 699 500 µs */
    ck_acquire("cc", "alice", 2, FALSE, 2, 0, 700, 700);
    sluice_release("cc", "alice", 1);
    ck_acquire("cc", "alice", 2, FALSE, 2, 1, 700, 700);
    ck_acquire("cc", "alice", 1, TRUE, 2, 0, -1, 1000);
    sluice_shutdown();
}
END_TEST

START_TEST(concurrency_more_permits_than_the_limit_never_pass)
{
    fixture_clock_start(S);
    fixture_init(concurrency);
    ck_acquire("cc", "alice", 3, FALSE, 2, 2, -1, 0);
    ck_acquire("cc", "alice", 1, TRUE, 2, 1, -1, 1000);
    ck_acquire("cc", "alice", 3, FALSE, 2, 1, -1, 1000);
    ck_acquire_wait("cc", "alice", 3, 5000, FALSE, 2, 1, -1, 1000);
    ck_assert_uint_eq(fixture_clock_sleeps(), 0);
    sluice_shutdown();
}
END_TEST

START_TEST(concurrency_waiter_sleeps_until_a_lease_expires)
{
    fixture_clock_start(S);
    fixture_init(concurrency);
    ck_acquire("cc", "alice", 2, TRUE, 2, 0, -1, 1000);
    /* at 300 500 the leases expire in 699 500 µs: a 700 ms wait sleeps until
     * 1 000 000, when both have expired */
    at(300500);
    ck_acquire_wait("cc", "alice", 1, 700, TRUE, 2, 1, -1, 1000);
    ck_assert_uint_eq(fixture_clock_sleeps(), 1);
    ck_assert_int_eq(fixture_clock_now(), S + 1000000);
    sluice_shutdown();
}
END_TEST

START_TEST(concurrency_waiter_whose_lease_is_not_due_in_time_waits_for_a_release_until_its_deadline)
{
    fixture_clock_start(S);
    fixture_init(concurrency);
    ck_acquire("cc", "alice", 2, TRUE, 2, 0, -1, 1000);
    /* due in 699 500 µs: 699 ms is too short for the expiry, but a release could
     * come sooner (acquire.h), so the waiter sleeps until its deadline, asks once
     * more, and is denied with the 500 µs that are left */
    at(300500);
    ck_acquire_wait("cc", "alice", 1, 699, FALSE, 2, 0, 1, 1);
    ck_assert_uint_eq(fixture_clock_sleeps(), 1);
    ck_assert_int_eq(fixture_clock_now(), S + 999500);
    sluice_shutdown();
}
END_TEST

START_TEST(concurrency_per_key_true_splits_the_limit_and_false_shares_it)
{
    fixture_clock_start(S);
    fixture_init(concurrency);
    ck_acquire("cc", "alice", 2, TRUE, 2, 0, -1, 1000);
    ck_acquire("cc", "alice", 1, FALSE, 2, 0, 1000, 1000);
    ck_acquire("cc", "bob", 1, TRUE, 2, 1, -1, 1000);
    sluice_release("cc", "bob", 1); /* bob's lease, not alice's */
    ck_acquire("cc", "alice", 0, FALSE, 2, 0, 1000, 1000);

    ck_acquire("cc_shared", "alice", 2, TRUE, 2, 0, -1, 1000);
    ck_acquire("cc_shared", "bob", 1, FALSE, 2, 0, 1000, 1000);
    sluice_release("cc_shared", "bob", 1); /* the key is ignored: one shared lease */
    ck_acquire("cc_shared", NULL, 1, TRUE, 2, 0, -1, 1000);
    sluice_shutdown();
}
END_TEST

/* ==== per_key, for each algorithm that has no release ============================= */

/* An algorithm's rule with per_key = true and its twin with per_key = false (the keyfiles
 * above): alice takes every permit and is refused; bob has permits of his own under the
 * first, none under the second, nor has a call without a key. */
typedef struct {
    const char *keyfile, *name, *shared;
    gint64 capacity;  /* the limit, or the burst */
    gint64 retry;     /* of a refusal after alice took every permit */
    gint64 reset;     /* after alice took every permit */
    gint64 bob_reset; /* after bob took one permit of his own */
} per_key_case;

static const per_key_case per_key_cases[] = {
    {fixed_window, "fw", "fw_shared", 3, 10000, 10000, 10000},
    {sliding_log, "log", "log_shared", 3, 10000, 10000, 10000},
    {sliding_window, "sw", "sw_shared", 10, 1100, 2000, 2000},
    {token_bucket, "tb", "tb_shared", 5, 100, 500, 100},
    {gcra, "gcra", "gcra_shared", 5, 2000, 10000, 2000},
};

START_TEST(per_key_true_splits_the_limit_and_false_shares_it)
{
    const per_key_case *c = &per_key_cases[_i];
    gint64 l = c->capacity;
    fixture_clock_start(S);
    fixture_init(c->keyfile);
    ck_acquire(c->name, "alice", l, TRUE, l, 0, -1, c->reset);
    ck_acquire(c->name, "alice", 1, FALSE, l, 0, c->retry, c->reset);
    ck_acquire(c->name, "bob", 1, TRUE, l, l - 1, -1, c->bob_reset);

    ck_acquire(c->shared, "alice", l, TRUE, l, 0, -1, c->reset);
    ck_acquire(c->shared, "bob", 1, FALSE, l, 0, c->retry, c->reset);
    ck_acquire(c->shared, NULL, 1, FALSE, l, 0, c->retry, c->reset);
    sluice_shutdown();
}
END_TEST

/* ==== peeks, for the algorithms whose window starts with no hit ======================== */

/* Peeks (0 permits) between takes: they consume nothing, and say whether one would pass. */
typedef struct {
    const char *keyfile, *name;
    gint64 limit;
    gint64 first;       /* permits of the first take: the rest is taken by the second */
    gint64 first_reset; /* after the first take */
    gint64 full_reset;  /* after the second */
    gint64 at;          /* when the last peek asks (µs after S): refused */
    gint64 retry;       /* its retry_after_ms (its reset_after_ms: full_reset) */
} peek_case;

static const peek_case peek_cases[] = {
    /* at 700: 10 000 000 - 700 = 9 999 300 µs */
    {sliding_log, "log", 3, 2, 10000, 10000, 700, 10000},
    {sliding_window, "sw", 10, 9, 2000, 2000, 0, 1100},
    {gcra, "gcra", 5, 1, 2000, 10000, 0, 2000},
};

START_TEST(peek_consumes_nothing_and_says_whether_one_would_pass)
{
    const peek_case *c = &peek_cases[_i];
    gint64 l = c->limit;
    fixture_clock_start(S);
    fixture_init(c->keyfile);
    ck_acquire(c->name, "alice", 0, TRUE, l, l, -1, 0); /* a peek: reset 0 */
    ck_acquire(c->name, "alice", c->first, TRUE, l, l - c->first, -1, c->first_reset);
    ck_acquire(c->name, "alice", 0, TRUE, l, l - c->first, -1, c->first_reset);
    ck_acquire(c->name, "alice", 0, TRUE, l, l - c->first, -1, c->first_reset);
    ck_acquire(c->name, "alice", l - c->first, TRUE, l, 0, -1, c->full_reset);
    at(c->at);
    ck_acquire(c->name, "alice", 0, FALSE, l, 0, c->retry, c->full_reset);
    sluice_shutdown();
}
END_TEST

/* ==== shadow mode =================================================================== */

static const char shadow[] = "[limit:fw_shadow]\n"
                             "algorithm = fixed_window\n"
                             "limit = 1\n"
                             "window = 10s\n"
                             "mode = shadow\n"
                             "[limit:gcra_shadow]\n"
                             "algorithm = gcra\n"
                             "limit = 1\n"
                             "window = 1s\n"
                             "mode = shadow\n";

/* One shadow call: SLUICE_ALLOWED (allowed TRUE, retry -1) whatever the state;
 * limit, remaining and reset as the enforcing rule would answer. */
#define ck_shadow(name, permits, l, rem, reset)                                                    \
    do {                                                                                           \
        sluice_decision d_ = {0};                                                                  \
        GError *e_ = NULL;                                                                         \
        ck_assert_int_eq(sluice_acquire((name), "alice", (permits), &d_, &e_), SLUICE_ALLOWED);    \
        ck_assert_ptr_null(e_);                                                                    \
        ck_assert_decision(d_, TRUE, (l), (rem), -1, (reset));                                     \
    } while (0)

START_TEST(shadow_mode_allows_but_the_decision_shows_the_state)
{
    fixture_clock_start(S);
    fixture_init(shadow);
    ck_acquire("fw_shadow", "alice", 1, TRUE, 1, 0, -1, 10000);
    at(300); /* over the limit: allowed anyway; 9 999 700 µs to the window's end */
    ck_shadow("fw_shadow", 1, 1, 0, 10000);
    ck_shadow("fw_shadow", 1, 1, 0, 10000);
    ck_shadow("fw_shadow", 2, 1, 0, 10000);
    at(10000000); /* the window began at 0, not at a shadow-denied call */
    ck_acquire("fw_shadow", "alice", 1, TRUE, 1, 0, -1, 10000);
    sluice_shutdown();
}
END_TEST

START_TEST(shadow_mode_denied_calls_consume_nothing)
{
    fixture_clock_start(S);
    fixture_init(shadow);
    /* T = DVT = 1 000 000: tat = 1 000 000 */
    ck_acquire("gcra_shadow", "alice", 1, TRUE, 1, 0, -1, 1000);
    at(300); /* ttl = tat - now = 999 700 µs, however often it is asked */
    ck_shadow("gcra_shadow", 1, 1, 0, 1000);
    ck_shadow("gcra_shadow", 1, 1, 0, 1000);
    ck_shadow("gcra_shadow", 1, 1, 0, 1000);
    at(1000000); /* had they counted, tat would be 4 000 000 */
    ck_acquire("gcra_shadow", "alice", 1, TRUE, 1, 0, -1, 1000);
    sluice_shutdown();
}
END_TEST

/* Runs after every test, passed or failed: a test that failed before its own
 * sluice_shutdown leaves no state to the next when check does not fork. */
static void teardown(void)
{
    sluice_shutdown();
}

int main(void)
{
    Suite *s = suite_create("algorithms");

    TCase *fw = tcase_create("fixed_window");
    tcase_add_test(fw, fixed_window_fresh_key_counts_down_from_the_limit);
    tcase_add_test(fw, fixed_window_denies_until_the_window_ends);
    tcase_add_test(fw, fixed_window_ends_exactly_one_window_after_its_first_hit);
    tcase_add_test(fw, fixed_window_peek_consumes_nothing_and_starts_no_window);
    tcase_add_test(fw, fixed_window_multi_permit_call_takes_all_or_nothing);
    tcase_add_test(fw, fixed_window_more_permits_than_the_limit_never_pass);
    tcase_add_checked_fixture(fw, NULL, teardown);
    suite_add_tcase(s, fw);

    TCase *log = tcase_create("sliding_log");
    tcase_add_test(log, sliding_log_fresh_key_counts_down_and_resets_from_the_newest_permit);
    tcase_add_test(log, sliding_log_denies_until_the_oldest_permit_leaves);
    tcase_add_test(log, sliding_log_permit_leaves_exactly_one_window_after_it_passed);
    tcase_add_test(log, sliding_log_multi_permit_waits_until_enough_permits_have_left);
    tcase_add_test(log, sliding_log_more_permits_than_the_limit_never_pass);
    tcase_add_checked_fixture(log, NULL, teardown);
    suite_add_tcase(s, log);

    TCase *sw = tcase_create("sliding_window");
    tcase_add_test(sw, sliding_window_fresh_key_counts_down);
    tcase_add_test(sw, sliding_window_full_window_denies_until_the_previous_weighs_less);
    tcase_add_test(sw, sliding_window_edge_turns_the_current_count_into_the_previous);
    tcase_add_test(sw, sliding_window_previous_window_weighs_by_its_remaining_overlap);
    tcase_add_test(sw, sliding_window_multi_permit_over_the_limit_waits_for_the_next_window);
    tcase_add_test(sw, sliding_window_more_permits_than_the_limit_never_pass);
    tcase_add_checked_fixture(sw, NULL, teardown);
    suite_add_tcase(s, sw);

    TCase *tb = tcase_create("token_bucket");
    tcase_add_test(tb, token_bucket_fresh_key_is_a_full_bucket);
    tcase_add_test(tb, token_bucket_denies_until_the_next_token_is_due);
    tcase_add_test(tb, token_bucket_token_arrives_exactly_one_interval_after_the_last_refill);
    tcase_add_test(tb, token_bucket_multi_permit_waits_for_all_its_tokens);
    tcase_add_test(tb, token_bucket_full_bucket_refills_from_the_moment_it_is_seen_full);
    tcase_add_test(tb, token_bucket_more_permits_than_the_burst_never_pass);
    tcase_add_test(tb, token_bucket_waiter_reserves_its_tokens_and_sleeps_until_they_are_due);
    tcase_add_test(tb, token_bucket_caller_arriving_during_a_reservation_queues_behind_it);
    tcase_add_test(tb, token_bucket_waiter_whose_tokens_are_not_due_in_time_returns_at_once);
    tcase_add_test(tb, token_bucket_rule_wait_reserves_for_a_plain_acquire);
    tcase_add_checked_fixture(tb, NULL, teardown);
    suite_add_tcase(s, tb);

    TCase *gc = tcase_create("gcra");
    tcase_add_test(gc, gcra_answers_as_redis_cell_cl_throttle_would);
    tcase_add_test(gc, gcra_denies_until_one_emission_interval_has_passed);
    tcase_add_test(gc, gcra_edge_is_exact_to_the_microsecond);
    tcase_add_test(gc, gcra_multi_permit_call_advances_the_arrival_time_by_each_permit);
    tcase_add_test(gc, gcra_more_permits_than_the_burst_never_pass);
    tcase_add_test(gc, gcra_emission_interval_is_the_window_over_the_limit_exactly);
    tcase_add_checked_fixture(gc, NULL, teardown);
    suite_add_tcase(s, gc);

    TCase *cc = tcase_create("concurrency");
    tcase_add_test(cc, concurrency_fresh_key_counts_leases_down);
    tcase_add_test(cc, concurrency_denies_until_the_oldest_lease_expires);
    tcase_add_test(cc, concurrency_lease_expires_exactly_one_window_after_it_was_taken);
    tcase_add_test(cc, concurrency_release_gives_back_the_oldest_lease_first);
    tcase_add_test(cc, concurrency_multi_permit_call_takes_all_or_nothing);
    tcase_add_test(cc, concurrency_more_permits_than_the_limit_never_pass);
    tcase_add_test(cc, concurrency_waiter_sleeps_until_a_lease_expires);
    tcase_add_test(
        cc,
        concurrency_waiter_whose_lease_is_not_due_in_time_waits_for_a_release_until_its_deadline);
    tcase_add_test(cc, concurrency_per_key_true_splits_the_limit_and_false_shares_it);
    tcase_add_checked_fixture(cc, NULL, teardown);
    suite_add_tcase(s, cc);

    TCase *pk = tcase_create("per_key");
    tcase_add_loop_test(pk, per_key_true_splits_the_limit_and_false_shares_it, 0,
                        G_N_ELEMENTS(per_key_cases));
    tcase_add_checked_fixture(pk, NULL, teardown);
    suite_add_tcase(s, pk);

    TCase *peek = tcase_create("peek");
    tcase_add_loop_test(peek, peek_consumes_nothing_and_says_whether_one_would_pass, 0,
                        G_N_ELEMENTS(peek_cases));
    tcase_add_checked_fixture(peek, NULL, teardown);
    suite_add_tcase(s, peek);

    TCase *sh = tcase_create("shadow");
    tcase_add_test(sh, shadow_mode_allows_but_the_decision_shows_the_state);
    tcase_add_test(sh, shadow_mode_denied_calls_consume_nothing);
    tcase_add_checked_fixture(sh, NULL, teardown);
    suite_add_tcase(s, sh);

    return fixture_run(s);
}
