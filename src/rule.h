/* SPDX-License-Identifier: MIT */
/* A validated rule: one limit's algorithm and parameters, immutable once published. */
#ifndef SLUICE_RULE_H
#define SLUICE_RULE_H

#include <string.h>

#include <glib.h>

#include "adaptive/controller.h"
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

/* What a rule makes of a call: a limit's own rule, and an override's
 * LIMIT/WINDOW[/BURST], are LIMIT; an override's `blocked` and `unlimited` decide
 * without the algorithm (src/override.h). */
typedef enum {
    SLUICE__KIND_LIMIT,
    SLUICE__KIND_BLOCKED,   /* always denied, retry_after -1 */
    SLUICE__KIND_UNLIMITED, /* never limited, no round trip  */
} sluice__kind;

/* The overrides of one rule ([override:NAME]): src/override.h. */
typedef struct sluice__overrides sluice__overrides;

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
    gint64 limit;           /* permits per window; concurrency: calls in flight;
                             * adaptive: the most calls in flight it may grow to    */
    gint64 burst;           /* token_bucket, gcra: capacity                         */
    gint64 window_us;       /* window; concurrency: lease lifetime                  */
    gint64 wait_us;         /* how long a decorated call may wait                   */
    gboolean epoch;         /* fixed_window: anchor = epoch (windows on the UTC clock) */
    gint64 prefetch;        /* permits taken per round trip and handed out in process */
    gint64 prefetch_ttl_us; /* how long prefetched permits may be used           */
    gint64 warmup_us;       /* token_bucket, gcra: from cold to the full rate (0: none) */
    gint64 min_limit;       /* adaptive: the least calls in flight it may fall to   */
    /* adaptive: what sets the limit from the calls' latency */
    sluice__controller controller;
    guint n_bands;  /* `bands`: bands[0 .. n_bands) must admit too           */
    guint n_shadow; /* `shadow_bands`: the next n_shadow, decided, never refuse */
    sluice__band bands[SLUICE__MAX_BANDS];
    sluice__kind kind;                  /* an override's `blocked`, `unlimited`      */
    const sluice__overrides *overrides; /* a limit's own rule: its [override:NAME], or
                                         * NULL (the decision looks up nothing)    */
    const sluice__overrides *of;        /* an override's rule: the overrides it is
                                         * one of; NULL for a limit's own rule     */
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

/* TRUE when state kept under rule a serves rule b: the same algorithm and per_key,
 * and both with a warm-up or both without (the state is not the same).
 * A changed limit, window, burst or warmup applies to the state as it stands (what
 * was admitted stays admitted), as in Redis, so a reload gives no free burst. */
static inline gboolean sluice__rule_same_state(const sluice__rule *a, const sluice__rule *b)
{
    return a->algorithm == b->algorithm && a->per_key == b->per_key &&
           (a->warmup_us > 0) == (b->warmup_us > 0);
}

/* Rules as bytes, for the tables that intern them (GHashFunc, GEqualFunc). */
static inline guint sluice__rule_hash(gconstpointer p)
{
    const guchar *b = p;
    guint h = 5381;
    for (gsize i = 0; i < sizeof(sluice__rule); i++)
        h = h * 33 + b[i];
    return h;
}

static inline gboolean sluice__rule_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(sluice__rule)) == 0;
}

const char *sluice__algorithm_name(sluice__algorithm algorithm);

#endif
