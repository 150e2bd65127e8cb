/* SPDX-License-Identifier: MIT */
/* The denial cache: denials a remote backend gave that still hold, answered in
 * process until they can have changed, with no round trip. */
#ifndef SLUICE_DENIAL_CACHE_H
#define SLUICE_DENIAL_CACHE_H

#include <glib.h>

#include "algorithm.h"
#include "rule.h"

/* One limit's cache: a fixed number of slots, so hostile keys cannot grow it; keys
 * longer than SLUICE__KEY_SLOTS_MAX_KEY are never cached. */
typedef struct sluice__denial_cache sluice__denial_cache;

/* The cache of *slot, made on first use (the pointer is loaded and set atomically). */
sluice__denial_cache *sluice__denial_cache_of(sluice__denial_cache **slot);
void sluice__denial_cache_free(sluice__denial_cache *cache);

/* A denial is kept with the backend that gave it (a reload that moves to another
 * server, or changes the rule, leaves it unanswered). */

/* TRUE when a denial stored for key under rule still answers `permits` (0: a peek)
 * at now_us: *v is that denial, aged (retry and reset less the time since it was
 * sent; -1 retry for more permits than the rule's capacity; remaining what the
 * key's state gives then, docs/algorithms.md). Reads no clock. */
gboolean sluice__denial_cache_lookup(sluice__denial_cache *cache, gconstpointer backend,
                                     const sluice__rule *rule, const char *key, gint64 permits,
                                     gint64 now_us, sluice__verdict *v);

/* Keeps the backend's denial v of `permits` for key under rule, its command sent
 * at sent_us: it holds until sent_us + retry_after (the server decided after
 * sent_us, so the denial cannot outlive that), or for more than the capacity
 * (retry -1) until sent_us + reset_after. A blocked denial is not kept, and drops
 * what was: a block is lifted by other processes too (sluice reset, sluice block
 * --for 0), which this process would not see before the block's end. */
void sluice__denial_cache_store(sluice__denial_cache *cache, gconstpointer backend,
                                const sluice__rule *rule, const char *key, gint64 permits,
                                gint64 sent_us, const sluice__verdict *v);

/* The backend admitted a call of this process for key: what is kept for it no longer
 * says its remaining, and is dropped (a read, no lock, when nothing is kept for key). */
void sluice__denial_cache_admitted(sluice__denial_cache *cache, const char *key);

/* Drops what is kept for key (sluice_reset). */
void sluice__denial_cache_forget(sluice__denial_cache *cache, const char *key);

#endif
