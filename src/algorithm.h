/* SPDX-License-Identifier: MIT */
/* The six algorithms on one key's state: pure arithmetic on a time the caller gives.
 * lua/ holds the same definitions for Redis; both must answer alike. */
#ifndef SLUICE_ALGORITHM_H
#define SLUICE_ALGORITHM_H

#include <glib.h>

#include "rule.h"

/* A run of permits that share one time: sliding_log admissions, concurrency leases. */
typedef struct {
    gint64 t;
    gint32 n;      /* at most the limit of a logged rule (SLUICE__MAX_LOGGED_PERMITS)      */
    guint32 owner; /* who took them: the shm backend's process, or 0 (anyone)              */
} sluice__run;

/* Runs oldest first, in a ring that grows by doubling and never shrinks. */
typedef struct {
    sluice__run *runs;
    guint head, len, cap;
    gint64 total; /* the sum of n */
} sluice__runs;

/* One key's state. A zeroed state is a fresh one. */
typedef struct {
    gboolean started;     /* FALSE: nothing stored yet                                   */
    gint64 a, b, c, d;    /* fixed_window: start, count; sliding_window: start, current,
                           * previous; token_bucket: tokens, last refill (µs, then the
                           * 1/d-th µs past it), d; gcra: tat (µs, 1/d-ths), -, d      */
    sluice__runs log;     /* sliding_log: admissions; concurrency: lease expiries         */
    gint64 idle_at;       /* from this time on the state is back to full capacity        */
    gint64 blocked_until; /* a key's first state: a block (sluice_block) denies every
                           * call before this time; 0: none                         */
    guint32 owner;        /* stamped on the runs an admission adds; a release gives back
                           * this owner's runs first (0 on the memory backend: anyone's) */
} sluice__state;

/* The answer of one decision, in microseconds. */
typedef struct {
    gboolean allowed;
    gint64 limit;           /* capacity                                        */
    gint64 remaining;       /* permits that could still pass now               */
    gint64 retry_after_us;  /* -1 when allowed or never                        */
    gint64 reset_after_us;  /* until back to full capacity                     */
    gint64 wait_us;         /* > 0: admitted on reservation, due after this    */
    gint64 leased;          /* concurrency permits taken, to be given back     */
    gboolean shadow_denied; /* admitted, but a shadow band would have refused  */
    guint refused;          /* bit i: band i refused (rule with bands): when denied,
                             * the enforced bands that refused; when admitted, the
                             * shadow bands that would have; 0 without bands      */
    gboolean blocked;       /* denied by a block (sluice_block, an override's
                             * `blocked`), not by the algorithm                   */
    gboolean aging;         /* a remote backend's denial that carries the state it was
                             * decided on, relative to its time, for the denial cache
                             * to age it exactly (docs/algorithms.md): gcra tat - now
                             * (µs, then 1/limit-ths); token_bucket tokens, now - last
                             * refill (likewise); sliding_window current, previous,
                             * now - start                                       */
    gint64 state[3];
} sluice__verdict;

/* The longest a token_bucket caller may reserve ahead (18250 days): it keeps the
 * state's numbers below 2^53 (docs/algorithms.md). */
#define SLUICE__MAX_RESERVE_US (G_GINT64_CONSTANT(18250) * 86400 * 1000000)

/* Decides `permits` permits (0: a peek at one) at time now_us and updates the
 * states when they are admitted: states[0] for the rule's own limit and window,
 * states[i] for its band i (sluice__rule_bands(rule) in all; states[0].idle_at
 * covers them all). epoch_us is the same instant in µs since
 * 1970-01-01T00:00:00Z: fixed_window with anchor = epoch starts its windows at its
 * multiples of the window. reserve_us > 0 lets a token_bucket caller that would be
 * denied reserve its tokens when they are due within reserve_us. */
void sluice__decide(const sluice__rule *rule, sluice__state *states, gint64 now_us, gint64 epoch_us,
                    gint64 permits, gint64 reserve_us, sluice__verdict *verdict);

/* ---- gcra in three steps ------------------------------------------------------
 * The memory backend decides a gcra rule without bands on its lock-free state in
 * three steps, so that between reading the state and the CAS that commits it there
 * is only a comparison and an addition: sluice__gcra_plan_of before the state is read
 * (what the rule, the time and the permits alone decide), sluice__gcra_admits and
 * sluice__gcra_next between, sluice__gcra_answer after. Together they decide as
 * sluice__decide does, which decides gcra with them. */

/* A time or a duration, exact: q whole µs plus r/L µs, 0 <= r < L (L: the limit). */
typedef struct {
    gint64 q, r;
} sluice__span;

typedef struct {
    const sluice__rule *rule;
    gint64 permits;      /* as asked (0: a peek at one)                             */
    gint64 l;            /* L, the unit of the spans' r                             */
    gboolean consume;    /* an admission is stored (not a peek, not over capacity)  */
    gboolean never;      /* more permits than the burst: no state admits them       */
    sluice__span now;    /* the time decided at                                     */
    sluice__span inc;    /* what the permits add to the tat: permits x T            */
    sluice__span latest; /* the latest tat that admits them: now + burst x T - inc  */
} sluice__gcra_plan;

/* TRUE for a gcra rule without bands, which the three steps decide. */
gboolean sluice__gcra_plannable(const sluice__rule *rule);
/* The plan of a decision on `permits` permits at now_us. */
void sluice__gcra_plan_of(const sluice__rule *rule, gint64 now_us, gint64 permits,
                          sluice__gcra_plan *plan);
/* The tat of a state stored as started, a, b, d (sluice__state's), as the plan reads
 * it: now for a fresh state (one whose tat is past decides alike). */
sluice__span sluice__gcra_tat(const sluice__gcra_plan *plan, gboolean started, gint64 a, gint64 b,
                              gint64 d);
/* TRUE when a state with this tat admits the plan's permits. */
gboolean sluice__gcra_admits(const sluice__gcra_plan *plan, sluice__span tat);
/* The tat an admission stores (as a, b, with d = plan->l and started). */
sluice__span sluice__gcra_next(const sluice__gcra_plan *plan, sluice__span tat);
/* The answer of the decision on a state with this tat, admitted or not. */
void sluice__gcra_answer(const sluice__gcra_plan *plan, sluice__span tat, gboolean admitted,
                         sluice__verdict *verdict);

/* Takes `permits` (> 0) of the states of every band at now_us as if admitted
 * (sluice_penalize), even past what is left, up to one capacity of debt: a band then
 * holds at most twice its capacity in use (docs/algorithms.md says what that is for
 * each algorithm). states[0].idle_at follows. Not for concurrency (nothing to take:
 * it counts calls in flight); the caller refuses it. */
void sluice__penalize(const sluice__rule *rule, sluice__state *states, gint64 now_us,
                      gint64 epoch_us, gint64 permits);

/* The answer to a call on a key blocked until until_us (> now_us): denied, none
 * remaining, retry and reset when the block ends. */
static inline void sluice__blocked_verdict(gint64 capacity, gint64 until_us, gint64 now_us,
                                           sluice__verdict *v)
{
    *v = (sluice__verdict){.limit = capacity,
                           .retry_after_us = until_us - now_us,
                           .reset_after_us = until_us - now_us,
                           .blocked = TRUE};
}

/* Gives back `permits` concurrency permits: state->owner's leases first, then
 * anyone's, oldest first. */
void sluice__release(const sluice__rule *rule, sluice__state *state, gint64 now_us, gint64 permits);

/* Frees what the state holds (not the state itself) and makes it fresh. */
void sluice__state_clear(sluice__state *state);

#endif
