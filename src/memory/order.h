/* SPDX-License-Identifier: MIT */
/* The times of a memory store's decisions: in the order the decisions are committed.
 *
 * Each decision uses a time its thread read during the call, and decisions are
 * committed in the order of their times, as under a lock: a decision that finds a
 * later one committed since it read the clock reads it again (src/memory/hot.h for
 * the lock-free state, lock_in_order in src/memory/backend.c for the rest). */
#ifndef SLUICE_MEMORY_ORDER_H
#define SLUICE_MEMORY_ORDER_H

#include <glib.h>

#include "clock.h"

/* The time now_us on the clock of decisions, in µs since the Unix epoch: the
 * wall clock (read again at each decision, so that a window follows it when it is
 * set), or under a virtual clock (sluice_clock_set) the virtual time itself, as
 * on Redis where it replaces TIME. */
static inline gint64 sluice__memory_since_epoch(gint64 now_us)
{
    return sluice__clock_injected() ? now_us : g_get_real_time();
}

/* A time read after a decision committed at `last`, for the next: the two
 * threads' reads of the counter clock may be out of order by a few ns
 * (src/counter_clock.c), so the time is at least `last`. A virtual clock's time
 * is taken as it is (a program may set it back). */
static inline gint64 sluice__memory_in_order(gint64 now, gint64 last)
{
    return now < last && !sluice__clock_injected() ? last : now;
}

#endif
