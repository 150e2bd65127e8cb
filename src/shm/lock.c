/* SPDX-License-Identifier: MIT */
/* Process-shared robust mutexes (pthread_mutexattr_setrobust): when the holder
 * dies, the kernel hands the mutex to the next taker with EOWNERDEAD, and the mutex
 * stays usable once the taker has marked it consistent. */
#include "shm/lock.h"

#include <errno.h>

gboolean sluice__zone_lock_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t attr;
    if (pthread_mutexattr_init(&attr) != 0)
        return FALSE;
    gboolean ok = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) == 0 &&
                  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) == 0 &&
                  pthread_mutex_init(m, &attr) == 0;
    pthread_mutexattr_destroy(&attr);
    return ok;
}

static sluice__lock_result result_of(int rc)
{
    switch (rc) {
    case 0:
        return SLUICE__LOCKED;
    case EOWNERDEAD:
        return SLUICE__LOCKED_ORPHAN;
    case EBUSY:
        return SLUICE__LOCK_BUSY;
    default: /* ENOTRECOVERABLE, EINVAL (a damaged mutex), EDEADLK */
        return SLUICE__LOCK_BROKEN;
    }
}

sluice__lock_result sluice__zone_lock(pthread_mutex_t *m)
{
    return result_of(pthread_mutex_lock(m));
}

sluice__lock_result sluice__zone_trylock(pthread_mutex_t *m)
{
    return result_of(pthread_mutex_trylock(m));
}

void sluice__zone_lock_repaired(pthread_mutex_t *m)
{
    pthread_mutex_consistent(m);
}

void sluice__zone_unlock(pthread_mutex_t *m)
{
    pthread_mutex_unlock(m);
}

gboolean sluice__zone_lock_repairing(pthread_mutex_t *m, void (*repair)(gpointer data),
                                     gpointer data, guint64 *repairs)
{
    switch (sluice__zone_lock(m)) {
    case SLUICE__LOCKED:
        return TRUE;
    case SLUICE__LOCKED_ORPHAN:
        repair(data);
        __atomic_fetch_add(repairs, 1, __ATOMIC_RELAXED);
        sluice__zone_lock_repaired(m);
        return TRUE;
    default:
        return FALSE;
    }
}
