/* SPDX-License-Identifier: MIT */
/* A validated rule: one limit's algorithm and parameters, immutable once published. */
#ifndef SLUICE_RULE_H
#define SLUICE_RULE_H

#include <glib.h>

#include "algorithm_table.h"

/* One code per row of SLUICE__ALGORITHM_TABLE. */
typedef enum {
#define SLUICE__ALGORITHM_ENUM(code, name, tag, script) code,
    SLUICE__ALGORITHM_TABLE(SLUICE__ALGORITHM_ENUM)
#undef SLUICE__ALGORITHM_ENUM
} sluice__algorithm;

typedef enum {
    SLUICE__ON_ERROR_ALLOW,
    SLUICE__ON_ERROR_DENY,
    SLUICE__ON_ERROR_LOCAL,
} sluice__on_error;

/* The most bands a rule may add beside its own limit and window (bands and
 * shadow_bands together). */
#define SLUICE__MAX_BANDS 8

/* One more band of a rule: its own limit per window (and burst), same algorithm. */
typedef struct {
    gint64 limit, window_us, burst;
} sluice__band;

/* Every field is set by config.c; rules are compared and hashed as bytes, so a
 * rule is always zeroed before it is filled. */
typedef struct {
    sluice__algorithm algorithm;
    sluice__on_error on_error;
    gboolean shadow;        /* mode = shadow                                       */
    gboolean per_key;       /* the key splits the limit                            */
    gint64 limit;           /* permits per window; concurrency: calls in flight     */
    gint64 burst;           /* token_bucket, gcra: capacity                         */
    gint64 window_us;       /* window; concurrency: lease lifetime                  */
    gint64 wait_us;         /* how long a decorated call may wait                   */
    gboolean epoch;         /* fixed_window: anchor = epoch (windows on the UTC clock) */
    gint64 prefetch;        /* permits taken per round trip and handed out in process */
    gint64 prefetch_ttl_us; /* how long prefetched permits may be used           */
    guint n_bands;          /* `bands`: bands[0 .. n_bands) must admit too           */
    guint n_shadow;         /* `shadow_bands`: the next n_shadow, decided, never refuse */
    sluice__band bands[SLUICE__MAX_BANDS];
} sluice__rule;

/* Most permits that can ever pass at once: burst for token_bucket and gcra. */
static inline gint64 sluice__rule_capacity(const sluice__rule *rule)
{
    return rule->algorithm == SLUICE__TOKEN_BUCKET || rule->algorithm == SLUICE__GCRA ? rule->burst
                                                                                      : rule->limit;
}

/* The bands a rule decides: its own (0), then bands, then shadow bands. */
static inline guint sluice__rule_bands(const sluice__rule *rule)
{
    return 1 + rule->n_bands + rule->n_shadow;
}

/* Band i of the rule (sluice__rule_bands order): 0 its own limit, window and burst. */
static inline sluice__band sluice__rule_band(const sluice__rule *rule, guint i)
{
    return i == 0 ? (sluice__band){rule->limit, rule->window_us, rule->burst} : rule->bands[i - 1];
}

/* TRUE when state kept under rule a serves rule b: the same algorithm and per_key.
 * A changed limit, window or burst applies to the state as it stands (what was
 * admitted stays admitted), as in Redis, so a reload gives no free burst. */
static inline gboolean sluice__rule_same_state(const sluice__rule *a, const sluice__rule *b)
{
    return a->algorithm == b->algorithm && a->per_key == b->per_key;
}

const char *sluice__algorithm_name(sluice__algorithm algorithm);

#endif
