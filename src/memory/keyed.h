/* SPDX-License-Identifier: MIT */
/* A memory store's per-key states: a table of the keys that are active, under the
 * store's lock. */
#ifndef SLUICE_MEMORY_KEYED_H
#define SLUICE_MEMORY_KEYED_H

#include <glib.h>

#include "algorithm.h"
#include "limiter.h"
#include "rule.h"

/* A key's states, one per band of the rule (sluice__rule_bands). */
typedef struct {
    guint n;
    sluice__state s[];
} sluice__keyed_states;

sluice__keyed_states *sluice__keyed_states_new(guint n);

/* The store's table, empty (when it is made). */
void sluice__keyed_init(sluice__memory_store *store);
/* With the lock held: every key forgotten. */
void sluice__keyed_clear(sluice__memory_store *store);

/* With the lock held: decides `permits` of key under rule at now_us (epoch_us on the
 * clock of sluice__decide), as sluice__decide does. A key's state is created only
 * when it admits something, and states that are back to full capacity are swept out
 * once the table has doubled since the last sweep, so memory follows the keys that
 * are active, not every key ever seen. */
void sluice__keyed_decide(sluice__memory_store *store, const sluice__rule *rule, const char *key,
                          gint64 now_us, gint64 epoch_us, gint64 permits, gint64 reserve_us,
                          sluice__verdict *verdict);

/* With the lock held: key's states under rule (found for the key), made fresh when
 * it has none (a block or a penalty keeps a state that no admission made). */
sluice__state *sluice__keyed_get(sluice__memory_store *store, const sluice__rule *rule,
                                 const char *key, gint64 now_us);

/* With the lock held: key's states, or NULL when it has none. */
sluice__state *sluice__keyed_lookup(sluice__memory_store *store, const char *key);

#endif
