/* SPDX-License-Identifier: MIT */
/* warmup = DURATION on token_bucket and gcra: Guava's SmoothWarmingUp with cold
 * factor 3, on an injected clock, on the memory and shm backends and on Redis (lua/). From cold a
 * caller asking as fast as it can gets warmup / (2T) permits in the first warmup, then 1/T; exact
 * answers of the first calls; cold again after idling for warmup; the edges Guava got wrong (warmup
 * = 0, guava#2730; sparse traffic that never warmed, guava#3552); what the keyfile refuses; and a
 * randomized differential test of the arithmetic against a reference in exact fractions. */
#include <string.h>

#include "algorithm.h"
#include "fixture.h"

#define S  G_GINT64_CONSTANT(1000000000)
#define MS G_GINT64_CONSTANT(1000)

typedef __int128 i128;

static const char *const algorithms[] = {"token_bucket", "gcra"};

/* Starts the clock at S and loads one rule `w` of the algorithm of loop index i. */
static void load(int i, const char *rest)
{
    fixture_clock_start(S);
    g_autofree char *keyfile =
        g_strdup_printf("[limit:w]\nalgorithm = %s\n%s", algorithms[i], rest);
    fixture_init(keyfile);
}

/* One caller asking for a permit every step_ms from `from` (a time offset) while
 * before `to`: how many were admitted. The same caller with a key (a state of the
 * per-key table, not the limit's shared one) is counted alike. */
static int caller(gint64 from_ms, gint64 to_ms, gint64 step_ms)
{
    int admitted = 0, keyed = 0;
    for (gint64 t = from_ms; t < to_ms; t += step_ms) {
        fixture_clock_set(S + t * MS);
        admitted += sluice_acquire("w", NULL, 1, NULL, NULL) == SLUICE_ALLOWED;
        keyed += sluice_acquire("w", "k", 1, NULL, NULL) == SLUICE_ALLOWED;
    }
    ck_assert_int_eq(keyed, admitted);
    return admitted;
}

/* ---- the curve --------------------------------------------------------------------- */

/* 10 per second (T = 100 ms), warmup 2 s: warmup / (2T) = 10 permits in the first 2 s,
 * their intervals 290 270 ... 110 ms (3T falling to T), then one every 100 ms. */
START_TEST(from_cold_a_caller_gets_warmup_over_2t_then_the_full_rate)
{
    load(_i, "limit = 10\nwindow = 1s\nwarmup = 2s\n");
    ck_assert_int_eq(caller(0, 2000, 1), 10);
    ck_assert_int_eq(caller(2000, 4000, 1), 20);
    ck_assert_int_eq(caller(4000, 6000, 1), 20);
    sluice_shutdown();
}
END_TEST

/* The first calls' answers, to the µs (docs/algorithms.md): the first permit from cold
 * costs 290 ms (T plus 2T (U - T) / U above it), the next 270 ms; remaining is the
 * capacity while the limit is free, else 0; reset is until free and cold again. */
START_TEST(the_first_answers_from_cold_are_exact)
{
    load(_i, "limit = 10\nwindow = 1s\nwarmup = 2s\n");
    ck_acquire("w", NULL, 0, TRUE, 10, 10, -1, 0); /* a peek: new, cold, free */
    /* stored time 2000 -> 1900 ms: cold again once free (290) and idle for 300 (3T) */
    ck_acquire("w", NULL, 1, TRUE, 10, 0, -1, 590);
    ck_acquire("w", NULL, 1, FALSE, 10, 0, 290, 590);
    ck_acquire_at(S + 289999, "w", NULL, 1, FALSE, 10, 0, 1, 301);
    ck_acquire_at(S + 290 * MS, "w", NULL, 1, TRUE, 10, 0, -1, 570); /* 270 + 300 */
    ck_acquire_at(S + 300 * MS, "w", NULL, 1, FALSE, 10, 0, 260, 560);
    /* more than the capacity never passes */
    ck_acquire("w", NULL, 11, FALSE, 10, 0, -1, 560);
    sluice_shutdown();
}
END_TEST

/* A warm-up keeps the state another way: a reload that adds one starts the limit
 * afresh, cold, and one that removes it starts afresh too, a full bucket, on every
 * backend (the memory store's shape, the shm zone's gen, on Redis the layout of the
 * key's state); adding it again starts cold again. */
START_TEST(a_reload_that_adds_or_removes_warmup_starts_afresh)
{
#define PLAIN "[sluice]\nreload = false\n[limit:w]\nalgorithm = %s\nlimit = 10\nwindow = 1s\n"
    g_autofree char *before = g_strdup_printf(PLAIN, algorithms[_i]);
    g_autofree char *warm = g_strdup_printf(PLAIN "warmup = 2s\n", algorithms[_i]);
#undef PLAIN
    g_autofree char *c0 = fixture_contents(before), *c1 = fixture_contents(warm);
    fixture_clock_start(S);
    fixture_flush();
    g_autofree char *path = fixture_write_keyfile(c0);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(sluice_acquire("w", "k", 10, NULL, NULL), SLUICE_ALLOWED);
    ck_acquire("w", "k", 1, FALSE, 10, 0, 100, 1000);
    ck_assert(g_file_set_contents(path, c1, -1, NULL));
    ck_assert_msg(sluice_reload(&error), "%s", error ? error->message : "");
    ck_acquire("w", "k", 1, TRUE, 10, 0, -1, 590); /* new and cold: free at once */
    ck_acquire("w", "k", 1, FALSE, 10, 0, 290, 590);
    ck_assert(g_file_set_contents(path, c0, -1, NULL));
    ck_assert_msg(sluice_reload(&error), "%s", error ? error->message : "");
    ck_acquire("w", "k", 10, TRUE, 10, 0, -1, 1000); /* a full bucket again */
    ck_acquire("w", "k", 1, FALSE, 10, 0, 100, 1000);
    ck_assert(g_file_set_contents(path, c1, -1, NULL));
    ck_assert_msg(sluice_reload(&error), "%s", error ? error->message : "");
    ck_acquire("w", "k", 1, TRUE, 10, 0, -1, 590); /* cold again */
    sluice_shutdown();
}
END_TEST

/* Permits taken together cost what they cost one by one: 3 from cold, 290 + 270 +
 * 250 ms. */
START_TEST(several_permits_cost_their_sum)
{
    load(_i, "limit = 10\nwindow = 1s\nwarmup = 2s\n");
    ck_acquire("w", NULL, 3, TRUE, 10, 0, -1, 810 + 300);
    ck_acquire_at(S + 809 * MS, "w", NULL, 1, FALSE, 10, 0, 1, 301);
    /* 230 210 190 170 150 130 110, then 3 below the threshold at 100 each: 1490;
     * stored time 700 ms: cold after 1300 ms idle */
    ck_acquire_at(S + 810 * MS, "w", NULL, 10, TRUE, 10, 0, -1, 1490 + 1300);
    sluice_shutdown();
}
END_TEST

/* Unused permits are stored again at 1/T: idle for warmup, the limit is cold again;
 * idle for less, part cold (1500 ms of stored time: the next permit costs 190 ms). */
START_TEST(idle_for_warmup_it_is_cold_again)
{
    load(_i, "limit = 10\nwindow = 1s\nwarmup = 2s\n");
    ck_assert_int_eq(caller(0, 6000, 1), 50); /* warm: no stored time left */
    /* the last permit at 5900, free at 6000; idle 1.5 s */
    ck_acquire_at(S + 7500 * MS, "w", NULL, 1, TRUE, 10, 0, -1, 190 + 600);
    /* free at 7690, and then idle 2 s: cold */
    ck_acquire_at(S + 9690 * MS, "w", NULL, 1, TRUE, 10, 0, -1, 590);
    ck_acquire("w", NULL, 0, FALSE, 10, 0, 290, 590);
    sluice_shutdown();
}
END_TEST

/* guava#3552: 10 per second with warmup 500 ms, and calls 120 ms apart. Guava's stored
 * permits grow back in each 100 ms gap as fast as the calls take them, so it admits
 * every other call for ever. A gap shorter than the cold interval (3T) stores permits
 * only up to the threshold: every call passes once the limit has warmed. */
START_TEST(sparse_traffic_warms_up)
{
    load(_i, "limit = 10\nwindow = 1s\nwarmup = 500ms\n");
    ck_assert_int_eq(caller(0, 720, 120), 3); /* warming: 0, 360, 600 */
    ck_assert_int_eq(caller(720, 60720, 120), 500);
    sluice_shutdown();
}
END_TEST

/* guava#2730: a warmup of 0 made Guava's limiter compute NaN and limit nothing. Here
 * warmup = 0 is no warm-up: the rule's own answers, a burst of 5 then one per 200 ms. */
START_TEST(warmup_0_is_no_warmup_and_still_limits)
{
    load(_i, "limit = 5\nwindow = 1s\nwarmup = 0\n");
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(caller(0, 1, 1), 1);
    ck_assert_int_eq(caller(0, 1, 1), 0);
    ck_assert_int_eq(caller(1, 1001, 1), 5);
    sluice_shutdown();
}
END_TEST

/* A token_bucket caller that may wait reserves its permits for when the limit is free. */
START_TEST(a_token_bucket_waiter_reserves_its_turn)
{
    fixture_clock_start(S);
    fixture_init("[limit:w]\nalgorithm = token_bucket\nlimit = 10\nwindow = 1s\nwarmup = 2s\n"
                 "wait = 1s\n");
    ck_assert_int_eq(sluice_acquire("w", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    /* the second permit's turn is at 290 ms: decided at 0, slept until then, and it
     * costs 270: free at 560, cold 300 ms later */
    ck_acquire("w", NULL, 1, TRUE, 10, 0, -1, 560 + 300);
    ck_assert_int_eq(fixture_clock_now(), S + 290 * MS);
    sluice_shutdown();
}
END_TEST

/* ---- the keyfile ------------------------------------------------------------------- */

START_TEST(the_keyfile_refuses_what_warmup_cannot_do)
{
    fixture_refused("[limit:w]\nalgorithm = gcra\nlimit = 10\nwindow = 1s\nburst = 10\n"
                    "warmup = 2s\n",
                    "[limit:w] burst = 10: not with warmup: every permit costs at least window / "
                    "limit, so nothing bursts; remove burst or warmup");
    fixture_refused("[limit:w]\nalgorithm = fixed_window\nlimit = 10\nwindow = 1s\n"
                    "warmup = 2s\n",
                    "[limit:w] warmup = 2s: applies only to token_bucket and gcra, not "
                    "fixed_window");
    fixture_refused("[limit:w]\nalgorithm = gcra\nlimit = 10\nwindow = 1s\nwarmup = 2\n",
                    "[limit:w] warmup = 2: missing unit, e.g. 2s");
    fixture_refused("[limit:w]\nalgorithm = gcra\nlimit = 10\nwindow = 1s\nwarmup = 2s\n"
                    "bands = 100/1m\n",
                    "[limit:w] warmup = 2s: not with bands or shadow_bands; expected a rule "
                    "without them");
    fixture_refused("[limit:w]\nalgorithm = gcra\nlimit = 1000000000\nwindow = 1s\n"
                    "warmup = 1h\n",
                    "[limit:w] warmup = 1h: too long for limit = 1000000000: warmup in µs × "
                    "limit must stay under 2^52 (the costs are exact); at most 4503ms");
}
END_TEST

/* ---- exact fractions --------------------------------------------------------------- */

/* The reference: the same definitions in exact fractions, on time scaled by 2L (ticks
 * of 1/(2L) µs), every cost exact but for the one rounding the definition makes (the
 * extra cost of stored time, up to the next 1/L µs), in 128-bit integers. */
typedef struct {
    gint64 l, w, u; /* the rule */
    gboolean started;
    i128 next;   /* free at, in ticks */
    i128 stored; /* stored time, in ticks: 0 .. 2UL */
} ref;

static i128 ceil_to(i128 x, i128 step)
{
    return (x + step - 1) / step * step;
}

static void ref_decide(ref *r, gint64 now_us, gint64 permits, sluice__verdict *v)
{
    i128 l = r->l, scale = 2 * l, now = (i128)now_us * scale, cold = 2 * (i128)r->u * l;
    i128 threshold = cold / 2, t = 2 * (i128)r->w; /* T in ticks: W / L µs */
    gint64 need = permits > 0 ? permits : 1;
    gboolean consume = permits > 0 && permits <= r->l;
    i128 next = r->started ? r->next : now, stored = r->started ? r->stored : cold;
    if (now > next) { /* only an admission keeps what the gap stored */
        i128 gap = now - next;
        if (gap >= cold || gap >= 3 * t)
            stored = MIN(cold, stored + gap);
        else
            stored = MAX(stored, MIN(stored + gap, threshold));
        next = now;
    }
    *v = (sluice__verdict){.limit = r->l};
    v->allowed = need <= r->l && next <= now;
    if (v->allowed && consume) {
        i128 spent = MIN(stored, need * t);
        i128 a = MAX(threshold, stored - spent), b = MAX(threshold, stored);
        /* above T per permit, spending stored time from b down to a costs the integral
         * of (4 s / U - 2) ds, 2 (b - a)(a + b - cold) / cold ticks, rounded up to
         * whole 1/L µs (2 ticks) */
        i128 extra = b > a ? 2 * (((b - a) * (a + b - cold) + cold - 1) / cold) : 0;
        next += need * t + extra;
        stored -= spent;
        r->next = next;
        r->stored = stored;
        r->started = TRUE;
    }
    gboolean free_now = next <= now;
    v->remaining = free_now ? r->l : 0;
    v->retry_after_us = v->allowed || need > r->l ? -1 : (gint64)((next - now + scale - 1) / scale);
    i128 idle = stored >= cold ? 0 : MIN(cold, MAX(3 * t, cold - stored));
    i128 busy = free_now ? 0 : next - now;
    v->reset_after_us =
        stored >= cold && free_now ? 0 : (gint64)((busy + ceil_to(idle, 2) + scale - 1) / scale);
}

/* Random rules (any rate, warmups up to what the keyfile takes) and random calls: the
 * arithmetic of src/algorithm.c answers as the reference does, field by field. */
START_TEST(the_arithmetic_matches_exact_fractions)
{
    GRand *rand = g_rand_new_with_seed(25);
    for (int round = 0; round < 2000; round++) {
        gint64 l = g_rand_int_range(rand, 1, 3) == 1 ? g_rand_int_range(rand, 1, 20)
                                                     : g_rand_int_range(rand, 1, 1000000);
        gint64 w = (gint64)g_rand_int_range(rand, 1, 100000) * 1000; /* 1 ms .. 100 s */
        gint64 most = ((G_GINT64_CONSTANT(1) << 52) - 1) / l / 1000;
        gint64 u = (gint64)g_rand_double_range(rand, 1, (double)MIN(most, 1000000)) * 1000;
        sluice__rule rule = {.algorithm = round % 2 ? SLUICE__GCRA : SLUICE__TOKEN_BUCKET,
                             .limit = l,
                             .burst = l,
                             .window_us = w,
                             .warmup_us = u,
                             .per_key = TRUE};
        sluice__state state = {0};
        ref r = {l, w, u, FALSE, 0, 0};
        gint64 now = g_rand_int_range(rand, 0, 1000000);
        for (int step = 0; step < 500; step++) {
            /* mostly soon after the limit is free, sometimes long after, some peeks */
            gint64 retry_us = 0;
            sluice__verdict want, got;
            now += g_rand_int_range(rand, 0, 4) == 0
                       ? g_rand_int_range(rand, 0, (gint32)MIN(u, G_MAXINT32))
                       : g_rand_int_range(rand, 0, 1000);
            gint64 permits = g_rand_int_range(rand, 0, 8) == 0
                                 ? 0
                                 : g_rand_int_range(rand, 1, (gint32)MIN(l, 5) + 1);
            if (g_rand_int_range(rand, 0, 50) == 0)
                permits = l + 1;
            ref_decide(&r, now, permits, &want);
            sluice__decide(&rule, &state, now, now, permits, 0, &got);
            if (got.allowed != want.allowed || got.remaining != want.remaining ||
                got.retry_after_us != want.retry_after_us ||
                got.reset_after_us != want.reset_after_us)
                ck_abort_msg("L %" G_GINT64_FORMAT " W %" G_GINT64_FORMAT " U %" G_GINT64_FORMAT
                             " step %d at %" G_GINT64_FORMAT " for %" G_GINT64_FORMAT
                             ": got %d %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
                             ", want %d %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
                             " %" G_GINT64_FORMAT,
                             l, w, u, step, now, permits, got.allowed, got.remaining,
                             got.retry_after_us, got.reset_after_us, want.allowed, want.remaining,
                             want.retry_after_us, want.reset_after_us);
            retry_us = got.retry_after_us;
            if (!got.allowed && retry_us > 0 && g_rand_boolean(rand))
                now += retry_us; /* back exactly when free */
        }
        sluice__state_clear(&state);
    }
    g_rand_free(rand);
}
END_TEST

/* The same through the API on the suite's backend (memory, or the scripts of lua/ on
 * Redis): random rules loaded from a keyfile, random calls on the injected clock,
 * every field of every answer (in ms, rounded up) as the reference's. */
START_TEST(the_backend_matches_exact_fractions_through_the_api)
{
    GRand *rand = g_rand_new_with_seed(2025);
    for (int round = 0; round < 30; round++) {
        gint64 l =
            round % 3 == 0 ? g_rand_int_range(rand, 1, 20) : g_rand_int_range(rand, 1, 1000000);
        gint64 w_ms = g_rand_int_range(rand, 1, 100000);
        gint64 most_ms = ((G_GINT64_CONSTANT(1) << 52) - 1) / l / 1000;
        gint64 u_ms = (gint64)g_rand_double_range(rand, 1, (double)MIN(most_ms, 1000000));
        g_autofree char *keyfile =
            g_strdup_printf("[limit:d]\nalgorithm = %s\nlimit = %" G_GINT64_FORMAT
                            "\nwindow = %" G_GINT64_FORMAT "ms\nwarmup = %" G_GINT64_FORMAT "ms\n",
                            algorithms[round % 2], l, w_ms, u_ms);
        fixture_clock_start(S);
        fixture_init(keyfile);
        ref r = {l, w_ms * MS, u_ms * MS, FALSE, 0, 0};
        gint64 now = S;
        for (int step = 0; step < 100; step++) {
            now += g_rand_int_range(rand, 0, 4) == 0
                       ? g_rand_int_range(rand, 0, (gint32)MIN(u_ms * MS, G_MAXINT32))
                       : g_rand_int_range(rand, 0, 1000);
            gint64 permits = g_rand_int_range(rand, 0, 8) == 0
                                 ? 0
                                 : g_rand_int_range(rand, 1, (gint32)MIN(l, 5) + 1);
            sluice__verdict want;
            ref_decide(&r, now, permits, &want);
            fixture_clock_set(now);
            sluice_decision d;
            int rc = sluice_acquire("d", NULL, permits, &d, NULL);
            gint64 retry = want.allowed ? -1 : (want.retry_after_us + 999) / 1000;
            gint64 reset = (want.reset_after_us + 999) / 1000;
            if (rc != (want.allowed ? SLUICE_ALLOWED : SLUICE_DENIED) ||
                d.remaining != want.remaining || d.retry_after_ms != retry ||
                d.reset_after_ms != reset || d.limit != l)
                ck_abort_msg(
                    "%s L %" G_GINT64_FORMAT " W %" G_GINT64_FORMAT "ms U %" G_GINT64_FORMAT
                    "ms step %d for %" G_GINT64_FORMAT ": got %d %" G_GINT64_FORMAT
                    " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT ", want %d %" G_GINT64_FORMAT
                    " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT,
                    algorithms[round % 2], l, w_ms, u_ms, step, permits, d.allowed, d.remaining,
                    d.retry_after_ms, d.reset_after_ms, want.allowed, want.remaining, retry, reset);
            if (!d.allowed && d.retry_after_ms > 0 && g_rand_boolean(rand))
                now += want.retry_after_us; /* back exactly when free */
        }
        sluice_shutdown();
    }
    g_rand_free(rand);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("warmup");
    TCase *curve = tcase_create("curve");
    tcase_add_loop_test(curve, from_cold_a_caller_gets_warmup_over_2t_then_the_full_rate, 0, 2);
    tcase_add_loop_test(curve, the_first_answers_from_cold_are_exact, 0, 2);
    tcase_add_loop_test(curve, several_permits_cost_their_sum, 0, 2);
    tcase_add_loop_test(curve, a_reload_that_adds_or_removes_warmup_starts_afresh, 0, 2);
    tcase_add_loop_test(curve, idle_for_warmup_it_is_cold_again, 0, 2);
    tcase_add_loop_test(curve, sparse_traffic_warms_up, 0, 2);
    tcase_add_loop_test(curve, warmup_0_is_no_warmup_and_still_limits, 0, 2);
    tcase_add_test(curve, a_token_bucket_waiter_reserves_its_turn);
    tcase_add_test(curve, the_keyfile_refuses_what_warmup_cannot_do);
    suite_add_tcase(s, curve);
    TCase *exact = tcase_create("exact");
    tcase_set_timeout(exact, 300);
    tcase_add_test(exact, the_arithmetic_matches_exact_fractions);
    tcase_add_test(exact, the_backend_matches_exact_fractions_through_the_api);
    suite_add_tcase(s, exact);
    return fixture_run(s);
}
