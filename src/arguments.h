/* SPDX-License-Identifier: MIT */
/* The checks every entry point makes of its arguments, and the lookup of the
 * limiter a call names. */
#ifndef SLUICE_ARGUMENTS_H
#define SLUICE_ARGUMENTS_H

#include <glib.h>

#include "limiter.h"
#include "registry.h"

/* Each is TRUE when its argument is good, else FALSE with *error
 * (SLUICE_ERROR_INVALID_ARGUMENT) saying what is wrong and what is expected. */

/* name can be a limit's: the rule of limit_name.h. */
gboolean sluice__check_name(const char *name, GError **error);
/* key is NULL (no key) or 1 to SLUICE__MAX_KEY_BYTES bytes of UTF-8. */
gboolean sluice__check_key(const char *key, GError **error);
/* timeout_ms is a wait sluice can keep: 0 to 36500 days. */
gboolean sluice__check_timeout_ms(gint64 timeout_ms, GError **error);
/* path can name a keyfile: not NULL, not empty, shorter than PATH_MAX. */
gboolean sluice__check_path(const char *path, GError **error);

/* The arguments of an acquire, after name was looked up (found: its limiter, or
 * NULL). The name is checked in full only when it was not found: every
 * limiter's name is already valid. */
gboolean sluice__check_found(const char *name, const char *key, gint64 permits,
                             const sluice__limiter *found, GError **error);

/* Checks the arguments of an acquire and finds the limiter of name (*limiter
 * NULL: the name has no limiter, so it is not limited). Inline: a call on a
 * known name, with no key, checks nothing more. */
static inline gboolean sluice__find(const char *name, const char *key, gint64 permits,
                                    sluice__limiter **limiter, GError **error)
{
    *limiter = name && *name ? sluice__registry_find(name) : NULL;
    return (*limiter && !key && permits >= 0) ||
           sluice__check_found(name, key, permits, *limiter, error);
}

#endif
