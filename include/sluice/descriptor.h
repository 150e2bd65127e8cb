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

/** The layout of struct sluice_descriptor these headers write: the macros put it
 * in `version`, so that a later library knows which fields a program has. */
#define SLUICE_DESCRIPTOR_VERSION 1

/** What sluice keeps for a descriptor (its bound limit, its stats): allocated by the
 * library when the descriptor is first bound, opaque. */
typedef struct sluice_descriptor_private sluice_descriptor_private;

/** One per RATE_LIMITED* use, static, never allocated. The macros create them
 * (compiled into the program, so the layout is frozen: a later version may only
 * append fields, with a new SLUICE_DESCRIPTOR_VERSION); tools read name, file,
 * line and function. The priv fields are sluice's: the registry's link, which
 * constructors set before main without allocating, and a pointer to what the
 * library allocates when it binds the descriptor. */
struct sluice_descriptor {
    guint version;                   /**< SLUICE_DESCRIPTOR_VERSION of the macros     */
    int line;                        /**< the line the macro stands on                */
    const char *name;                /**< the limit's name, as in [limit:NAME]        */
    const char *file;                /**< the file the macro stands in                */
    const char *function;            /**< the decorated function                      */
    sluice_descriptor_private *priv; /**< sluice's: NULL until bound (atomic)          */
    sluice_descriptor *priv_next;    /**< sluice's: the registry's list               */
    gint priv_registered;            /**< sluice's: linked into the registry (atomic) */
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
