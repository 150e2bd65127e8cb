/* SPDX-License-Identifier: MIT */
/** @file
 * Starting, reloading and stopping sluice: the keyfile and the rules it holds. */
#ifndef SLUICE_LIFECYCLE_H
#define SLUICE_LIFECYCLE_H

#include <glib.h>
#include <sluice/export.h>

G_BEGIN_DECLS

/** Loads the keyfile at config_path (NULL: $SLUICE_CONFIG when set, else the
 * defaults: memory backend, no rules) and binds every decorated function to its
 * rule. Logs (domain "sluice", level WARNING) each decorated name that has no rule. Returns FALSE
 * with *error set (SLUICE_ERROR_CONFIG: "FILE: [GROUP] KEY = VALUE: what is
 * expected") when the file cannot be read or a value is wrong; then nothing
 * changes. Calling it again while initialized is the same as sluice_reload with a
 * new path. */
SLUICE_API gboolean sluice_init(const char *config_path, GError **error);

/** Rereads the keyfile sluice_init loaded and swaps the new rules in atomically
 * while other threads keep deciding. A rule whose algorithm and parameters did not
 * change keeps its state. A file that fails validation changes nothing. */
SLUICE_API gboolean sluice_reload(GError **error);

/** Frees every rule and all limiter state. No thread may be inside a sluice call.
 * Decorated functions called afterwards run their bodies (no rules). */
SLUICE_API void sluice_shutdown(void);

G_END_DECLS

#endif
