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
#include "memory/keyed.h"
#include "override.h"
#include "rule.h"

struct sluice__memory_store {
    sluice__hot_state hot;
    pthread_mutex_t lock __attribute__((aligned(SLUICE__LINE))); /* adaptive: spins briefly
                                                                  * before it sleeps, as the
                                                                  * section is short; taken
                                                                  * by a reshape, and by
                                                                  * what has no key below */
    guint64 seq;        /* atomic: decisions under the lock so far          */
    gint64 changed;     /* the time of the last decision under the lock     */
    gboolean shaped;    /* `shape` is set                                   */
    sluice__rule shape; /* the rule the states below were kept under        */
    sluice__state keyless[1 + SLUICE__MAX_BANDS];
    gint64 blocked_until;         /* a block of calls without a key (sluice_block), 0: none;
                                   * while set, hot.rule is NULL: no lock-free decision   */
    const sluice__rule *laid_for; /* the rule the store was last laid out for   */
    guint64 fork_version;         /* the version hot had when fork() held it          */
    sluice__keyed keyed;          /* per-key states, with locks of their own          */
};

/* The limit's rule a decision follows: the newest, not the caller's (a caller that
 * read the rule before a reload must not take the state back to the old rule's
 * shape). The caller's rule may be an override of a key (src/override.h): its
 * limit's own rule stands for it. */
static inline const sluice__rule *sluice__memory_newest(sluice__limiter *limiter,
                                                        const sluice__rule *rule)
{
    const sluice__rule *current = sluice__limiter_rule(limiter);
    return current ? current : sluice__rule_base(rule);
}

/* With the lock held: every state of calls without a key under the lock back to
 * its start. */
void sluice__memory_keyless_clear(sluice__memory_store *store);

#endif
