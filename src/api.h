/* What the files of the public API share: checking a call's arguments. */
#ifndef SLUICE_API_INTERNAL_H
#define SLUICE_API_INTERNAL_H

#include <glib.h>

#include "limiter.h"

/* Checks the arguments of an acquire and finds the limiter of name (*limiter
 * NULL: the name has no limiter, so it is not limited). FALSE with *error
 * (SLUICE_ERROR_INVALID_ARGUMENT) when an argument is bad. The name is checked in
 * full only when it is not found: every limiter's name is already valid. */
gboolean sluice__find(const char *name, const char *key, gint64 permits, sluice__limiter **limiter,
                      GError **error);

/* TRUE when name can be a limit's: not NULL, 1 to SLUICE__MAX_NAME_BYTES bytes
 * of UTF-8; else FALSE with *error (SLUICE_ERROR_INVALID_ARGUMENT). */
gboolean sluice__check_name(const char *name, GError **error);

/* TRUE when path can name a keyfile: not NULL, not empty, shorter than PATH_MAX;
 * else FALSE with *error (SLUICE_ERROR_INVALID_ARGUMENT). */
gboolean sluice__check_path(const char *path, GError **error);

/* sluice_shutdown: asynchronous decisions still out end with
 * SLUICE_ERROR_NOT_INITIALIZED on their own contexts, touching nothing freed. */
void sluice__async_shutdown(void);
/* fork(): takes the lock of the asynchronous calls waiting for a give-back
 * (taken before the engine's), or lets it go. */
void sluice__async_fork_lock(void);
void sluice__async_fork_unlock(void);

#endif
