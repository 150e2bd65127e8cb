/* SPDX-License-Identifier: MIT */
/* The registry: descriptors, the limiter of each name, and binding them to rules. */
#ifndef SLUICE_REGISTRY_H
#define SLUICE_REGISTRY_H

#include <glib.h>
#include <sluice/descriptor.h>

#include "config.h"
#include "limiter.h"

/* What the library keeps for a descriptor, out of the structure the macros compile
 * into programs: made when the descriptor is first bound, never freed (a function's
 * stats count from the start of the process, across sluice_shutdown), and reachable
 * from the descriptor. Every call reads it; no call writes it: the counters every
 * limited call writes are in per-thread stripes of their own. */
struct sluice_descriptor_private {
    sluice__limiter *limiter;   /* bound limiter (atomic); NULL after sluice_shutdown */
    sluice__counters *counters; /* its calls, in stripes: threads of one site share no line */
};

/* The limiter a descriptor is bound to (bound: its priv, loaded atomically): a
 * pointer load. Before sluice_init and after sluice_shutdown there is none (NULL),
 * and decorated bodies run. */
static inline sluice__limiter *sluice__registry_limiter_of(sluice_descriptor_private *bound)
{
    return G_LIKELY(bound) ? g_atomic_pointer_get(&bound->limiter) : NULL;
}

/* The slow path of a descriptor's first call: registers it and binds it to the
 * limiter of its name. NULL when sluice is not initialized. */
sluice__limiter *sluice__registry_bind(sluice_descriptor *descriptor);

/* The limiter of a name, or NULL when no rule or descriptor has named it. */
sluice__limiter *sluice__registry_find(const char *name);

/* Publishes the rules of config: every limiter gets its new rule (or none), and
 * every registered descriptor is bound. Safe while other threads decide. */
void sluice__registry_apply(const sluice__config *config);

/* Unbinds every descriptor and frees every limiter and rule. No thread may be
 * deciding. */
void sluice__registry_clear(void);

/* TRUE between sluice_init and sluice_shutdown. */
gboolean sluice__registry_active(void);

/* Calls fn for every limiter (every name a rule or a descriptor has named since
 * sluice_init), holding the registry's read lock: fn must not call back into
 * sluice. FALSE when sluice is not initialized. */
typedef void (*sluice__limiter_func)(sluice__limiter *limiter, gpointer user_data);
gboolean sluice__registry_foreach_limiter(sluice__limiter_func fn, gpointer user_data);

/* How many per-key states the memory backend holds for name (0: none). */
gsize sluice__registry_memory_keys(const char *name);

#endif
