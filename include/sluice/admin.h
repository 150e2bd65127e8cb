/* SPDX-License-Identifier: MIT */
/** @file
 * What operators' tools need: check a keyfile, describe a rule, reset a limit. */
#ifndef SLUICE_ADMIN_H
#define SLUICE_ADMIN_H

#include <glib.h>
#include <sluice/export.h>

G_BEGIN_DECLS

/** Reads and validates the keyfile at path as sluice_init would, without loading
 * it and without connecting anywhere. FALSE with *error when it cannot be read
 * (SLUICE_ERROR_IO) or is invalid (SLUICE_ERROR_CONFIG: every problem of the file,
 * one per line, in file order). */
SLUICE_API gboolean sluice_config_check(const char *path, GError **error);

/** A rule of the running keyfile, as sluice_rule_get reports it. */
typedef struct {
    const char *algorithm; /**< "fixed_window", "sliding_log", ... (static storage) */
    gint64 limit;          /**< permits per window; concurrency: calls in flight;
                            * adaptive: the most it may grow to                    */
    gint64 burst;          /**< token_bucket and gcra: capacity; the others: limit   */
    gint64 window_ms;      /**< concurrency: how long a lease lives                  */
    gint64 wait_ms;        /**< how long a caller may wait for permits               */
    gboolean shadow;       /**< mode = shadow                                        */
    gboolean per_key;      /**< the key splits the limit                             */
    gint64 min_limit;      /**< adaptive: the least the limit falls to; others: 0    */
    gint64 warmup_ms;      /**< token_bucket and gcra: `warmup`; 0: none             */
    /** adaptive: "gradient", "vegas" or "aimd" (static storage); others: NULL */
    const char *controller;
    /** fixed_window: where its windows start, "first_hit" or "epoch" (`anchor`;
     * static storage); others: NULL */
    const char *anchor;
} sluice_rule_info;

/** Fills *out with the rule of name in the running keyfile. FALSE with *error (and
 * *out left alone) for a bad name or a NULL out (SLUICE_ERROR_INVALID_ARGUMENT),
 * before sluice_init (SLUICE_ERROR_NOT_INITIALIZED), and when the name has no rule
 * (SLUICE_ERROR_NO_RULE). */
SLUICE_API gboolean sluice_rule_get(const char *name, sluice_rule_info *out, GError **error);

/** Where the rule that decides a key's calls comes from (sluice_rule_get_key). */
typedef enum {
    SLUICE_RULE_OWN,       /**< the limit's own rule, [limit:NAME]                        */
    SLUICE_RULE_OVERRIDE,  /**< `KEY = LIMIT/WINDOW[/BURST]` of [override:NAME]           */
    SLUICE_RULE_BLOCKED,   /**< `KEY = blocked` of [override:NAME]: always denied         */
    SLUICE_RULE_UNLIMITED, /**< `KEY = unlimited` of [override:NAME]: never limited       */
} sluice_rule_source;

/** Fills *out with the rule that decides the calls of `key` (NULL: no key) on the
 * limit `name` in the running keyfile, and *source (may be NULL) with where it
 * comes from. An override of [override:NAME] has its own limit, burst and window
 * (a blocked or unlimited key: the limit's); a rule with per_key = false ignores
 * the key. FALSE with *error as sluice_rule_get, and for a bad key
 * (SLUICE_ERROR_INVALID_ARGUMENT). */
SLUICE_API gboolean sluice_rule_get_key(const char *name, const char *key, sluice_rule_info *out,
                                        sluice_rule_source *source, GError **error);

/** How many keys [override:NAME] of the limit `name` names in the running keyfile
 * (0: none, also with *error as sluice_rule_get sets it). */
SLUICE_API guint sluice_rule_overrides(const char *name, GError **error);

/** The most bands a rule has: its own limit and window, and up to 8 from `bands`
 * and `shadow_bands`. */
#define SLUICE_RULE_BANDS_MAX 9

/** One band of a rule, as sluice_rule_bands reports it. */
typedef struct {
    gint64 limit;     /**< permits per window                                    */
    gint64 burst;     /**< token_bucket and gcra: capacity; the others: limit    */
    gint64 window_ms; /**< the band's window                                     */
    gboolean shadow;  /**< from shadow_bands: decided and counted, never refuses */
} sluice_band_info;

/** Fills out[0 .. n) with the bands of the rule of name in the running keyfile:
 * out[0] is the rule's own limit, window and burst, then come `bands` and then
 * `shadow_bands`, in keyfile order. Returns how many bands the rule has (1 without
 * bands; at most SLUICE_RULE_BANDS_MAX), which may be more than n (out may be NULL
 * when n is 0); 0 with *error as sluice_rule_get sets it. */
SLUICE_API guint sluice_rule_bands(const char *name, sluice_band_info *out, guint n,
                                   GError **error);

/** Forgets the state of the limit `name` for `key` (NULL: no key; ignored when the
 * rule says per_key = false), so that it is back to full capacity, its block and
 * penalties lifted with it (and this process's denial cache forgets the key): on
 * Redis, DEL of its keys; concurrency leases are dropped and callers waiting for
 * them woken.
 * Other keys of the limit keep their state. A name sluice has no limiter for has
 * nothing to forget: TRUE. Bad arguments are SLUICE_ERROR_INVALID_ARGUMENT (as
 * for sluice_acquire); before sluice_init SLUICE_ERROR_NOT_INITIALIZED; a backend
 * failure SLUICE_ERROR_BACKEND. */
SLUICE_API gboolean sluice_reset(const char *name, const char *key, GError **error);

/** The shared-memory zone of a keyfile with backend = shm, as sluice_zone_get
 * reports it (docs/shm.md). */
typedef struct {
    char name[256];     /**< its name: the keyfile's `shm`                             */
    char path[256];     /**< its file: /dev/shm/sluice-NAME                            */
    gint64 size;        /**< its bytes, fixed when it was made                         */
    gint64 capacity;    /**< the most per-key states it holds (a band of a key is one) */
    gint64 keys;        /**< states it holds now                                       */
    guint64 evictions;  /**< states not yet back at full capacity that it gave up to
                         * make room, since it was made                               */
    gint64 chunks;      /**< chunks for sliding_log and concurrency runs (3 each)      */
    gint64 chunks_free; /**< of them, free now                                         */
    guint processes;    /**< processes attached to it now                              */
    guint64 repairs;    /**< locks of it taken over from a process that died holding
                         * them (what it was changing undone or finished), since made */
} sluice_zone_info;

/** Fills *out with what the zone of the running keyfile holds now. FALSE with
 * *error before sluice_init (SLUICE_ERROR_NOT_INITIALIZED) and when the keyfile's
 * backend is not shm (SLUICE_ERROR_INVALID_ARGUMENT). */
SLUICE_API gboolean sluice_zone_get(sluice_zone_info *out, GError **error);

/** Removes the zone called name (the keyfile's `shm`): processes that have it
 * attached keep theirs until they detach, and the next process to attach makes a
 * new, empty one. FALSE with *error when there is no such zone
 * (SLUICE_ERROR_INVALID_ARGUMENT) or it cannot be removed (SLUICE_ERROR_IO). */
SLUICE_API gboolean sluice_zone_remove(const char *name, GError **error);

G_END_DECLS

#endif
