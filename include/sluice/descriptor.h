/* SPDX-License-Identifier: MIT */
/** @file
 * Descriptors: one static record per decorated place, listed for tools. */
#ifndef SLUICE_DESCRIPTOR_H
#define SLUICE_DESCRIPTOR_H

#include <glib.h>
#include <sluice/export.h>
#include <sluice/stats.h>

G_BEGIN_DECLS

/** A decorated place: see struct sluice_descriptor. */
typedef struct sluice_descriptor sluice_descriptor;

/** One per RATE_LIMITED* use, static, never allocated. The macros create them;
 * tools read name, file, line and function. The priv_ fields are sluice's. */
struct sluice_descriptor {
    const char *name;             /**< the limit's name, as in [limit:NAME]             */
    const char *file;             /**< where the macro stands                           */
    int line;                     /**< and on which line                              */
    const char *function;         /**< the decorated function                           */
    gpointer priv_limiter;        /**< bound limiter, loaded atomically        */
    sluice_descriptor *priv_next; /**< the registry's list                     */
    gint priv_registered;         /**< linked into the registry (atomic)       */
    sluice_stats priv_stats;      /**< its calls: read with sluice_descriptor_stats */
};

/** Calls fn for every registered descriptor, in registration order reversed:
 * every definition form (registered before main) and every guard form that has
 * run at least once. has_rule says whether the loaded keyfile limits its name. */
typedef void (*sluice_descriptor_func)(const sluice_descriptor *descriptor, gboolean has_rule,
                                       gpointer user_data);
/** Calls fn for every registered descriptor (see sluice_descriptor_func). */
SLUICE_API void sluice_descriptors_foreach(sluice_descriptor_func fn, gpointer user_data);

/** Every call of one decorated function (see sluice_descriptors_foreach) since
 * the process started; kept across sluice_shutdown and sluice_init. */
SLUICE_API void sluice_descriptor_stats(const sluice_descriptor *descriptor, sluice_stats *out);

G_END_DECLS

#endif
