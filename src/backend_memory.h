/* The memory backend: every algorithm in-process, state per limiter and key. */
#ifndef SLUICE_BACKEND_MEMORY_H
#define SLUICE_BACKEND_MEMORY_H

#include "backend.h"

sluice__backend *sluice__backend_memory_new(void);

/* A limiter's store: created with the limiter, freed with it. */
sluice__memory_store *sluice__memory_store_new(void);
void sluice__memory_store_free(sluice__memory_store *store);
/* fork(): takes the lock of every store (and of their list), or lets them go. */
void sluice__memory_stores_lock(void);
void sluice__memory_stores_unlock(void);
/* How many per-key states the store holds (for tests of eviction). */
gsize sluice__memory_store_keys(sluice__memory_store *store);

#endif
