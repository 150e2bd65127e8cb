/* SPDX-License-Identifier: MIT */
/* fork() while threads decide on memory stores: every store's lock is held across
 * fork() (src/fork_guard.c), with its lock-free state's version and the locks of
 * its stripes of keys, and the read sections in which keys are decided are waited
 * for and held off (src/memory/retire.h), so that the child finds no lock taken and
 * no decision half written. */
#include "memory/fork.h"

#include "memory/memory.h"
#include "memory/retire.h"
#include "memory/store.h"

static GMutex stores_lock;
static GHashTable *stores; /* every store */

void sluice__memory_stores_add(sluice__memory_store *store)
{
    g_mutex_lock(&stores_lock);
    if (!stores)
        stores = g_hash_table_new(NULL, NULL);
    g_hash_table_add(stores, store);
    g_mutex_unlock(&stores_lock);
}

void sluice__memory_stores_remove(sluice__memory_store *store)
{
    g_mutex_lock(&stores_lock);
    g_hash_table_remove(stores, store);
    if (g_hash_table_size(stores) == 0)
        g_clear_pointer(&stores, g_hash_table_unref);
    g_mutex_unlock(&stores_lock);
}

/* Calls f on every store (stores_lock held). */
static void each_store(void (*f)(sluice__memory_store *store))
{
    if (!stores)
        return;
    GHashTableIter it;
    gpointer store;
    g_hash_table_iter_init(&it, stores);
    while (g_hash_table_iter_next(&it, &store, NULL))
        f(store);
}

static void hold(sluice__memory_store *s)
{
    pthread_mutex_lock(&s->lock);
    sluice__keyed_fork_lock(&s->keyed);
    s->fork_version = sluice__hot_enter(&s->hot); /* no lock-free decision half written */
}

static void let_go(sluice__memory_store *s)
{
    sluice__hot_leave(&s->hot, s->fork_version);
    sluice__keyed_fork_unlock(&s->keyed);
    pthread_mutex_unlock(&s->lock);
}

void sluice__memory_stores_lock(void)
{
    g_mutex_lock(&stores_lock);
    each_store(hold);
    sluice__retire_fork_lock(); /* no key's decision half made */
}

void sluice__memory_stores_unlock(void)
{
    sluice__retire_fork_unlock();
    each_store(let_go);
    g_mutex_unlock(&stores_lock);
}
