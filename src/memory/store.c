/* SPDX-License-Identifier: MIT */
/* A limiter's store in the memory backend: made, counted and freed
 * (src/memory/store.h). */
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP */
#include "memory/store.h"

#include "memory/fork.h"
#include "memory/keyed.h"
#include "memory/memory.h"

void sluice__memory_keyless_clear(sluice__memory_store *store)
{
    for (guint i = 0; i < G_N_ELEMENTS(store->keyless); i++)
        sluice__state_clear(&store->keyless[i]);
}

sluice__memory_store *sluice__memory_store_new(void)
{
    static gint made; /* atomic */
    sluice__hot_detect_cpu();
    sluice__memory_store *store = g_aligned_alloc0(1, sizeof(sluice__memory_store), SLUICE__LINE);
    /* a store made where a freed one was must not take a thread's hand for its own */
    store->hot.generation = (guint64)(guint)g_atomic_int_add(&made, 1) << 32;
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&store->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    sluice__keyed_init(&store->keyed);
    sluice__memory_stores_add(store);
    return store;
}

void sluice__memory_store_free(sluice__memory_store *store)
{
    if (!store)
        return;
    sluice__memory_stores_remove(store);
    sluice__keyed_free(&store->keyed);
    sluice__memory_keyless_clear(store);
    pthread_mutex_destroy(&store->lock);
    g_aligned_free(store);
}

gsize sluice__memory_store_keys(sluice__memory_store *store)
{
    return sluice__keyed_count(&store->keyed);
}
