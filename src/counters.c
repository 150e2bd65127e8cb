/* SPDX-License-Identifier: MIT */
/* Counting decisions: relaxed atomic counters and a power-of-two latency histogram. */
#include "counters.h"

#include <string.h>

#include "counter_clock.h"

#define STRIPES 8   /* a power of two */
#define LINE    128 /* a cache line, or the pair some CPUs fetch together */

__thread __attribute__((tls_model("initial-exec"))) guint sluice__sample_tick;

gint64 sluice__stats_clock_ns(void)
{
    return sluice__monotonic_ns();
}

/* The histogram slot of a duration: the smallest i with ns <= 2^i µs. */
static guint bucket_of(gint64 ns)
{
    guint64 us = (guint64)(ns + 999) / 1000; /* rounded up */
    if (us <= 1)
        return 0;
    guint i = 64 - (guint)__builtin_clzll(us - 1);
    return MIN(i, SLUICE_STATS_BUCKETS - 1);
}

/* Adds n to a counter: with an atomic add, or, when the calling thread is the only
 * one that writes it (alone), with a plain load and store (readers load it
 * atomically either way). */
static inline void add(guint64 *counter, guint64 n, gboolean alone)
{
    if (alone)
        __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static inline __attribute__((always_inline)) void count(sluice_stats *stats, gboolean alone,
                                                        sluice__outcome outcome, gboolean waited,
                                                        gint64 elapsed_ns)
{
    switch (outcome) {
    case SLUICE__OUTCOME_ALLOWED:
        add(&stats->allowed, 1, alone);
        break;
    case SLUICE__OUTCOME_BLOCKED:
        add(&stats->blocked, 1, alone);
        G_GNUC_FALLTHROUGH;
    case SLUICE__OUTCOME_DENIED:
        add(&stats->denied, 1, alone);
        break;
    case SLUICE__OUTCOME_SHADOW_DENIED:
        add(&stats->shadow_denied, 1, alone);
        break;
    case SLUICE__OUTCOME_ERROR:
        add(&stats->errors, 1, alone);
        break;
    }
    if (waited)
        add(&stats->waited, 1, alone);
    if (elapsed_ns >= 0) {
        add(&stats->latency_ns_sum, (guint64)elapsed_ns, alone);
        add(&stats->latency[bucket_of(elapsed_ns)], 1, alone);
    }
}

static inline guint64 load(const guint64 *counter)
{
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

void sluice__stats_read(const sluice_stats *stats, sluice_stats *out)
{
    out->allowed = load(&stats->allowed);
    out->denied = load(&stats->denied);
    out->shadow_denied = load(&stats->shadow_denied);
    out->errors = load(&stats->errors);
    out->waited = load(&stats->waited);
    out->degraded = load(&stats->degraded);
    out->cached_denied = load(&stats->cached_denied);
    out->prefetched = load(&stats->prefetched);
    out->blocked = load(&stats->blocked);
    out->latency_ns_sum = load(&stats->latency_ns_sum);
    for (guint i = 0; i < SLUICE_STATS_BUCKETS; i++)
        out->latency[i] = load(&stats->latency[i]);
    out->adaptive_limit = 0; /* a gauge, not counted here: sluice_stats_get reads it */
}

struct sluice__counters {
    struct {
        sluice_stats stats;
        guint64 refused[1 + SLUICE__MAX_BANDS]; /* per band of the rule, by position */
    } __attribute__((aligned(LINE))) stripes[STRIPES];
};

#define SHARED (STRIPES - 1) /* the stripe of threads that have none to themselves */

static guint owned; /* atomic: bit i set: stripe i is a thread's own */
/* The calling thread's stripe plus one (0: not chosen yet). */
static __thread __attribute__((tls_model("initial-exec"))) guint my_stripe;

/* At a thread's exit: its stripe is free for the next thread; what it still
 * counts (in later exit handlers) goes to the shared stripe. */
static void give_back(gpointer stripe)
{
    __atomic_fetch_and(&owned, ~(1u << (GPOINTER_TO_UINT(stripe) - 1)), __ATOMIC_RELEASE);
    my_stripe = SHARED + 1;
}

static GPrivate owner = G_PRIVATE_INIT(give_back);

/* A free stripe of the thread's own, or the shared one. */
static guint choose_stripe(void)
{
    guint seen = __atomic_load_n(&owned, __ATOMIC_RELAXED);
    for (guint i = 0; i < SHARED; i++) {
        while (!(seen & (1u << i))) {
            /* acquire: the counts of the thread that gave it back are seen */
            if (__atomic_compare_exchange_n(&owned, &seen, seen | (1u << i), FALSE,
                                            __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
                g_private_set(&owner, GUINT_TO_POINTER(i + 1));
                return i;
            }
        }
    }
    return SHARED;
}

/* The calling thread's stripe; *alone: its own. */
static inline guint stripe_index(gboolean *alone)
{
    if (G_UNLIKELY(my_stripe == 0))
        my_stripe = choose_stripe() + 1;
    *alone = my_stripe - 1 != SHARED;
    return my_stripe - 1;
}

static inline sluice_stats *mine(sluice__counters *counters, gboolean *alone)
{
    return &counters->stripes[stripe_index(alone)].stats;
}

sluice__counters *sluice__counters_new(void)
{
    return g_aligned_alloc0(1, sizeof(sluice__counters), LINE);
}

void sluice__counters_free(sluice__counters *counters)
{
    g_aligned_free(counters);
}

void sluice__counters_count(sluice__counters *counters, sluice__outcome outcome, gboolean waited,
                            gint64 elapsed_ns)
{
    gboolean alone;
    sluice_stats *stats = mine(counters, &alone);
    count(stats, alone, outcome, waited, elapsed_ns);
}

void sluice__counters_degraded(sluice__counters *counters)
{
    gboolean alone;
    sluice_stats *stats = mine(counters, &alone);
    add(&stats->degraded, 1, alone);
}

void sluice__counters_in_process(sluice__counters *counters, gboolean prefetched)
{
    gboolean alone;
    sluice_stats *stats = mine(counters, &alone);
    add(prefetched ? &stats->prefetched : &stats->cached_denied, 1, alone);
}

void sluice__counters_read(const sluice__counters *counters, sluice_stats *out)
{
    memset(out, 0, sizeof *out);
    for (guint i = 0; i < STRIPES; i++) {
        sluice_stats s;
        sluice__stats_read(&counters->stripes[i].stats, &s);
        const guint64 *from = (const guint64 *)&s;
        guint64 *to = (guint64 *)out;
        for (gsize k = 0; k < sizeof s / sizeof(guint64); k++)
            to[k] += from[k];
    }
}

void sluice__counters_refused(sluice__counters *counters, guint refused)
{
    gboolean alone;
    guint64 *by_band = counters->stripes[stripe_index(&alone)].refused;
    /* atomic even in a stripe of one's own: a reload moves these (move_refused) */
    for (; refused; refused &= refused - 1)
        add(&by_band[__builtin_ctz(refused)], 1, FALSE);
}

void sluice__counters_read_refused(const sluice__counters *counters,
                                   guint64 out[1 + SLUICE__MAX_BANDS])
{
    for (guint b = 0; b < 1 + SLUICE__MAX_BANDS; b++) {
        out[b] = 0;
        for (guint i = 0; i < STRIPES; i++)
            out[b] += load(&counters->stripes[i].refused[b]);
    }
}

/* TRUE when band i of a and band j of b are one band: the same limit, window,
 * burst and kind (enforced or shadow). */
static gboolean same_band(const sluice__rule *a, guint i, const sluice__rule *b, guint j)
{
    sluice__band x = sluice__rule_band(a, i), y = sluice__rule_band(b, j);
    return x.limit == y.limit && x.window_us == y.window_us && x.burst == y.burst &&
           (i > a->n_bands) == (j > b->n_bands);
}

void sluice__counters_move_refused(sluice__counters *counters, const sluice__rule *from,
                                   const sluice__rule *to)
{
    guint n_from = from ? sluice__rule_bands(from) : 0, n_to = sluice__rule_bands(to);
    for (guint s = 0; s < STRIPES; s++) {
        guint64 *refused = counters->stripes[s].refused, was[1 + SLUICE__MAX_BANDS];
        for (guint i = 0; i < G_N_ELEMENTS(was); i++)
            was[i] = __atomic_exchange_n(&refused[i], 0, __ATOMIC_RELAXED);
        for (guint j = 0; j < n_to; j++)
            for (guint i = 0; i < n_from; i++)
                if (same_band(from, i, to, j))
                    add(&refused[j], was[i], FALSE);
    }
}
