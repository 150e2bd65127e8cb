/* SPDX-License-Identifier: MIT */
/* The memory backend: every algorithm in-process, state per limiter and key.
 *
 * Each limiter has a store (src/memory/store.h). Its shared state (calls without a
 * key) under fixed_window, sliding_window, token_bucket or gcra is kept lock-free
 * (src/memory/hot.h); per-key states (src/memory/keyed.c), and sliding_log and
 * concurrency, whose logs grow, are under the store's mutex (src/memory/backend.c).
 * A reload lays the states out for the new rule (src/memory/reshape.c); fork() finds
 * every store in one list (src/memory/fork.c). */
#ifndef SLUICE_MEMORY_H
#define SLUICE_MEMORY_H

#include "backend.h"

sluice__backend *sluice__backend_memory_new(void);

/* The memory backend's decide (sluice__backend_funcs), for a caller that knows the
 * backend is this one: a direct call, which link-time optimization can inline. */
gboolean sluice__memory_decide(sluice__backend *backend, sluice__limiter *limiter,
                               const sluice__rule *rule, const char *key, gint64 permits,
                               gint64 reserve_us, sluice__verdict *verdict, GError **error);

/* A limiter's store: created with the limiter, freed with it. */
sluice__memory_store *sluice__memory_store_new(void);
void sluice__memory_store_free(sluice__memory_store *store);
/* fork(): takes the lock of every store (and of their list), or lets them go. */
void sluice__memory_stores_lock(void);
void sluice__memory_stores_unlock(void);
/* How many per-key states the store holds (for tests of eviction). */
gsize sluice__memory_store_keys(sluice__memory_store *store);

#endif
