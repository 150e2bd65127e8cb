/* SPDX-License-Identifier: MIT */
/* Pins token_bucket and gcra at any rate to the exact answers docs/algorithms.md
 * defines: rates that do not divide the window, more than one permit per µs, bursts
 * of 2^50, times near 2^52 µs; no over-admission; and randomized differential
 * tests against a slow reference in exact fractions (scaled integers), of the C
 * arithmetic and of the scripts' (on Redis), a million steps or more each. */
#include <string.h>

#include <glib/gstdio.h>

#include "algorithm.h"
#include "fixture.h"
#include "redis/script.h"
#include "value.h"

#define P50 (G_GINT64_CONSTANT(1) << 50)
#define P52 (G_GINT64_CONSTANT(1) << 52)

typedef __int128 i128;

/* An assertion for loops of millions: check's ck_assert records its place at every
 * call (a write to its pipe); this one costs nothing until it fails. */
#define ck_hot(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

/* One sluice_acquire at now_us: asserts the return code and every field. */
#define ck_at(now_us, name, ...) ck_acquire_at(now_us, name, "k", __VA_ARGS__)

/* ==== the reference: the same definitions on time scaled by L (ticks of 1/L µs) ===== */

typedef struct {
    sluice__algorithm algorithm;
    gint64 l, w, b;
} ref_rule;

typedef struct {
    gboolean started;
    i128 at;       /* gcra: tat; token_bucket: last refill, in ticks */
    gint64 tokens; /* token_bucket */
} ref_state;

static gint64 ceil_div(i128 x, i128 d)
{
    return (gint64)(x >= 0 ? (x + d - 1) / d : -((-x) / d));
}

static void ref_decide(const ref_rule *r, ref_state *s, gint64 now, gint64 permits, gint64 reserve,
                       sluice__verdict *v)
{
    gint64 need = permits > 0 ? permits : 1;
    gboolean consume = permits > 0 && permits <= r->b;
    i128 n = (i128)now * r->l, w = r->w, dvt = (i128)r->b * r->w;

    if (need > r->b)
        need = r->b + 1;
    reserve = permits <= r->b ? MIN(reserve, SLUICE__MAX_RESERVE_US) : 0;
    *v = (sluice__verdict){.limit = r->b};
    if (r->algorithm == SLUICE__GCRA) {
        i128 ttl = s->started && s->at > n ? s->at - n : 0;
        i128 new_ttl = ttl + need * w;
        v->allowed = new_ttl <= dvt;
        if (v->allowed && consume) {
            s->at = n + new_ttl;
            s->started = TRUE;
            ttl = new_ttl;
        }
        v->remaining = ttl < dvt ? (gint64)((dvt - ttl) / w) : 0;
        v->reset_after_us = ceil_div(ttl, r->l);
        v->retry_after_us = v->allowed ? -1 : ceil_div(new_ttl - dvt, r->l);
    } else {
        gint64 tokens = r->b;
        i128 last = n;
        if (s->started) {
            tokens = s->tokens;
            last = s->at;
            if (tokens < r->b && n > last) {
                i128 gained = (n - last) / w;
                if (gained >= r->b - tokens) {
                    tokens = r->b;
                } else {
                    tokens += (gint64)gained;
                    last += gained * w;
                }
            }
            if (tokens >= r->b) {
                tokens = r->b;
                last = n;
            }
        }
        gint64 due = ceil_div(last + (need - tokens) * w - n, r->l);
        v->allowed = tokens >= need;
        if (!v->allowed && consume && reserve > 0 && due <= reserve) {
            v->allowed = TRUE;
            v->wait_us = due;
        }
        if (v->allowed && consume) {
            tokens -= need;
            s->tokens = tokens;
            s->at = last;
            s->started = TRUE;
        }
        v->remaining = MAX(0, tokens);
        v->reset_after_us = tokens >= r->b ? 0 : ceil_div(last + (r->b - tokens) * w - n, r->l);
        v->retry_after_us = v->allowed ? -1 : due;
    }
    if (permits > r->b) {
        v->allowed = FALSE;
        v->retry_after_us = -1;
    }
}

/* ==== exact answers at rates that do not fit whole microseconds ==================== */

static const char *rates =
    "[limit:g3000]\nalgorithm = gcra\nlimit = 3000\nwindow = 1s\nburst = 1\n"
    "[limit:g3000b]\nalgorithm = gcra\nlimit = 3000\nwindow = 1s\n"
    "[limit:tb7]\nalgorithm = token_bucket\nlimit = 7\nwindow = 1s\n"
    "[limit:tb1_3ms]\nalgorithm = token_bucket\nlimit = 1\nwindow = 3ms\n"
    "[limit:gib]\nalgorithm = token_bucket\nlimit = 1073741824\nwindow = 1s\nburst = 65536\n"
    "[limit:giga]\nalgorithm = token_bucket\nlimit = 1000000000\nwindow = 1s\nburst = 1000000\n"
    "[limit:g2p50]\nalgorithm = gcra\nlimit = 1125899906842624\nwindow = 1ms\n"
    "[limit:tbbig]\nalgorithm = token_bucket\nlimit = 1000000\nwindow = 1s\n"
    "burst = 1125899906842624\n";

START_TEST(gcra_3000_per_second_with_a_burst_of_1_admits_nothing_a_fraction_early)
{
    const gint64 s = _i ? P52 - 2000000 : 1000000; /* also near 2^52 µs */
    fixture_clock_start(s);
    fixture_init(rates);
    /* T = 333 1/3 µs, burst 1: ttl T, reset 334 µs */
    ck_at(s, "g3000", 1, TRUE, 1, 0, -1, 1);
    ck_at(s, "g3000", 1, FALSE, 1, 0, 1, 1);
    ck_at(s + 333, "g3000", 1, FALSE, 1, 0, 1, 1); /* 1/3 µs early */
    ck_at(s + 334, "g3000", 1, TRUE, 1, 0, -1, 1); /* tat 667 1/3 */
    ck_at(s + 667, "g3000", 0, FALSE, 1, 0, 1, 1);
    ck_at(s + 668, "g3000", 1, TRUE, 1, 0, -1, 1); /* tat 1001 1/3 */
    sluice_shutdown();
}
END_TEST

/* Reset (ms) of gcra 3000/s, burst 3000, when tat = s + 10^6 + j T and now = s + at
 * (T = 333 1/3 µs). */
static gint64 reset_ms_3000(gint64 j, gint64 at)
{
    return ceil_div(ceil_div((i128)3000000 + j * 1000 - 3 * (i128)at, 3), 1000);
}

START_TEST(gcra_3000_per_second_admits_permit_k_at_exactly_k_thirds_of_a_millisecond)
{
    const gint64 s = _i ? P52 - 2000000 : 1000000;
    fixture_clock_start(s);
    fixture_init(rates);
    ck_at(s, "g3000b", 3000, TRUE, 3000, 0, -1, 1000); /* tat = s + 10^6 */
    for (gint64 k = 1; k <= (fixture_on_redis() ? 100 : 3000); k++) {
        gint64 due = (k * 1000 + 2) / 3; /* ceil(k T), from s */
        ck_at(s + due - 1, "g3000b", 0, FALSE, 3000, 0, 1, reset_ms_3000(k - 1, due - 1));
        ck_at(s + due, "g3000b", 1, TRUE, 3000, 0, -1, reset_ms_3000(k, due));
    }
    sluice_shutdown();
}
END_TEST

START_TEST(token_bucket_7_per_second_refills_every_142857_1_7_microseconds)
{
    const gint64 s = _i ? P52 - 2000000 : 1000000;
    fixture_clock_start(s);
    fixture_init(rates);
    ck_at(s, "tb7", 7, TRUE, 7, 0, -1, 1000);           /* reset 7T = 1 s */
    ck_at(s, "tb7", 1, FALSE, 7, 0, 143, 1000);         /* retry T = 142 857 1/7 */
    ck_at(s + 142857, "tb7", 1, FALSE, 7, 0, 1, 858);   /* 1/7 µs early */
    ck_at(s + 142858, "tb7", 1, TRUE, 7, 0, -1, 1000);  /* last = T: reset 999 999 1/7 */
    ck_at(s + 1000000, "tb7", 6, TRUE, 7, 0, -1, 1000); /* 6 more: last = 7T = 1 s */
    ck_at(s + 1000000, "tb7", 1, FALSE, 7, 0, 143, 1000);
    ck_at(s + 2000000, "tb7", 0, TRUE, 7, 7, -1, 0);     /* full again */
    ck_at(s + 2000000, "tb1_3ms", 1, TRUE, 1, 0, -1, 3); /* 1 per 3 ms */
    ck_at(s + 2002999, "tb1_3ms", 1, FALSE, 1, 0, 1, 1);
    ck_at(s + 2003000, "tb1_3ms", 1, TRUE, 1, 0, -1, 3);
    sluice_shutdown();
}
END_TEST

START_TEST(token_bucket_of_one_gib_per_second_passes_64_kib_every_61_035_microseconds)
{
    const gint64 s = 1000000;
    fixture_clock_start(s);
    fixture_init(rates);
    /* T = 10^6 / 2^30 µs; 65536 T = 61.03515625 µs */
    ck_at(s, "gib", 65536, TRUE, 65536, 0, -1, 1);
    ck_at(s, "gib", 65536, FALSE, 65536, 0, 1, 1);
    /* at 61: floor(61 × 2^30 / 10^6) = 65498 tokens, the rest due 0.035 µs later */
    ck_at(s + 61, "gib", 65536, FALSE, 65536, 65498, 1, 1);
    ck_at(s + 62, "gib", 65536, TRUE, 65536, 0, -1, 1);
    /* 10^9 per second: 1000 tokens a µs */
    ck_at(s, "giga", 1000000, TRUE, 1000000, 0, -1, 1);
    ck_at(s + 1, "giga", 0, TRUE, 1000000, 1000, -1, 1);
    ck_at(s + 1, "giga", 1001, FALSE, 1000000, 1000, 1, 1);
    ck_at(s + 999, "giga", 999000, TRUE, 1000000, 0, -1, 1);
    sluice_shutdown();
}
END_TEST

START_TEST(a_stream_through_one_gib_per_second_never_passes_more_than_burst_plus_rate)
{
    const gint64 s = 1000000, span = fixture_on_redis() ? 500 : 1000000;
    gint64 passed = 0;
    fixture_clock_start(s);
    fixture_init(rates);
    for (gint64 t = 0; t < span; t++) { /* a call of 64 KiB every µs */
        fixture_clock_set(s + t);
        if (sluice_acquire("gib", NULL, 65536, NULL, NULL) == SLUICE_ALLOWED)
            passed += 65536;
        ck_hot(passed <= 65536 + (i128)t * 1073741824 / 1000000,
               "over the rate at %" G_GINT64_FORMAT, t);
        /* each call empties the bucket; it is full again 61.035 µs later, at the
         * next whole µs, 62 µs after: a full bucket gains nothing more */
        ck_hot(passed == 65536 * (t / 62 + 1), "%" G_GINT64_FORMAT " passed at %" G_GINT64_FORMAT,
               passed, t);
    }
    sluice_shutdown();
}
END_TEST

START_TEST(gcra_of_2_pow_50_per_millisecond_and_bursts_of_2_pow_50_are_exact)
{
    const gint64 s = _i ? P52 - 2000000 : 1000000;
    fixture_clock_start(s);
    fixture_init(rates);
    /* T = 1000 / 2^50 µs, DVT = 1000 µs */
    ck_at(s, "g2p50", P50, TRUE, P50, 0, -1, 1);
    ck_at(s + 1, "g2p50", 0, TRUE, P50, 1125899906842, -1, 1); /* floor(2^50 / 1000) */
    ck_at(s + 1, "g2p50", 1125899906842, TRUE, P50, 0, -1, 1);
    /* DVT - ttl = 624 / 2^50 µs, less than T: retry (1000 - 624) / 2^50 µs */
    ck_at(s + 1, "g2p50", 0, FALSE, P50, 0, 1, 1);
    ck_at(s + 1, "g2p50", P50 + 1, FALSE, P50, 0, -1, 1);
    /* a bucket of 2^50 at one token per µs: reset 2^50 µs */
    ck_at(s, "tbbig", P50, TRUE, P50, 0, -1, 1125899906843);
    ck_at(s + 5, "tbbig", 0, TRUE, P50, 5, -1, 1125899906843);
    ck_at(s + 5, "tbbig", 6, FALSE, P50, 5, 1, 1125899906843);
    ck_at(s + 6, "tbbig", 6, TRUE, P50, 0, -1, 1125899906843);
    sluice_shutdown();
}
END_TEST

/* ==== the keyfile takes any rate ==================================================== */

static void ck_accepted(const char *ini, gint64 capacity)
{
    sluice_decision d;
    fixture_clock_start(1000000);
    fixture_init(ini);
    ck_assert_int_eq(sluice_acquire("r", NULL, 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.limit, capacity);
    sluice_shutdown();
}

START_TEST(any_limit_over_any_window_is_accepted)
{
    ck_accepted("[limit:r]\nalgorithm = gcra\nlimit = 3000\nwindow = 1s\n", 3000);
    ck_accepted("[limit:r]\nalgorithm = gcra\nlimit = 7000\nwindow = 1s\n", 7000);
    ck_accepted("[limit:r]\nalgorithm = token_bucket\nlimit = 1125899906842624\nwindow = 1ms\n",
                P50);
    ck_accepted("[limit:r]\nalgorithm = token_bucket\nlimit = 1\nwindow = 36500d\n", 1);
    ck_accepted("[limit:r]\nalgorithm = gcra\nlimit = 999999999999\nwindow = 36500d\n",
                G_GINT64_CONSTANT(999999999999));
}
END_TEST

START_TEST(a_burst_that_would_take_more_than_36500d_to_refill_is_refused_with_the_largest)
{
    /* 36500d × 3 / 1d = 109500 */
    fixture_refused("[limit:r]\nalgorithm = gcra\nlimit = 3\nwindow = 1d\nburst = 109501\n",
                    "[limit:r] burst = 109501: too large: refilling it would take more than "
                    "36500d; at most 109500");
}
END_TEST

/* ==== over-admission: no span of time passes more than burst + rate × span ========= */

static const struct {
    const char *name;
    sluice__algorithm algorithm;
    gint64 l, w, b;
} classes[] = {
    {"g3000", SLUICE__GCRA, 3000, 1000000, 1},
    {"tb7", SLUICE__TOKEN_BUCKET, 7, 1000000, 7},
    {"tb1_3ms", SLUICE__TOKEN_BUCKET, 1, 3000, 1},
    {"gib", SLUICE__TOKEN_BUCKET, 1073741824, 1000000, 65536},
    {"giga", SLUICE__TOKEN_BUCKET, 1000000000, 1000000, 1000000},
    {"g2p50", SLUICE__GCRA, P50, 1000, P50},
    {"tbbig", SLUICE__TOKEN_BUCKET, 1000000, 1000000, P50},
};

/* For every pair of admissions at a <= b: permits admitted in [a, b] <= B + L (b - a) / W,
 * i.e. (count(b) - count(before a)) W <= B W + (b - a) L; checked as calls are admitted
 * against the smallest count(before a) W - a L so far. */
typedef struct {
    i128 lowest; /* min over admissions a of count(before a) W - a L */
    i128 count;
    gboolean any;
} ledger;

static void ledger_admit(ledger *g, gint64 l, gint64 w, gint64 b, gint64 t, gint64 n)
{
    i128 before = g->count * w - (i128)t * l;
    if (!g->any || before < g->lowest)
        g->lowest = before;
    g->any = TRUE;
    g->count += n;
    i128 after = g->count * w - (i128)t * l;
    ck_hot(after - g->lowest <= (i128)b * w, "more than burst + rate × time at %" G_GINT64_FORMAT,
           t);
}

START_TEST(no_span_of_time_passes_more_than_burst_plus_rate_times_the_span)
{
    const gint64 s = 1000000, steps = fixture_on_redis() ? 150 : 100000;
    ledger g = {0};
    GRand *rand = g_rand_new_with_seed(1234 + _i);
    gint64 t = s, l = classes[_i].l, w = classes[_i].w, b = classes[_i].b;
    /* T rounded up, at least 1 µs */
    gint64 tus = MAX(1, (gint64)(((i128)w + l - 1) / l));

    fixture_clock_start(s);
    fixture_init(rates);
    for (gint64 i = 0; i < steps; i++) {
        t += g_rand_int_range(rand, 0, 4) == 0
                 ? 0
                 : g_rand_int_range(rand, 0, (gint32)MIN(tus * 3, 100000));
        gint64 n = g_rand_int_range(rand, 0, 3) == 0 ? b : 1 + (gint64)(g_rand_double(rand) * b);
        n = MIN(n, b);
        fixture_clock_set(t);
        if (sluice_acquire(classes[_i].name, NULL, n, NULL, NULL) == SLUICE_ALLOWED)
            ledger_admit(&g, l, w, b, t, n);
    }
    ck_assert(g.count > 0);
    g_rand_free(rand);
    sluice_shutdown();
}
END_TEST

/* ==== the differential test ========================================================== */

/* A random rule: limits, windows and bursts of every class, a few at their bounds. */
static ref_rule random_rule(GRand *rand)
{
    static const gint64 limits[] = {1,
                                    2,
                                    3,
                                    7,
                                    1000,
                                    3000,
                                    7000,
                                    750000,
                                    1000000,
                                    1000000007,
                                    G_GINT64_CONSTANT(1000000000),
                                    G_GINT64_CONSTANT(1073741824),
                                    P50};
    static const gint64 windows_ms[] = {
        1,       3,        7,
        1000,    7000,     60000,
        3600000, 86400000, G_GINT64_CONSTANT(3153600000000)}; /* .. 36500d */
    ref_rule r;
    r.algorithm = g_rand_boolean(rand) ? SLUICE__GCRA : SLUICE__TOKEN_BUCKET;
    r.l = g_rand_int_range(rand, 0, 4) == 0
              ? 1 + (gint64)(g_rand_double(rand) * P50)
              : limits[g_rand_int_range(rand, 0, G_N_ELEMENTS(limits))];
    r.w = 1000 * (g_rand_int_range(rand, 0, 4) == 0
                      ? 1 + (gint64)(g_rand_double(rand) * 100000)
                      : windows_ms[g_rand_int_range(rand, 0, G_N_ELEMENTS(windows_ms))]);
    i128 most = (i128)SLUICE__MAX_DURATION_US * r.l / r.w; /* config.c's bound */
    gint64 top = (gint64)MIN(most, (i128)P50);
    if (top < 1) { /* no burst fits: slow the window down to 1 ms */
        r.w = 1000;
        top = (gint64)MIN((i128)SLUICE__MAX_DURATION_US * r.l / r.w, (i128)P50);
    }
    switch (g_rand_int_range(rand, 0, 4)) {
    case 0:
        r.b = 1;
        break;
    case 1:
        r.b = MIN(r.l, top);
        break;
    case 2:
        r.b = top;
        break;
    default:
        r.b = 1 + (gint64)(g_rand_double(rand) * top);
        r.b = MIN(r.b, top);
    }
    return r;
}

/* A random step forward: none, a µs, about T, about the window, about a refill. */
static gint64 random_step(GRand *rand, const ref_rule *r)
{
    i128 t = ((i128)r->w + r->l - 1) / r->l, full = t * r->b;
    switch (g_rand_int_range(rand, 0, 6)) {
    case 0:
        return 0;
    case 1:
        return 1;
    case 2:
        return (gint64)(g_rand_double(rand) * (double)MIN(t * 3, (i128)G_MAXINT32));
    case 3:
        return (gint64)(g_rand_double(rand) * (double)MIN(full, (i128)G_MAXINT32 * 1000));
    case 4:
        return (gint64)(g_rand_double(rand) * (double)MIN(full / 4 + 1, (i128)r->w));
    default:
        return (gint64)(t > 2 ? t - 1 + g_rand_int_range(rand, 0, 3) : 1);
    }
}

static gint64 random_permits(GRand *rand, const ref_rule *r)
{
    switch (g_rand_int_range(rand, 0, 6)) {
    case 0:
        return 0;
    case 1:
        return r->b;
    case 2:
        return r->b + 1;
    case 3: {
        gint64 few = 1 + g_rand_int_range(rand, 0, 3);
        return MIN(r->b, few);
    }
    default:
        return 1 + (gint64)(g_rand_double(rand) * (double)r->b) % r->b;
    }
}

/* The next random call: *now moves on, the permits, and for token_bucket now and
 * then a reservation of up to a window. */
/* The decimal text of v, owned by `owned` (a GPtrArray that frees with g_free). */
static const char *own_decimal(GPtrArray *owned, gint64 v)
{
    char *text = g_strdup_printf("%" G_GINT64_FORMAT, v);
    g_ptr_array_add(owned, text);
    return text;
}

static void random_call(GRand *rand, const ref_rule *r, gint64 *now, gint64 *permits,
                        gint64 *reserve)
{
    gint64 step = random_step(rand, r); /* MIN evaluates twice */
    *now = MIN(*now + step, P52);
    *permits = random_permits(rand, r);
    *reserve = r->algorithm == SLUICE__TOKEN_BUCKET && g_rand_int_range(rand, 0, 3) == 0
                   ? (gint64)(g_rand_double(rand) * (double)r->w)
                   : 0;
}

static void ck_same(const sluice__verdict *got, const sluice__verdict *want, gint64 step)
{
    ck_hot(got->allowed == want->allowed && got->limit == want->limit &&
               got->remaining == want->remaining && got->retry_after_us == want->retry_after_us &&
               got->reset_after_us == want->reset_after_us && got->wait_us == want->wait_us,
           "step %" G_GINT64_FORMAT ": got %d %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
           " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
           ", want %d %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
           " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT,
           step, got->allowed, got->limit, got->remaining, got->retry_after_us, got->reset_after_us,
           got->wait_us, want->allowed, want->limit, want->remaining, want->retry_after_us,
           want->reset_after_us, want->wait_us);
}

/* Every number a state holds stays below 2^53: lua/ computes it exactly in doubles. */
static void ck_below_2_pow_53(const sluice__state *s, const sluice__verdict *v)
{
    const gint64 top = G_GINT64_CONSTANT(1) << 53;
    ck_hot(ABS(s->a) < top && ABS(s->b) < top && ABS(s->c) < top && s->d < top,
           "state %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT,
           s->a, s->b, s->c, s->d);
    ck_hot(v->reset_after_us < top && v->retry_after_us < top && v->remaining < top,
           "an answer at or above 2^53");
}

START_TEST(the_arithmetic_matches_exact_fractions_over_millions_of_steps)
{
    GRand *rand = g_rand_new_with_seed(20261123);
    gint64 steps = 0;
    for (int rule_i = 0; rule_i < 3000; rule_i++) {
        ref_rule r = random_rule(rand);
        sluice__rule rule = {.algorithm = r.algorithm,
                             .per_key = TRUE,
                             .limit = r.l,
                             .burst = r.b,
                             .window_us = r.w};
        sluice__state state = {0};
        ref_state ref = {0};
        gint64 now = g_rand_boolean(rand) ? 1000 + g_rand_int(rand)
                                          : P52 - (G_GINT64_CONSTANT(1) << 45) - g_rand_int(rand);
        for (int i = 0; i < 1000; i++, steps++) {
            gint64 permits, reserve;
            random_call(rand, &r, &now, &permits, &reserve);
            sluice__verdict got, want;
            sluice__decide(&rule, &state, now, now, permits, reserve, &got);
            ref_decide(&r, &ref, now, permits, reserve, &want);
            ck_same(&got, &want, steps);
            ck_below_2_pow_53(&state, &got);
        }
        sluice__state_clear(&state);
    }
    ck_assert_int_eq(steps, 3000000);
    g_rand_free(rand);
}
END_TEST

/* The same comparison through the public API, on the suite's backend: the Lua scripts
 * on Redis. The reference rounds up to milliseconds as the API does. */
START_TEST(the_backend_matches_exact_fractions_through_the_api)
{
    GRand *rand = g_rand_new_with_seed(777 + _i);
    for (int rule_i = 0; rule_i < 8; rule_i++) {
        ref_rule r = random_rule(rand);
        g_autofree char *ini = g_strdup_printf(
            "[limit:r]\nalgorithm = %s\nlimit = %" G_GINT64_FORMAT "\nwindow = %" G_GINT64_FORMAT
            "ms\nburst = %" G_GINT64_FORMAT "\n",
            r.algorithm == SLUICE__GCRA ? "gcra" : "token_bucket", r.l, r.w / 1000, r.b);
        ref_state ref = {0};
        gint64 now = rule_i % 2 ? 1000 + g_rand_int(rand)
                                : P52 - (G_GINT64_CONSTANT(1) << 45) - g_rand_int(rand);
        fixture_clock_start(now);
        fixture_init(ini);
        for (int i = 0; i < (fixture_on_redis() ? 60 : 150); i++) {
            gint64 step = random_step(rand, &r); /* MIN evaluates twice */
            now = MIN(now + step, P52);
            gint64 permits = random_permits(rand, &r);
            sluice__verdict want;
            sluice_decision d;
            ref_decide(&r, &ref, now, permits, 0, &want);
            fixture_clock_set(now);
            g_autoptr(GError) error = NULL;
            int rc = sluice_acquire("r", NULL, permits, &d, &error);
            ck_assert_msg(rc != SLUICE_FAILED, "%s: %s", ini, error ? error->message : "");
            ck_assert_msg(
                d.allowed == want.allowed && d.limit == want.limit &&
                    d.remaining == want.remaining &&
                    d.retry_after_ms ==
                        (want.retry_after_us < 0 ? -1 : (want.retry_after_us + 999) / 1000) &&
                    d.reset_after_ms == (want.reset_after_us + 999) / 1000,
                "%s step %d at %" G_GINT64_FORMAT " permits %" G_GINT64_FORMAT
                ": got %d %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GINT64_FORMAT
                ", want %d %" G_GINT64_FORMAT " %" G_GINT64_FORMAT " µs %" G_GINT64_FORMAT " µs",
                ini, i, now, permits, d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms,
                want.allowed, want.remaining, want.retry_after_us, want.reset_after_us);
        }
        sluice_shutdown();
    }
    g_rand_free(rand);
}
END_TEST

/* The scripts' own arithmetic over millions of steps: lua/prelude.lua and the
 * algorithm's entries as Redis runs them, driven by a harness after the script,
 * which decides a batch of calls in one EVAL and returns every reply, which the test
 * reads as the client does (src/redis/script.c). ARGV[1] names the entry:
 * exact (any rule) or decide (the common path: T = window / limit whole). */
static char *lua_harness(const char *algorithm)
{
    g_autofree char *prelude = NULL, *script = NULL;
    g_autofree char *prelude_path = g_build_filename(SLUICE_SOURCE_DIR, "lua", "prelude.lua", NULL);
    g_autofree char *name = g_strconcat(algorithm, ".lua", NULL);
    g_autofree char *script_path = g_build_filename(SLUICE_SOURCE_DIR, "lua", name, NULL);
    ck_assert(g_file_get_contents(prelude_path, &prelude, NULL, NULL));
    ck_assert(g_file_get_contents(script_path, &script, NULL, NULL));
    gboolean tb = strcmp(algorithm, "token_bucket") == 0;
    /* per step: now, permits, reserve, then decide's ARGV before the time ('' past its
     * end: src/redis/script.c's sluice__redis_decide_args) */
    return g_strconcat(
        prelude, "\n", script,
        "local l, w, b = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"
        "local out, i = {}, 10\n"
        "while ARGV[i] do\n"
        "  local now, permits, reserve = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]\n"
        "  local a = {ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]}\n"
        "  if ARGV[1] == 'exact' then\n",
        tb ? "    out[#out + 1] = exact(KEYS, {permits, l, w, b, reserve, now})\n"
           : "    out[#out + 1] = exact(KEYS, {permits, l, w, b, now})\n",
        "  else\n",
        tb ? "    local args = {a[1], a[2], a[3], now}\n"
             "    if a[4] ~= '' then args[5] = a[4] end\n"
           : "    local args = {a[1], a[2], now}\n",
        "    out[#out + 1] = decide(KEYS, args)\n"
        "  end\n"
        "  i = i + 7\n"
        "end\n"
        "return out\n",
        NULL);
}

#define LUA_BATCH 500

/* The common path takes the rule: T a whole number of µs, (burst + 1) * T <= 2^52. */
static gboolean whole_rate(const ref_rule *r)
{
    return r->w % r->l == 0 && r->b < P52 / (r->w / r->l);
}

START_TEST(the_scripts_match_exact_fractions_over_millions_of_steps)
{
    g_autofree char *token_bucket = lua_harness("token_bucket");
    g_autofree char *gcra = lua_harness("gcra");
    redisContext *c = test_redis_connect(fixture_redis(), NULL);
    GRand *rand = g_rand_new_with_seed(20261124);
    gint64 steps = 0, common = 0;
    for (int rule_i = 0; steps < 1000000; rule_i++) {
        ref_rule r = random_rule(rand);
        static const char *const paths[] = {"exact", "decide"};
        ref_state ref[2] = {{0}, {0}};
        gint64 now = rule_i % 2 ? 1000 + g_rand_int(rand)
                                : P52 - (G_GINT64_CONSTANT(1) << 45) - g_rand_int(rand);
        for (int batch = 0; batch < 4; batch++) {
            gint64 calls[LUA_BATCH][3];
            for (int i = 0; i < LUA_BATCH; i++)
                random_call(rand, &r, &now, &calls[i][1], &calls[i][2]), calls[i][0] = now;
            /* both paths on their own keys, the same calls */
            for (int path = 0; path < (whole_rate(&r) ? 2 : 1); path++) {
                /* EVAL script 1 key, ARGV[1..9] (1: the entry; 2..4: limit, window,
                 * burst), then now, permits, reserve and decide's 4 per step */
                const int argc = 3 + 1 + 9 + 7 * LUA_BATCH;
                g_autofree const char **argv = g_new0(const char *, argc);
                g_autoptr(GPtrArray) owned = g_ptr_array_new_with_free_func(g_free);
                sluice__verdict want[LUA_BATCH];
                int n = 0;
                argv[n++] = "EVAL";
                argv[n++] = r.algorithm == SLUICE__GCRA ? gcra : token_bucket;
                argv[n++] = "1";
                g_autofree char *key = g_strdup_printf("diff:%d:%d", rule_i, path);
                argv[n++] = key;
                argv[n++] = paths[path];
                const gint64 head[8] = {r.l, r.w, r.b, 0, 0, 0, 1, 0};
                for (int i = 0; i < 8; i++)
                    argv[n++] = own_decimal(owned, head[i]);
                for (int i = 0; i < LUA_BATCH; i++) {
                    ref_decide(&r, &ref[path], calls[i][0], calls[i][1], calls[i][2], &want[i]);
                    for (int k = 0; k < 3; k++)
                        argv[n++] = own_decimal(owned, calls[i][k]);
                    gint64 args[4];
                    guint m = path == 1 ? sluice__redis_decide_args(r.algorithm, r.w / r.l, r.b,
                                                                    calls[i][1], calls[i][2], args)
                                        : 0;
                    for (guint k = 0; k < 4; k++)
                        argv[n++] = k < m ? own_decimal(owned, args[k]) : "";
                }
                redisReply *reply = redisCommandArgv(c, n, argv, NULL);
                ck_assert_msg(reply && reply->type == REDIS_REPLY_ARRAY &&
                                  reply->elements == LUA_BATCH,
                              "%s", reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "");
                for (int i = 0; i < LUA_BATCH; i++, steps++) {
                    /* read as the client reads it */
                    sluice__redis_call call = {.algorithm = r.algorithm,
                                               .entry = path == 1 ? SLUICE__LUA_DECIDE
                                                                  : SLUICE__LUA_EXACT,
                                               .capacity = r.b,
                                               .permits = calls[i][1],
                                               .t = path == 1 ? r.w / r.l : 0,
                                               .reserve_us = calls[i][2]};
                    sluice__verdict got = {0};
                    const char *why = NULL;
                    ck_hot(sluice__redis_call_verdict(&call, reply->element[i], &got, &why),
                           "step %" G_GINT64_FORMAT ": %s", steps, why);
                    ck_same(&got, &want[i], steps);
                }
                common += path == 1 ? LUA_BATCH : 0;
                freeReplyObject(reply);
            }
        }
    }
    g_printerr("check_rates: %" G_GINT64_FORMAT " steps, %" G_GINT64_FORMAT
               " of them on the common path\n",
               steps, common);
    ck_assert_int_ge(common, 200000); /* both paths, each a good share */
    g_rand_free(rand);
    redisFree(c);
}
END_TEST

/* ==== a reload that changes the limit never moves a stored time earlier ============== */

START_TEST(a_reload_to_another_limit_rounds_the_stored_time_up_to_the_next_microsecond)
{
    const gint64 s = 1000000;
    g_autofree char *first =
        fixture_contents("[limit:g]\nalgorithm = gcra\nlimit = 3\nwindow = 1s\nburst = 1\n");
    g_autofree char *second =
        fixture_contents("[limit:g]\nalgorithm = gcra\nlimit = 6\nwindow = 1s\nburst = 1\n");
    g_autofree char *path = fixture_write_keyfile(first);
    g_autoptr(GError) error = NULL;
    fixture_clock_start(s);
    fixture_init(first); /* flushes the suite's server */
    sluice_shutdown();
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    ck_at(s, "g", 1, TRUE, 1, 0, -1, 334); /* tat = 333 333 1/3 */
    /* 6 per second, T = 166 666 2/3: the tat in thirds is read as 333 334 */
    ck_assert(g_file_set_contents(path, second, -1, NULL));
    ck_assert_msg(sluice_reload(&error), "%s", error ? error->message : "");
    ck_at(s + 333333, "g", 1, FALSE, 1, 0, 1, 1);
    ck_at(s + 333334, "g", 1, TRUE, 1, 0, -1, 167);
    sluice_shutdown();
    g_unlink(path);
}
END_TEST

/* ==== states the previous layouts wrote (whole µs) are read as such, on Redis ======== */

START_TEST(states_of_the_whole_microsecond_layout_are_read_on_redis)
{
    const gint64 s = 1000000;
    fixture_clock_start(s);
    fixture_init("[limit:g]\nalgorithm = gcra\nlimit = 5\nwindow = 10s\n"
                 "[limit:tb]\nalgorithm = token_bucket\nlimit = 10\nwindow = 1s\nburst = 5\n");
    /* gcra: the tat in decimal µs, 4 s ahead: remaining floor((10 - 4) / 2) */
    freeReplyObject(test_redis_command(fixture_redis(), "SET sluice:gc:{1:g:k} %" G_GINT64_FORMAT,
                                       s + 4000000));
    ck_at(s, "g", 0, TRUE, 5, 3, -1, 4000);
    /* gcra: format byte and the tat as a little-endian double, 6 s ahead: remaining 2 */
    unsigned char tat9[9] = {1};
    double tat = (double)(s + 6000000);
    memcpy(tat9 + 1, &tat, 8); /* the test machines are little-endian */
    freeReplyObject(
        test_redis_command(fixture_redis(), "SET sluice:gc:{1:g:j} %b", tat9, sizeof tat9));
    ck_acquire_at(s, "g", "j", 0, TRUE, 5, 2, -1, 6000);
    /* token_bucket: format byte, tokens 2 and last refill now as little-endian doubles */
    unsigned char packed[17] = {1};
    double tokens = 2, last = (double)s;
    memcpy(packed + 1, &tokens, 8); /* the test machines are little-endian */
    memcpy(packed + 9, &last, 8);
    freeReplyObject(
        test_redis_command(fixture_redis(), "SET sluice:tb:{2:tb:} %b", packed, sizeof packed));
    fixture_clock_set(s);
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("tb", NULL, 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, 5, 2, -1, 300); /* 3 tokens of 100 ms */
    sluice_shutdown();
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("rates");
    TCase *exact = tcase_create("exact");
    tcase_add_loop_test(
        exact, gcra_3000_per_second_with_a_burst_of_1_admits_nothing_a_fraction_early, 0, 2);
    tcase_add_loop_test(
        exact, gcra_3000_per_second_admits_permit_k_at_exactly_k_thirds_of_a_millisecond, 0, 2);
    tcase_add_loop_test(exact, token_bucket_7_per_second_refills_every_142857_1_7_microseconds, 0,
                        2);
    tcase_add_test(exact,
                   token_bucket_of_one_gib_per_second_passes_64_kib_every_61_035_microseconds);
    tcase_add_loop_test(exact, gcra_of_2_pow_50_per_millisecond_and_bursts_of_2_pow_50_are_exact, 0,
                        2);
    tcase_add_test(exact,
                   a_reload_to_another_limit_rounds_the_stored_time_up_to_the_next_microsecond);
    if (fixture_on_redis()) /* the memory backend keeps no state across versions */
        tcase_add_test(exact, states_of_the_whole_microsecond_layout_are_read_on_redis);
    suite_add_tcase(suite, exact);

    TCase *keyfile = tcase_create("keyfile");
    tcase_add_test(keyfile, any_limit_over_any_window_is_accepted);
    tcase_add_test(keyfile,
                   a_burst_that_would_take_more_than_36500d_to_refill_is_refused_with_the_largest);
    suite_add_tcase(suite, keyfile);

    TCase *bounds = tcase_create("over_admission");
    tcase_add_test(bounds,
                   a_stream_through_one_gib_per_second_never_passes_more_than_burst_plus_rate);
    tcase_add_loop_test(bounds, no_span_of_time_passes_more_than_burst_plus_rate_times_the_span, 0,
                        G_N_ELEMENTS(classes));
    suite_add_tcase(suite, bounds);

    TCase *diff = tcase_create("differential");
    /* Each test is registered only where it does its work, so the count run is true:
     * the C arithmetic alone in the memory run (the Redis runs compare through the
     * API), the scripts alone on the suite's one server (not again through Sentinel). */
    if (!fixture_on_redis())
        tcase_add_test(diff, the_arithmetic_matches_exact_fractions_over_millions_of_steps);
    tcase_add_loop_test(diff, the_backend_matches_exact_fractions_through_the_api, 0, 4);
    if (fixture_on_redis() && !fixture_on_sentinel())
        tcase_add_test(diff, the_scripts_match_exact_fractions_over_millions_of_steps);
    suite_add_tcase(suite, diff);
    return fixture_run(suite);
}
