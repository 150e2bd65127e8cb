/* SPDX-License-Identifier: MIT */
/* Counting decisions: the counters and latency histogram behind include/sluice/stats.h. */
#ifndef SLUICE_STATS_INTERNAL_H
#define SLUICE_STATS_INTERNAL_H

#include <glib.h>
#include <sluice/stats.h>

#include "rule.h"

/* Where one decision ended; each is counted in its own field of sluice_stats. */
typedef enum {
    SLUICE__OUTCOME_ALLOWED,
    SLUICE__OUTCOME_DENIED,
    SLUICE__OUTCOME_BLOCKED, /* denied by a block: counted in denied and in blocked */
    SLUICE__OUTCOME_SHADOW_DENIED,
    SLUICE__OUTCOME_ERROR,
} sluice__outcome;

/* TRUE for one call in eight on each thread (the first one included). */
static inline gboolean sluice__stats_sample(void)
{
    extern __thread __attribute__((tls_model("initial-exec"))) guint sluice__sample_tick;
    return sluice__sample_tick++ % 8 == 0;
}

/* Nanoseconds on a monotonic scale, for timing decisions. */
gint64 sluice__stats_clock_ns(void);

/* Copies stats field by field with atomic loads (while others keep counting). */
void sluice__stats_read(const sluice_stats *stats, sluice_stats *out);

/* A limit's counters (or a decorated site's) in stripes of their own cache lines: a
 * thread counts in its stripe, so threads that decide on one limit pass no counter
 * between them. The first threads to count (one fewer than the stripes, at any one
 * time) have a stripe each, which they count in with plain stores, as no other
 * thread writes it; the others share the last stripe and count with atomic adds. */
typedef struct sluice__counters sluice__counters;

sluice__counters *sluice__counters_new(void);
void sluice__counters_free(sluice__counters *counters);
/* In the calling thread's stripe (relaxed atomics: counters, not a snapshot):
 * counts one decision (elapsed_ns < 0: it was not timed); a decorated call that
 * ran its degrade function or fallback; a decision answered in process, a denial
 * the denial cache answered or (prefetched) permits this process had in hand. */
void sluice__counters_count(sluice__counters *counters, sluice__outcome outcome, gboolean waited,
                            gint64 elapsed_ns);
void sluice__counters_degraded(sluice__counters *counters);
void sluice__counters_in_process(sluice__counters *counters, gboolean prefetched);
/* The sum of every stripe, read as sluice__stats_read does. */
void sluice__counters_read(const sluice__counters *counters, sluice_stats *out);

/* Counts a refusal for each band of `refused` (bit i: band i of the rule, in
 * sluice__rule_bands order), in the calling thread's stripe. */
void sluice__counters_refused(sluice__counters *counters, guint refused);
/* The refusals of every band, summed over the stripes, by band position. */
void sluice__counters_read_refused(const sluice__counters *counters,
                                   guint64 out[1 + SLUICE__MAX_BANDS]);
/* A reload changes the rule from `from` (NULL: none) to `to`: each band of `to` that `from` had
 * (the same limit, window, burst and kind) takes the refusals counted for it; the
 * others start at 0. A decision in flight across the change may be counted at its
 * band's old position. */
void sluice__counters_move_refused(sluice__counters *counters, const sluice__rule *from,
                                   const sluice__rule *to);

#endif
