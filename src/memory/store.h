/* SPDX-License-Identifier: MIT */
/* A limiter's store in the memory backend: the layout every file of src/memory/
 * shares. */
#ifndef SLUICE_MEMORY_STORE_H
#define SLUICE_MEMORY_STORE_H

#include <pthread.h>

#include <glib.h>

#include "algorithm.h"
#include "limiter.h"
#include "memory/hot.h"
#include "rule.h"

struct sluice__memory_store {
    sluice__hot_state hot;
    pthread_mutex_t lock __attribute__((aligned(SLUICE__LINE))); /* adaptive: spins briefly
                                                                  * before it sleeps, as the
                                                                  * section is short */
    guint64 seq;        /* atomic: decisions under the lock so far          */
    gint64 changed;     /* the time of the last decision under the lock     */
    gboolean shaped;    /* `shape` is set                                   */
    sluice__rule shape; /* the rule the states below were kept under        */
    sluice__state keyless[1 + SLUICE__MAX_BANDS];
    GHashTable *keyed;            /* char * -> sluice__keyed_states * (src/memory/keyed.h) */
    guint sweep_at;               /* sweep when the table reaches this size           */
    gint64 blocked_until;         /* a block of calls without a key (sluice_block), 0: none;
                                   * while set, hot.rule is NULL: no lock-free decision   */
    const sluice__rule *laid_for; /* the rule the store was last laid out for   */
    guint64 fork_version;         /* the version hot had when fork() held it          */
};

/* With the lock held: every state of calls without a key under the lock back to
 * its start. */
void sluice__memory_keyless_clear(sluice__memory_store *store);

#endif
