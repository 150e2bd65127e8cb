/* SPDX-License-Identifier: MIT */
/* The zone's locks: process-shared robust mutexes, which a process that dies
 * holding one leaves to the next taker (EOWNERDEAD) to repair, not locked forever. */
#ifndef SLUICE_SHM_LOCK_H
#define SLUICE_SHM_LOCK_H

#include <pthread.h>

#include <glib.h>

typedef enum {
    SLUICE__LOCKED,        /* held                                                   */
    SLUICE__LOCKED_ORPHAN, /* held, but its last holder died holding it: repair what it
                            * guards, then sluice__zone_lock_repaired                 */
    SLUICE__LOCK_BUSY,     /* trylock only: someone holds it                         */
    SLUICE__LOCK_BROKEN,   /* it cannot be taken (not recoverable, or not a mutex)   */
} sluice__lock_result;

/* Makes *m a process-shared robust mutex (in a zone being made). */
gboolean sluice__zone_lock_init(pthread_mutex_t *m);
sluice__lock_result sluice__zone_lock(pthread_mutex_t *m);
sluice__lock_result sluice__zone_trylock(pthread_mutex_t *m);
/* Takes m; when its last holder died holding it, first repair(data) makes what it
 * guards consistent again, and *repairs counts it. FALSE when it cannot be taken. */
gboolean sluice__zone_lock_repairing(pthread_mutex_t *m, void (*repair)(gpointer data),
                                     gpointer data, guint64 *repairs);
/* After a SLUICE__LOCKED_ORPHAN, once what it guards is consistent again. */
void sluice__zone_lock_repaired(pthread_mutex_t *m);
void sluice__zone_unlock(pthread_mutex_t *m);

#endif
