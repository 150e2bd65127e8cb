/* SPDX-License-Identifier: MIT */
/* A limiter: one limit name's current rule and its in-process state. */
#ifndef SLUICE_LIMITER_H
#define SLUICE_LIMITER_H

#include <glib.h>
#include <sluice/stats.h>

#include "counters.h"
#include "rule.h"

typedef struct sluice__memory_store sluice__memory_store;
typedef struct sluice__denial_cache sluice__denial_cache;
typedef struct sluice__prefetch sluice__prefetch;
typedef struct sluice__adaptive sluice__adaptive;

/* One per limit name that the keyfile or a descriptor has named since
 * sluice_init; it lives until sluice_shutdown, so a pointer to it never dangles.
 * Reloads change only `rule`. */
typedef struct {
    char *name;
    const sluice__rule *rule;      /* loaded atomically; NULL: the name has no rule */
    sluice__memory_store *memory;  /* the memory backend's state for this name      */
    sluice__denial_cache *denials; /* a remote backend's denials that still hold; made
                                    * at the first, loaded atomically              */
    sluice__prefetch *prefetched;  /* permits in hand (rule prefetch), likewise     */
    sluice__counters *counters;    /* every decision on this name since sluice_init  */
    sluice__adaptive *adaptive;    /* algorithm = adaptive: the calls in flight and
                                    * their limit; made at the first, loaded atomically */
    char *redis_tag;               /* the redis backend's "{LEN:NAME" of its keys
                                    * (redis/key.h): made at its first call, loaded
                                    * atomically; g_free                            */
    gpointer shm;                  /* the shm backend's limit of the running rule, found
                                    * at its first decision after a reload (atomic)  */
} sluice__limiter;

/* The part of a limiter at *where (denials, prefetched), made zeroed (size bytes)
 * by the first thread that needs it: the pointer is loaded and set atomically. */
static inline gpointer sluice__limiter_part(gpointer *where, gsize size)
{
    gpointer part = g_atomic_pointer_get(where);
    if (G_LIKELY(part))
        return part;
    gpointer fresh = g_malloc0(size);
    if (g_atomic_pointer_compare_and_exchange(where, NULL, fresh))
        return fresh;
    g_free(fresh); /* another thread made it first */
    return g_atomic_pointer_get(where);
}

static inline const sluice__rule *sluice__limiter_rule(sluice__limiter *limiter)
{
    return g_atomic_pointer_get(&limiter->rule);
}

#endif
