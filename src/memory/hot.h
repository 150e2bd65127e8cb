/* SPDX-License-Identifier: MIT */
/* A memory store's lock-free shared state: the state of calls without a key under
 * fixed_window, sliding_window, token_bucket or gcra, behind a version word, alone
 * on its cache lines.
 *
 * A decision reads the clock, then the version, the state and the time of the last
 * admission (reading the clock again when that is later), decides on a copy, and
 * commits an admission with one CAS of the version (a denial checks the version is
 * unchanged); when another decision committed in between, it starts again on the
 * new state, at its own time unless the new admission's is later. So admissions
 * are committed in the order of their times (src/memory/order.h), and no lock is
 * held across a clock read.
 *
 * What a decision runs is inlined here (the entry points of a decision are
 * flattened: src/inlining.h); what it seldom needs is in src/memory/hot.c. */
#ifndef SLUICE_MEMORY_HOT_H
#define SLUICE_MEMORY_HOT_H

#include <glib.h>

#include "algorithm.h"
#include "clock.h"
#include "inlining.h"
#include "memory/order.h"
#include "memory/spin_wait.h"
#include "rule.h"

#define SLUICE__LINE 128 /* a cache line, or the pair some CPUs fetch together */

/* One band's state kept lock-free: the fields of sluice__state those algorithms use,
 * each read and written atomically. */
typedef struct {
    gint64 started, a, b, c, d;
} sluice__hot_band;

/* The lock-free shared state: alone on its cache lines (no false sharing). */
typedef struct {
    guint64 version;          /* even: stable; odd: being written */
    const sluice__rule *rule; /* the rule the state is laid out for (interned) */
    gint64 decided;           /* the time of the last admission committed */
    sluice__hot_band bands[1 + SLUICE__MAX_BANDS]; /* the first in the version's 64 bytes */
    guint64 generation; /* resets and reshapes: permits in hand before are void */
} __attribute__((aligned(SLUICE__LINE))) sluice__hot_state;

/* Reads what the CPU offers (PREFETCHW); called before any store is made. */
void sluice__hot_detect_cpu(void);

#if defined(__x86_64__)
extern gboolean sluice__hot_have_prefetchw; /* set once, by sluice__hot_detect_cpu */
#endif

/* Asks for the cache line at p as a write would (exclusive), so that a decision
 * that reads the shared state and then commits it with a CAS fetches the line
 * once, instead of shared for the read and again for the CAS. */
static inline void sluice__hot_prefetch_for_write(const void *p)
{
#if defined(__x86_64__)
    if (G_LIKELY(sluice__hot_have_prefetchw))
        __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#elif defined(__aarch64__)
    __asm__ volatile("prfm pstl1keep, %0" : : "Q"(*(const char *)p));
#else
    (void)p;
#endif
}

/* Acquire and release on the state's words stand for the fences of a seqlock
 * (which ThreadSanitizer does not model): a word read is read before the version
 * is checked again, and a word written is written after the version went odd. */
#define SLUICE__HOT_LOAD(x)     __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define SLUICE__HOT_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

/* Copies n bands of hot into states and into seen (what to compare them with). */
static inline __attribute__((always_inline)) void
sluice__hot_load(sluice__hot_state *hot, sluice__state *states, sluice__hot_band *seen, guint n)
{
    for (guint i = 0; i < n; i++) {
        sluice__hot_band *b = &hot->bands[i];
        seen[i] = (sluice__hot_band){SLUICE__HOT_LOAD(b->started), SLUICE__HOT_LOAD(b->a),
                                     SLUICE__HOT_LOAD(b->b), SLUICE__HOT_LOAD(b->c),
                                     SLUICE__HOT_LOAD(b->d)};
        states[i] = (sluice__state){.started = (gboolean)seen[i].started,
                                    .a = seen[i].a,
                                    .b = seen[i].b,
                                    .c = seen[i].c,
                                    .d = seen[i].d};
    }
}

/* Writes n bands of states into hot (the version held). */
static inline __attribute__((always_inline)) void
sluice__hot_store(sluice__hot_state *hot, const sluice__state *states, guint n)
{
    for (guint i = 0; i < n; i++) {
        sluice__hot_band *b = &hot->bands[i];
        SLUICE__HOT_STORE(b->started, (gint64)states[i].started);
        SLUICE__HOT_STORE(b->a, states[i].a);
        SLUICE__HOT_STORE(b->b, states[i].b);
        SLUICE__HOT_STORE(b->c, states[i].c);
        SLUICE__HOT_STORE(b->d, states[i].d);
    }
}

/* TRUE when n states are still as seen. */
static inline __attribute__((always_inline)) gboolean
sluice__hot_same(const sluice__hot_band *seen, const sluice__state *states, guint n)
{
    for (guint i = 0; i < n; i++)
        if (seen[i].started != (gint64)states[i].started || seen[i].a != states[i].a ||
            seen[i].b != states[i].b || seen[i].c != states[i].c || seen[i].d != states[i].d)
            return FALSE;
    return TRUE;
}

/* Takes the version from `seen` (even) to odd: TRUE when nothing was committed since. */
static inline gboolean sluice__hot_claim(sluice__hot_state *hot, guint64 seen)
{
    return __atomic_compare_exchange_n(&hot->version, &seen, seen + 1, FALSE, __ATOMIC_ACQ_REL,
                                       __ATOMIC_RELAXED);
}

/* Holds the version (waiting for a writer to finish); returns what it was. */
static inline guint64 sluice__hot_enter(sluice__hot_state *hot)
{
    guint spins = 0;
    for (;;) {
        guint64 v = __atomic_load_n(&hot->version, __ATOMIC_RELAXED);
        if (!(v & 1) && sluice__hot_claim(hot, v))
            return v;
        sluice__spin_wait(spins++);
    }
}

/* Lets go of the version held (sluice__hot_enter, sluice__hot_claim) at `held`. */
static inline void sluice__hot_leave(sluice__hot_state *hot, guint64 held)
{
    __atomic_store_n(&hot->version, held + 2, __ATOMIC_RELEASE);
}

/* The version of the state when no writer holds it (even), its line asked for as a
 * write would. */
static inline __attribute__((always_inline)) guint64 sluice__hot_stable(sluice__hot_state *hot,
                                                                        guint *spins)
{
    for (;;) {
        sluice__hot_prefetch_for_write(&hot->version);
        guint64 v = __atomic_load_n(&hot->version, __ATOMIC_ACQUIRE);
        if (!(v & 1))
            return v;
        sluice__spin_wait((*spins)++);
    }
}

/* Decides on the lock-free shared state (n bands), laid out for rule: FALSE (and nothing
 * decided) when it is laid out for another rule. *decided_us: the time decided at.
 *
 * The clock is read before the state, and read again only when an admission at a
 * later time was committed since: so admissions are committed in the order of
 * their times (as under a lock), and a retry after another decision committed
 * seldom reads the clock between reading the state and the CAS. */
static inline __attribute__((always_inline)) gboolean
sluice__hot_decide_n(sluice__hot_state *hot, const sluice__rule *rule, guint n, gint64 permits,
                     gint64 reserve_us, sluice__verdict *verdict, gint64 *decided_us)
{
    guint spins = 0;
    sluice__state states[1 + SLUICE__MAX_BANDS];
    sluice__hot_band seen[1 + SLUICE__MAX_BANDS];
    gint64 now = sluice__clock_now();
    for (;;) {
        guint64 v = sluice__hot_stable(hot, &spins);
        if (__atomic_load_n(&hot->rule, __ATOMIC_RELAXED) != rule)
            return FALSE;
        sluice__hot_load(hot, states, seen, n);
        if (G_UNLIKELY(now < SLUICE__HOT_LOAD(hot->decided))) /* not before that one's */
            now = sluice__memory_in_order(sluice__clock_now(), SLUICE__HOT_LOAD(hot->decided));
        sluice__decide(rule, states, now, rule->epoch ? sluice__memory_since_epoch(now) : now,
                       permits, reserve_us, verdict);
        if (sluice__hot_same(seen, states, n)) { /* nothing to store: the state must be as read */
            if (__atomic_load_n(&hot->version, __ATOMIC_RELAXED) == v)
                break;
        } else if (sluice__hot_claim(hot, v)) {
            sluice__hot_store(hot, states, n);
            SLUICE__HOT_STORE(hot->decided, now);
            sluice__hot_leave(hot, v);
            break;
        }
    }
    *decided_us = now;
    return TRUE;
}

/* sluice__hot_decide_n for a rule with bands (out of line: seldom). */
gboolean sluice__hot_decide_bands(sluice__hot_state *hot, const sluice__rule *rule, gint64 permits,
                                  gint64 reserve_us, sluice__verdict *verdict, gint64 *decided_us);

/* sluice__hot_decide_n for a gcra rule without bands, in the three steps of algorithm.h:
 * between reading the state and the CAS only a comparison and an addition, so that
 * another thread's commit seldom falls in between (which would cost this one a retry
 * and the cache line's passage). */
static inline __attribute__((always_inline)) gboolean
sluice__hot_decide_gcra(sluice__hot_state *hot, const sluice__rule *rule, gint64 permits,
                        sluice__verdict *verdict, gint64 *decided_us)
{
    guint spins = 0;
    sluice__hot_band *band = &hot->bands[0];
    sluice__gcra_plan plan;
    gint64 now = sluice__clock_now();
    sluice__gcra_plan_of(rule, now, permits, &plan);
    for (;;) {
        guint64 v = sluice__hot_stable(hot, &spins);
        if (__atomic_load_n(&hot->rule, __ATOMIC_RELAXED) != rule)
            return FALSE;
        gint64 last = SLUICE__HOT_LOAD(hot->decided);
        if (G_UNLIKELY(now < last)) { /* not before that one's */
            now = sluice__memory_in_order(sluice__clock_now(), last);
            sluice__gcra_plan_of(rule, now, permits, &plan);
        }
        sluice__span tat = sluice__gcra_tat(&plan, (gboolean)SLUICE__HOT_LOAD(band->started),
                                            SLUICE__HOT_LOAD(band->a), SLUICE__HOT_LOAD(band->b),
                                            SLUICE__HOT_LOAD(band->d));
        gboolean admitted = sluice__gcra_admits(&plan, tat);
        if (admitted && plan.consume) {
            sluice__span next = sluice__gcra_next(&plan, tat);
            if (!sluice__hot_claim(hot, v))
                continue;
            SLUICE__HOT_STORE(band->started, (gint64)TRUE);
            SLUICE__HOT_STORE(band->a, next.q);
            SLUICE__HOT_STORE(band->b, next.r);
            SLUICE__HOT_STORE(band->d, plan.l);
            SLUICE__HOT_STORE(hot->decided, now);
            sluice__hot_leave(hot, v);
        } else if (__atomic_load_n(&hot->version, __ATOMIC_RELAXED) != v) {
            continue; /* nothing to store: the state must be as read */
        }
        sluice__gcra_answer(&plan, tat, admitted, verdict);
        *decided_us = now;
        return TRUE;
    }
}

/* sluice__hot_decide_n for the rule's bands: one (no bands, the common rule) unrolled,
 * gcra in three steps. */
static inline __attribute__((always_inline)) gboolean
sluice__hot_decide(sluice__hot_state *hot, const sluice__rule *rule, gint64 permits,
                   gint64 reserve_us, sluice__verdict *verdict, gint64 *decided_us)
{
    /* both ways are common: told either is likely, GCC lays the other out of the
     * straight path, 2.5-3 ns slower */
    if (__builtin_expect_with_probability(sluice__gcra_plannable(rule), 1, 0.5))
        return sluice__hot_decide_gcra(hot, rule, permits, verdict, decided_us);
    if (G_LIKELY(sluice__rule_bands(rule) == 1))
        return sluice__hot_decide_n(hot, rule, 1, permits, reserve_us, verdict, decided_us);
    return sluice__hot_decide_bands(hot, rule, permits, reserve_us, verdict, decided_us);
}

/* Decides `permits` of a rule with prefetch from the thread's hand (src/memory/hand.h),
 * or takes the rule's prefetch from the shared state (keeping the rest in hand), or,
 * when that is refused, `permits` alone. FALSE as sluice__hot_decide. */
gboolean sluice__hot_decide_ahead(sluice__hot_state *hot, const sluice__rule *rule, gint64 permits,
                                  sluice__verdict *verdict);

/* Every band back to its start, and the permits in hand void (a reset). */
void sluice__hot_clear(sluice__hot_state *hot);

#endif
