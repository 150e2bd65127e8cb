/* SPDX-License-Identifier: MIT */
/* The controllers of algorithm = adaptive (src/adaptive/), on an injected clock: each
 * formula's exact answers, and each controller against a simulated downstream (a
 * pool of C slots, each call holding one for a fixed time, the rest queueing in
 * order) for growth, decrease, floor and ceiling, and the known failure modes of
 * such limiters: steady timeouts with no latency variance pushing the limit to its
 * maximum (concurrency-limits#137), dropped calls reporting near-zero latency and
 * causing more drops (#176), measurement windows that refuse healthy calls
 * (envoy#8337), and a limit that creeps up under a steady queue (Gradient2). */
#include "fixture.h"

#include <math.h>

#include "adaptive/baseline.h"
#include "adaptive/controller.h"
#include "adaptive/in_flight.h"
#include "adaptive/window.h"

#define MS G_GINT64_CONSTANT(1000000)
#define S  (1000 * MS)

/* ==== the formulas ================================================================ */

static sluice__window_view view(gint64 latency_ms, gint64 base_ms, gint64 in_flight, guint drops)
{
    return (sluice__window_view){latency_ms * MS, base_ms * MS, in_flight, drops};
}

#define ck_next(fn, limit, v, expected)                                                            \
    do {                                                                                           \
        sluice__window_view v_ = (v);                                                              \
        ck_assert_double_eq_tol(fn((limit), &v_), (expected), 1e-9);                               \
    } while (0)

/* A queue (g < 1) takes the limit half way to limit x g. */
static double shrink(double limit, double g)
{
    return limit + (limit * g - limit) / 2;
}

START_TEST(gradient_formula)
{
    /* g = 1.1 x base / latency, within 0.5 .. 1 */
    /* no queue (g = 1), in use: limit + sqrt(limit) */
    ck_next(sluice__gradient_next, 16, view(10, 10, 16, 0), 20);
    ck_next(sluice__gradient_next, 16, view(11, 10, 8, 0), 20); /* 1.1 x base: still 1 */
    ck_next(sluice__gradient_next, 9, view(10, 12, 9, 0), 12);  /* faster than base */
    /* ... not in use (most in flight < limit / 2): no growth */
    ck_next(sluice__gradient_next, 16, view(10, 10, 7, 0), 16);
    /* a queue: half way to limit x g, not in use or not */
    ck_next(sluice__gradient_next, 16, view(12, 10, 8, 0), shrink(16, 11.0 / 12));
    ck_next(sluice__gradient_next, 16, view(12, 10, 2, 0), shrink(16, 11.0 / 12));
    ck_next(sluice__gradient_next, 36, view(25, 20, 36, 0), shrink(36, 0.88));
    ck_next(sluice__gradient_next, 16, view(16, 10, 16, 0), 13.5);
    ck_next(sluice__gradient_next, 16, view(20, 10, 16, 0), shrink(16, 0.55));
    /* four times base: g stops at 0.5 */
    ck_next(sluice__gradient_next, 16, view(40, 10, 16, 0), 12);
    ck_next(sluice__gradient_next, 5, view(12, 8, 5, 0), shrink(5, 1.1 * 8 / 12));
    /* a drop: half way to half the limit */
    ck_next(sluice__gradient_next, 16, view(10, 10, 16, 1), 12);
    ck_next(sluice__gradient_next, 16, view(0, 0, 0, 3), 12);
    /* nothing measured: unchanged */
    ck_next(sluice__gradient_next, 16, view(0, 10, 16, 0), 16);
    ck_next(sluice__gradient_next, 16, view(10, 0, 16, 0), 16);
}
END_TEST

START_TEST(vegas_formula)
{
    /* limit 20: lg = 1, alpha 3, beta 6; queue = ceil(20 x (1 - base / latency)) */
    ck_next(sluice__vegas_next, 20, view(10, 10, 20, 0), 26);    /* queue 0: + 6 lg */
    ck_next(sluice__vegas_next, 20, view(11, 10, 20, 0), 21);    /* queue ceil(1.82) = 2 < 3 */
    ck_next(sluice__vegas_next, 20, view(20, 10, 20, 0), 19);    /* queue 10 > 6: - lg */
    ck_next(sluice__vegas_next, 20, view(13, 10, 20, 0), 20);    /* queue ceil(4.6) = 5 */
    ck_next(sluice__vegas_next, 20, view(10, 10, 9, 0), 20);     /* not in use */
    ck_next(sluice__vegas_next, 20, view(10, 10, 20, 1), 19);    /* a drop: - lg */
    ck_next(sluice__vegas_next, 150, view(10, 10, 150, 2), 148); /* lg = 2 */
    /* limit 150, queue ceil(150 x 0.0625) = 10: in (3 lg, 6 lg] = (6, 12]: unchanged */
    ck_next(sluice__vegas_next, 150, view(16, 15, 150, 0), 150);
    /* queue ceil(150 x 0.0323) = 5: < 3 lg = 6: + lg */
    ck_next(sluice__vegas_next, 150, view(31, 30, 150, 0), 152);
}
END_TEST

START_TEST(aimd_formula)
{
    ck_next(sluice__aimd_next, 20, view(10, 10, 20, 0), 21); /* in use: + 1 */
    ck_next(sluice__aimd_next, 20, view(10, 10, 10, 0), 21); /* half of it is in use */
    ck_next(sluice__aimd_next, 20, view(10, 10, 9, 0), 20);  /* not in use */
    ck_next(sluice__aimd_next, 20, view(10, 10, 20, 1), 18); /* a drop: floor(20 x 0.9) */
    ck_next(sluice__aimd_next, 20, view(21, 10, 20, 0), 18); /* a timeout: over 2 x base */
    ck_next(sluice__aimd_next, 20, view(20, 10, 20, 0), 21); /* 2 x base is not one */
    ck_next(sluice__aimd_next, 5, view(10, 10, 5, 1), 4);    /* min(4, floor(4.5)) */
    ck_next(sluice__aimd_next, 2, view(10, 10, 2, 1), 1);
    ck_next(sluice__aimd_next, 7.6, view(10, 10, 7, 0), 8); /* whole limits */
}
END_TEST

START_TEST(window_keeps_the_median_and_closes_after_its_length_and_ten_calls)
{
    sluice__window w;
    sluice__window_init(&w, 42);
    sluice__window_open(&w, 0, 0);
    /* 100 ms, up to 15% longer */
    ck_assert_int_ge(w.end_ns, SLUICE__WINDOW_MIN_NS);
    ck_assert_int_le(w.end_ns, SLUICE__WINDOW_MIN_NS * 115 / 100);
    for (int i = 0; i < 9; i++)
        sluice__window_add(&w, (9 - i) * MS, i + 1);
    ck_assert(!sluice__window_due(&w, 10 * S)); /* 9 calls */
    sluice__window_add(&w, -1, 3);              /* a drop counts as a call, not a latency */
    ck_assert(!sluice__window_due(&w, w.end_ns - 1));
    ck_assert(sluice__window_due(&w, w.end_ns));
    ck_assert_int_eq(w.samples, 9);
    ck_assert_int_eq(w.drops, 1);
    ck_assert_int_eq(w.max_in_flight, 9);
    ck_assert_int_eq(sluice__window_median(&w), 5 * MS); /* of 1..9 ms */

    /* a long window: twice the last median */
    sluice__window_open(&w, 1 * S, 80 * MS);
    ck_assert_int_ge(w.end_ns, 1 * S + 160 * MS);
    ck_assert_int_le(w.end_ns, 1 * S + 160 * MS * 115 / 100);
    ck_assert_int_eq(sluice__window_median(&w), 0);

    /* 100 000 calls: a uniform sample of 128 keeps the median near the true one */
    for (gint64 i = 0; i < 100000; i++)
        sluice__window_add(&w, (i * 7919) % 100000, 1);
    gint64 median = sluice__window_median(&w);
    ck_assert_int_ge(median, 35000);
    ck_assert_int_le(median, 65000);
}
END_TEST

START_TEST(windows_of_other_seeds_close_apart)
{
    sluice__window a, b;
    sluice__window_init(&a, 1);
    sluice__window_init(&b, 2);
    guint apart = 0;
    for (int i = 0; i < 20; i++) {
        sluice__window_open(&a, 0, 0);
        sluice__window_open(&b, 0, 0);
        apart += a.end_ns != b.end_ns;
    }
    ck_assert_uint_ge(apart, 19);
}
END_TEST

START_TEST(baseline_is_the_least_median_and_rises_only_at_the_floor)
{
    sluice__baseline b = {0, 0};
    sluice__baseline_update(&b, 10 * MS, 9, 0, FALSE); /* too few calls */
    ck_assert_int_eq(b.ns, 0);
    sluice__baseline_update(&b, 10 * MS, 10, 0, FALSE);
    ck_assert_int_eq(b.ns, 10 * MS);
    sluice__baseline_update(&b, 8 * MS, 50, 0, FALSE);
    ck_assert_int_eq(b.ns, 8 * MS);
    for (int i = 0; i < 100; i++) /* a queue, however long, does not move it */
        sluice__baseline_update(&b, 30 * MS, 50, 0, FALSE);
    ck_assert_int_eq(b.ns, 8 * MS);
    /* at the floor, 5 windows in a row: the downstream itself is slower */
    for (int i = 0; i < SLUICE__BASELINE_REBASE - 1; i++)
        sluice__baseline_update(&b, 30 * MS, 50, 0, TRUE);
    sluice__baseline_update(&b, 30 * MS, 50, 1, TRUE); /* a drop breaks the run */
    ck_assert_int_eq(b.ns, 8 * MS);
    for (int i = 0; i < SLUICE__BASELINE_REBASE - 1; i++)
        sluice__baseline_update(&b, 30 * MS, 50, 0, TRUE);
    ck_assert_int_eq(b.ns, 8 * MS);
    sluice__baseline_update(&b, 30 * MS, 50, 0, TRUE);
    ck_assert_int_eq(b.ns, 30 * MS);
}
END_TEST

/* ==== a simulated downstream ====================================================== */

#define MAX_CALLERS 64
#define MAX_SLOTS   128

/* `callers` callers call as fast as they are let through; a refused caller tries
 * again after retry_ns. The downstream serves `capacity` calls at once, each for
 * hold_ns (times 1 +- noise, at random), the others wait in order. */
typedef struct {
    sluice__adaptive *a;
    int callers, capacity;
    gint64 hold_ns, retry_ns;
    double noise;
    /* what calls end as: every drop_every-th call is dropped after 100 µs (0:
     * none); with timeout_ns every call is dropped after that long instead */
    int drop_every;
    gint64 timeout_ns;
    /* state */
    gint64 now;
    gint64 free_at[MAX_SLOTS];
    struct {
        gint64 next, admitted_at;
        gboolean in_call, dropped;
    } caller[MAX_CALLERS];
    GRand *rand;
    guint64 calls;
    /* measured since sim_measure */
    guint64 admitted, refused;
    gint64 least, most; /* limit */
    GArray *latencies;  /* gint64 ns of calls that returned ok */
} sim;

static void sim_clear(sim *s)
{
    sluice__adaptive_free(s->a);
    g_rand_free(s->rand);
    g_array_unref(s->latencies);
}

static void sim_measure(sim *s)
{
    s->admitted = s->refused = 0;
    s->least = G_MAXINT64;
    s->most = 0;
    g_array_set_size(s->latencies, 0);
}

/* A simulation of `callers` callers on a downstream of `capacity` slots, each call
 * holding one 5 ms, under a limit of min_limit .. max_limit set by `controller`. */
static void sim_setup(sim *s, sluice__controller controller, gint64 min_limit, gint64 max_limit,
                      guint64 seed, int callers, int capacity)
{
    *s = (sim){0};
    s->a = sluice__adaptive_new(seed);
    sluice__adaptive_configure(s->a, s, min_limit, max_limit, controller);
    s->rand = g_rand_new_with_seed((guint32)seed);
    s->latencies = g_array_new(FALSE, FALSE, sizeof(gint64));
    s->callers = callers;
    s->capacity = capacity;
    s->hold_ns = s->retry_ns = 5 * MS;
    sim_measure(s);
}

/* Caller i calls at s->now. */
static void sim_call(sim *s, int i)
{
    gint64 limit, in_flight;
    if (!sluice__adaptive_admit(s->a, 1, &limit, &in_flight)) {
        s->refused++;
        s->caller[i].next = s->now + s->retry_ns;
        return;
    }
    s->admitted++;
    s->caller[i].in_call = TRUE;
    s->caller[i].admitted_at = s->now;
    s->caller[i].dropped = FALSE;
    s->calls++;
    if (s->timeout_ns > 0 || (s->drop_every > 0 && s->calls % (guint64)s->drop_every == 0)) {
        s->caller[i].dropped = TRUE;
        s->caller[i].next = s->now + (s->timeout_ns > 0 ? s->timeout_ns : 100000);
        return;
    }
    int slot = 0;
    for (int k = 1; k < s->capacity; k++)
        if (s->free_at[k] < s->free_at[slot])
            slot = k;
    gint64 hold = s->hold_ns;
    if (s->noise > 0)
        hold = (gint64)((double)hold * g_rand_double_range(s->rand, 1 - s->noise, 1 + s->noise));
    gint64 start = MAX(s->now, s->free_at[slot]);
    s->free_at[slot] = start + hold;
    s->caller[i].next = start + hold;
}

/* Runs the callers until `until` (ns). */
static void sim_run(sim *s, gint64 until)
{
    for (;;) {
        int i = 0;
        for (int k = 1; k < s->callers; k++)
            if (s->caller[k].next < s->caller[i].next)
                i = k;
        if (s->caller[i].next >= until)
            break;
        s->now = s->caller[i].next;
        if (s->caller[i].in_call) {
            s->caller[i].in_call = FALSE;
            gint64 latency = s->now - s->caller[i].admitted_at;
            if (s->caller[i].dropped) {
                sluice__adaptive_end(s->a, 1, SLUICE__CALL_DROPPED, latency, s->now);
            } else {
                sluice__adaptive_end(s->a, 1, SLUICE__CALL_OK, latency, s->now);
                g_array_append_val(s->latencies, latency);
            }
            gint64 limit = sluice__adaptive_limit(s->a);
            s->least = MIN(s->least, limit);
            s->most = MAX(s->most, limit);
        }
        sim_call(s, i);
    }
    s->now = until;
}

static gint compare_ns(gconstpointer a, gconstpointer b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
    return x < y ? -1 : x > y;
}

/* The median latency of the calls that returned ok since sim_measure. */
static gint64 sim_p50(sim *s)
{
    g_array_sort(s->latencies, compare_ns);
    return s->latencies->len ? g_array_index(s->latencies, gint64, s->latencies->len / 2) : 0;
}

static const char *controller_name(int c)
{
    return sluice__controller_names[c];
}

/* ==== growth, decrease, floor, ceiling ============================================ */

/* Nothing queues (a downstream far wider than the ceiling): the limit grows from its
 * floor to its ceiling and never past it. */
START_TEST(grows_to_the_ceiling_when_nothing_queues)
{
    sim s;
    sim_setup(&s, _i, 1, 32, 7, 64, 128);
    ck_assert_int_eq(sluice__adaptive_limit(s.a), 1); /* it starts at the floor */
    sim_run(&s, 10 * S);
    ck_assert_msg(sluice__adaptive_limit(s.a) == 32, "%s: limit %" G_GINT64_FORMAT,
                  controller_name(_i), sluice__adaptive_limit(s.a));
    ck_assert_int_le(s.most, 32);
    sim_measure(&s);
    sim_run(&s, 60 * S);
    ck_assert_int_eq(s.least, 32);
    ck_assert_int_eq(s.most, 32);
    sim_clear(&s);
}
END_TEST

/* The downstream serves 8 at once, then 4 (each call 5 ms +- 10%): the limit settles
 * above 8, then follows the drop within a few seconds. Each controller settles where
 * its formula says (docs/algorithms.md): gradient between 1.1 C and 1.1 C + sqrt(1.1
 * C); vegas where the queue, limit - C, is within 3..6; aimd below 2C + 1, where the
 * latency passes twice the no-load one. */
START_TEST(follows_the_downstream_down)
{
    static const struct {
        gint64 low8, high8, low4, high4;
    } settles[] = {
        {8, 12, 4, 7},   /* gradient: 1.1 C .. 1.1 C + sqrt(1.1 C) */
        {11, 14, 7, 10}, /* vegas: C + 3..6 */
        {12, 17, 6, 9},  /* aimd: up to 2C + 1 */
    };
    sim s;
    sim_setup(&s, _i, 1, 200, 11, 64, 8);
    s.noise = 0.1;
    sim_run(&s, 5 * S);
    sim_measure(&s);
    sim_run(&s, 15 * S);
    ck_assert_msg(s.least >= settles[_i].low8 && s.most <= settles[_i].high8,
                  "%s at C = 8: %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT, controller_name(_i),
                  s.least, s.most);
    /* throughput: at least 0.8 of what 8 slots of 5 ms serve */
    ck_assert_uint_ge(s.admitted, 8 * 200 * 10 * 8 / 10);
    s.capacity = 4;
    sim_run(&s, 18 * S); /* three seconds to follow */
    sim_measure(&s);
    sim_run(&s, 28 * S);
    ck_assert_msg(s.least >= settles[_i].low4 && s.most <= settles[_i].high4,
                  "%s at C = 4: %" G_GINT64_FORMAT "..%" G_GINT64_FORMAT, controller_name(_i),
                  s.least, s.most);
    ck_assert_uint_ge(s.admitted, 4 * 200 * 10 * 8 / 10);
    sim_clear(&s);
}
END_TEST

/* Every call is dropped: the limit falls to its floor and stays there, never below. */
START_TEST(falls_to_the_floor_and_no_lower)
{
    sim s;
    sim_setup(&s, _i, 3, 64, 13, 64, 128);
    sim_run(&s, 10 * S); /* grown */
    ck_assert_int_ge(sluice__adaptive_limit(s.a), 30);
    s.drop_every = 1;
    sim_measure(&s);
    sim_run(&s, 60 * S);
    ck_assert_int_eq(s.least, 3);
    ck_assert_int_eq(sluice__adaptive_limit(s.a), 3);
    sim_clear(&s);
}
END_TEST

/* ==== the failure modes =========================================================== */

/* concurrency-limits#137: the downstream is overloaded by others and every call times
 * out after exactly 5 s. A limit that reads only the latency's variance sees none and
 * grows to its maximum; here timeouts are drops, and the limit falls to its floor. */
START_TEST(steady_timeouts_push_the_limit_down_not_up)
{
    sim s;
    sim_setup(&s, _i, 1, 100, 17, 64, 32);
    sim_run(&s, 10 * S);
    gint64 before = sluice__adaptive_limit(s.a);
    ck_assert_int_ge(before, 32);
    s.timeout_ns = 5 * S;
    sim_measure(&s);
    sim_run(&s, 600 * S);
    ck_assert_int_le(s.most, before);
    ck_assert_int_eq(sluice__adaptive_limit(s.a), 1);
    sim_clear(&s);
}
END_TEST

/* concurrency-limits#176: half the calls are dropped at once (100 µs). Were their
 * latency samples, the no-load latency would fall to 100 µs, every call that
 * returns would look queued, and the limit would collapse. Drops are not samples:
 * the no-load latency stays the calls' own 5 ms, and once the drops stop the limit
 * grows back. */
START_TEST(dropped_calls_are_not_latency_samples)
{
    sim s;
    sim_setup(&s, _i, 1, 64, 19, 64, 128);
    s.drop_every = 2;
    sim_run(&s, 30 * S);
    ck_assert_int_eq(sluice__adaptive_base_ns(s.a), 5 * MS);
    s.drop_every = 0;
    sim_run(&s, 60 * S);
    ck_assert_int_eq(sluice__adaptive_base_ns(s.a), 5 * MS);
    ck_assert_int_eq(sluice__adaptive_limit(s.a), 64);
    sim_clear(&s);
}
END_TEST

/* envoy#8337: Envoy measures the no-load latency by pinning the limit to its floor for
 * a while, refusing healthy calls each time. Here nothing pins the limit: 6 callers on
 * a downstream of 16 slots, once the limit has grown past them, are never refused in
 * ten minutes, and the limit never falls below what they use. */
START_TEST(healthy_calls_are_never_refused_to_measure)
{
    sim s;
    sim_setup(&s, _i, 1, 64, 23, 6, 16);
    s.noise = 0.1;
    sim_run(&s, 10 * S);
    sim_measure(&s);
    sim_run(&s, 610 * S);
    ck_assert_uint_eq(s.refused, 0);
    ck_assert_int_ge(s.least, 6);
    sim_clear(&s);
}
END_TEST

/* Under a steady queue the limit does not creep up: ten minutes on 8 slots with
 * service times +-10% at random, the last five minutes reach no higher than the
 * first five, the limit stays within 2C + 1 and the median latency within twice
 * the no-load one. */
START_TEST(does_not_creep_up_under_a_steady_queue)
{
    sim s;
    sim_setup(&s, _i, 1, 200, 29, 64, 8);
    s.noise = 0.1;
    sim_run(&s, 10 * S);
    sim_measure(&s);
    sim_run(&s, 310 * S);
    gint64 first = s.most;
    sim_measure(&s);
    sim_run(&s, 610 * S);
    ck_assert_msg(s.most <= first, "%s: %" G_GINT64_FORMAT " then %" G_GINT64_FORMAT,
                  controller_name(_i), first, s.most);
    ck_assert_int_le(s.most, 2 * 8 + 1);
    ck_assert_int_le(sim_p50(&s), 2 * 5 * MS);
    sim_clear(&s);
}
END_TEST

/* Two callers never need more than two: the limit grows only while half of it is in
 * use, so it stays small however healthy the downstream. */
START_TEST(does_not_grow_when_not_in_use)
{
    sim s;
    sim_setup(&s, _i, 1, 200, 31, 2, 128);
    sim_run(&s, 120 * S);
    ck_assert_int_le(s.most, 7);
    sim_clear(&s);
}
END_TEST

/* The limit is kept within new bounds, and a reset starts it again at the floor. */
START_TEST(configure_keeps_the_limit_within_the_bounds_and_reset_forgets)
{
    sim s;
    sim_setup(&s, SLUICE__CONTROLLER_GRADIENT, 1, 64, 37, 64, 128);
    sim_run(&s, 10 * S);
    ck_assert_int_eq(sluice__adaptive_limit(s.a), 64);
    sluice__adaptive_configure(s.a, &s, 1, 20, SLUICE__CONTROLLER_GRADIENT);
    ck_assert_int_eq(sluice__adaptive_limit(s.a), 20);
    sluice__adaptive_configure(s.a, &s, 30, 40, SLUICE__CONTROLLER_AIMD);
    ck_assert_int_eq(sluice__adaptive_limit(s.a), 30);
    sluice__adaptive_reset(s.a);
    ck_assert_int_eq(sluice__adaptive_limit(s.a), 30);
    ck_assert_int_eq(sluice__adaptive_base_ns(s.a), 0);
    sim_clear(&s);
}
END_TEST

/* Admission counts calls in flight against the limit; a peek takes nothing; a
 * give-back of more than in flight gives back what there is. */
START_TEST(admission_counts_calls_in_flight)
{
    sluice__adaptive *a = sluice__adaptive_new(1);
    sluice__adaptive_configure(a, a, 3, 10, SLUICE__CONTROLLER_GRADIENT);
    gint64 limit, in_flight;
    ck_assert(sluice__adaptive_admit(a, 2, &limit, &in_flight));
    ck_assert_int_eq(limit, 3);
    ck_assert_int_eq(in_flight, 2);
    ck_assert(sluice__adaptive_admit(a, 0, &limit, &in_flight)); /* a peek */
    ck_assert_int_eq(in_flight, 2);
    ck_assert(!sluice__adaptive_admit(a, 2, &limit, &in_flight));
    ck_assert_int_eq(in_flight, 2);
    ck_assert(sluice__adaptive_admit(a, 1, &limit, &in_flight));
    ck_assert(!sluice__adaptive_admit(a, 0, &limit, &in_flight));
    sluice__adaptive_end(a, 1, SLUICE__CALL_IGNORED, 0, 0);
    ck_assert_int_eq(sluice__adaptive_in_flight(a), 2);
    sluice__adaptive_end(a, 5, SLUICE__CALL_OK, MS, 0);
    ck_assert_int_eq(sluice__adaptive_in_flight(a), 0);
    sluice__adaptive_end(a, 0, SLUICE__CALL_DROPPED, 0, 0); /* a drop of no call */
    ck_assert_int_eq(sluice__adaptive_in_flight(a), 0);
    sluice__adaptive_free(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("adaptive_controllers");
    TCase *formulas = tcase_create("formulas");
    tcase_add_test(formulas, gradient_formula);
    tcase_add_test(formulas, vegas_formula);
    tcase_add_test(formulas, aimd_formula);
    tcase_add_test(formulas, window_keeps_the_median_and_closes_after_its_length_and_ten_calls);
    tcase_add_test(formulas, windows_of_other_seeds_close_apart);
    tcase_add_test(formulas, baseline_is_the_least_median_and_rises_only_at_the_floor);
    tcase_add_test(formulas, admission_counts_calls_in_flight);
    tcase_add_test(formulas, configure_keeps_the_limit_within_the_bounds_and_reset_forgets);
    suite_add_tcase(s, formulas);

    TCase *simulated = tcase_create("simulated");
    int n = SLUICE__CONTROLLER_AIMD + 1;
    tcase_add_loop_test(simulated, grows_to_the_ceiling_when_nothing_queues, 0, n);
    tcase_add_loop_test(simulated, follows_the_downstream_down, 0, n);
    tcase_add_loop_test(simulated, falls_to_the_floor_and_no_lower, 0, n);
    tcase_add_loop_test(simulated, steady_timeouts_push_the_limit_down_not_up, 0, n);
    tcase_add_loop_test(simulated, dropped_calls_are_not_latency_samples, 0, n);
    tcase_add_loop_test(simulated, healthy_calls_are_never_refused_to_measure, 0, n);
    tcase_add_loop_test(simulated, does_not_creep_up_under_a_steady_queue, 0, n);
    tcase_add_loop_test(simulated, does_not_grow_when_not_in_use, 0, n);
    suite_add_tcase(s, simulated);
    return fixture_run(s);
}
