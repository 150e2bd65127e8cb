/* SPDX-License-Identifier: MIT */
/* Prefetched permits: permits a process took from a remote backend in one round
 * trip and hands to its own callers until they run out or their time is up. */
#ifndef SLUICE_PREFETCH_H
#define SLUICE_PREFETCH_H

#include <glib.h>

#include "algorithm.h"
#include "rule.h"

/* One limit's permits in hand: a fixed number of slots, so keys cannot grow it;
 * keys longer than SLUICE__KEY_SLOTS_MAX_KEY are never prefetched for. */
typedef struct sluice__prefetch sluice__prefetch;

/* The store of *where, made on first use (the pointer is loaded and set atomically). */
sluice__prefetch *sluice__prefetch_of(sluice__prefetch **where);
void sluice__prefetch_free(sluice__prefetch *store);

/* TRUE when `permits` (> 0) of key under rule, granted by backend, are in hand at
 * now_us: they are taken, and *v is the answer (allowed; limit as the backend
 * said; remaining the permits still in hand; reset as said, aged). */
gboolean sluice__prefetch_take(sluice__prefetch *store, gconstpointer backend,
                               const sluice__rule *rule, const char *key, gint64 permits,
                               gint64 now_us, sluice__verdict *v);

/* Keeps `left` permits of key granted by backend under rule in verdict v, counted
 * by the backend when the command was sent at sent_us: they may be used until
 * sent_us + rule->prefetch_ttl_us. Replaces what was in hand for key (the rest
 * is lost: Redis counted it). */
void sluice__prefetch_keep(sluice__prefetch *store, gconstpointer backend, const sluice__rule *rule,
                           const char *key, gint64 left, gint64 sent_us, const sluice__verdict *v);

/* Drops what is in hand for key (sluice_reset). */
void sluice__prefetch_forget(sluice__prefetch *store, const char *key);

/* fork(), in the child, every stripe held (sluice__key_stripes_lock): forgets
 * every permit in hand. */
void sluice__prefetch_fork_child(void);

#endif
