/* SPDX-License-Identifier: MIT */
/* Waiting for another thread that holds a seqlock for a few stores: the CPU's
 * pause for a while, then the CPU given up (its holder may have been preempted). */
#ifndef SLUICE_MEMORY_SPIN_WAIT_H
#define SLUICE_MEMORY_SPIN_WAIT_H

#include <glib.h>

/* Waits that pause before each one yields the CPU. */
#define SLUICE__SPINS_BEFORE_YIELD 64

/* The wait after `tries` failed tries (0 for the first): a pause of the CPU (which
 * spares the sibling hardware thread), from SLUICE__SPINS_BEFORE_YIELD on a yield. */
static inline void sluice__spin_wait(guint tries)
{
    if (tries >= SLUICE__SPINS_BEFORE_YIELD) {
        g_thread_yield();
        return;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
