/* SPDX-License-Identifier: MIT */
/* What the rest of sluice asks of the asynchronous API (include/sluice/async.h). */
#ifndef SLUICE_ASYNC_INTERNAL_H
#define SLUICE_ASYNC_INTERNAL_H

#include <glib.h>

/* sluice_shutdown: asynchronous decisions still out end with
 * SLUICE_ERROR_NOT_INITIALIZED on their own contexts, touching nothing freed. */
void sluice__async_shutdown(void);
/* fork(): takes the lock of the asynchronous calls waiting for a give-back
 * (taken before the engine's), or lets it go. */
void sluice__async_fork_lock(void);
void sluice__async_fork_unlock(void);

#endif
