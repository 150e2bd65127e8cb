/* SPDX-License-Identifier: MIT */
/* A lock in one word (src/memory/lock.h): its waits. On Linux a thread sleeps on
 * the word (a private futex); elsewhere it yields the CPU until the word is free. */
#include "memory/lock.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "memory/spin_wait.h"

static void sleep_while(sluice__lock *lock, guint32 value)
{
#if defined(__linux__)
    syscall(SYS_futex, lock, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
#else
    (void)lock;
    (void)value;
    g_thread_yield();
#endif
}

void sluice__lock_wait(sluice__lock *lock)
{
    /* pause while the holder is likely on a CPU, finishing a short section */
    for (guint spins = 0; spins < SLUICE__SPINS_BEFORE_YIELD; spins++) {
        sluice__spin_wait(spins);
        guint32 seen = __atomic_load_n(lock, __ATOMIC_RELAXED);
        if (seen == 2)
            break; /* others sleep already: join them */
        if (seen == 0 &&
            __atomic_compare_exchange_n(lock, &seen, 1, FALSE, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
    }
    /* taken as 2, since another may sleep: its holder wakes one when it gives it */
    while (__atomic_exchange_n(lock, 2, __ATOMIC_ACQUIRE) != 0)
        sleep_while(lock, 2);
}

void sluice__lock_wake(sluice__lock *lock)
{
#if defined(__linux__)
    syscall(SYS_futex, lock, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
    (void)lock;
#endif
}
