/* SPDX-License-Identifier: MIT */
/* A lock in one word, for the many small things a memory store locks (a key's
 * states, a stripe of its table of keys): taken with one CAS and given back with
 * one exchange; a thread that finds it taken pauses for a while (its section is
 * short), then sleeps on the word. Being atomics, not mutexes, any number of them
 * may be held at once (fork() holds every stripe: ThreadSanitizer lets a thread
 * hold 64 mutexes), and their acquire and release order what they guard. */
#ifndef SLUICE_MEMORY_LOCK_H
#define SLUICE_MEMORY_LOCK_H

#include <glib.h>

/* 0: free; 1: held; 2: held, and a thread may be asleep on it. Zeroed: free. */
typedef guint32 sluice__lock;

/* Out of line: the lock was found held (sluice__lock_take) or has sleepers
 * (sluice__lock_give). */
void sluice__lock_wait(sluice__lock *lock);
void sluice__lock_wake(sluice__lock *lock);

static inline void sluice__lock_take(sluice__lock *lock)
{
    guint32 free = 0;
    if (G_UNLIKELY(!__atomic_compare_exchange_n(lock, &free, 1, FALSE, __ATOMIC_ACQUIRE,
                                                __ATOMIC_RELAXED)))
        sluice__lock_wait(lock);
}

static inline void sluice__lock_give(sluice__lock *lock)
{
    if (G_UNLIKELY(__atomic_exchange_n(lock, 0, __ATOMIC_RELEASE) == 2))
        sluice__lock_wake(lock);
}

#endif
