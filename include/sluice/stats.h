/* SPDX-License-Identifier: MIT */
/** @file
 * Stats: what each limit and each decorated function decided, and how fast. */
#ifndef SLUICE_STATS_H
#define SLUICE_STATS_H

#include <glib.h>
#include <sluice/export.h>

G_BEGIN_DECLS

/** Slots of the latency histogram: slot i counts decisions that took more than
 * 2^(i-1) µs and at most 2^i µs (slot 0: at most 1 µs); the last slot counts the
 * ones that took longer than 2^(SLUICE_STATS_BUCKETS - 2) µs (about 8.4 s). */
#define SLUICE_STATS_BUCKETS 25

/** Counters only grow (adaptive_limit, a gauge, aside). A decision is counted
 * once, in exactly one of allowed, denied, shadow_denied and errors; waited and
 * degraded count some of them again. The latency of a decision includes the time
 * it waited. Decisions answered in process (the memory backend, the denial cache)
 * are timed one in eight (timing every one would double the cost of an allowed
 * call); every decision that makes a round trip to Redis is timed. */
typedef struct {
    guint64 allowed;        /**< the permits passed                                     */
    guint64 denied;         /**< the permits were refused                               */
    guint64 shadow_denied;  /**< mode = shadow or a shadow band: would have been
                             * refused, passed                                       */
    guint64 errors;         /**< the backend failed: on_error gave the verdict          */
    guint64 waited;         /**< the caller waited for its permits (rule `wait`)        */
    guint64 degraded;       /**< a decorated call ran its degrade function or fallback  */
    guint64 cached_denied;  /**< denials answered in process by the denial cache, with no
                             * round trip (also counted in denied or shadow_denied)   */
    guint64 prefetched;     /**< allowed from permits this process had prefetched from
                             * Redis, with no round trip (also counted in allowed; a
                             * memory-backend thread's hand is not counted here)     */
    guint64 blocked;        /**< denied by a block (sluice_block, an override's
                             * `blocked`), not by the limit (also counted in denied;
                             * under mode = shadow a block counts as shadow_denied) */
    guint64 latency_ns_sum; /**< total time of the timed decisions */
    guint64 latency[SLUICE_STATS_BUCKETS]; /**< timed decisions by duration, above  */
    /** Not a counter: the current limit of an adaptive rule (algorithm = adaptive)
     * in this process, as sluice_stats_get reads it; 0 for any other rule, and in
     * a decorated function's stats. */
    gint64 adaptive_limit;
} sluice_stats;

/** What one band of a limit's rule refused since sluice_init. */
typedef struct {
    gint64 limit;     /**< the band: permits per window (as sluice_band_info)   */
    gint64 burst;     /**< token_bucket and gcra: capacity; the others: limit   */
    gint64 window_ms; /**< its window                                           */
    gboolean shadow;  /**< a shadow band (shadow_bands)                          */
    guint64 refused;  /**< enforced band: calls it refused (counted in denied, or in
                       * shadow_denied under mode = shadow; a call several bands
                       * refuse counts in each); shadow band: calls that passed
                       * but it would have refused (counted in shadow_denied)   */
} sluice_band_stats;

/** The refusals of each band of the rule of `name`, for a rule with bands or
 * shadow_bands: out[0] the rule's own limit and window, then `bands`, then
 * `shadow_bands`, in keyfile order. Fills at most n and returns how many bands the
 * rule has (1 without bands, when nothing is counted per band: its refusals are
 * `denied`); 0 for a name without a rule. A band a reload keeps keeps its count;
 * a band it adds starts at 0. 0 with *error for a bad name or before
 * sluice_init. */
SLUICE_API guint sluice_stats_bands(const char *name, sluice_band_stats *out, guint n,
                                    GError **error);

/** Every decision on the limit `name` since sluice_init (through sluice_acquire
 * and through decorated functions alike); zeros for a name that has not decided
 * yet. FALSE with *error for a bad name or before sluice_init. */
SLUICE_API gboolean sluice_stats_get(const char *name, sluice_stats *out, GError **error);

/** The stats of every limit and decorated function in the Prometheus text
 * exposition format (version 0.0.4): sluice_decisions_total{name,outcome},
 * sluice_waited_total{name}, sluice_degraded_total{name},
 * sluice_cached_denials_total{name}, sluice_prefetched_total{name},
 * sluice_blocked_total{name}, the histogram
 * sluice_decision_seconds{name}, and per decorated function
 * sluice_function_decisions_total{name,function,site,outcome} and
 * sluice_function_degraded_total{name,function,site}; for each rule with bands
 * sluice_band_refusals_total{name,band,shadow} (band as the keyfile writes it,
 * "1000/1h" or "1000/1h/50", the rule's own limit and window first; shadow "true"
 * for a shadow band: what sluice_stats_bands counts); for each adaptive rule the
 * gauge sluice_adaptive_limit{name} (its current limit in this process); on Redis,
 * per server the gauge sluice_breaker_open{node} (1 while its circuit breaker is
 * open). Free with g_free. */
SLUICE_API char *sluice_stats_prometheus(void);

G_END_DECLS

#endif
