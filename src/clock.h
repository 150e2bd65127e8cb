/* SPDX-License-Identifier: MIT */
/* The clock of every decision and of waiting callers: monotonic, or the virtual one
 * of sluice_clock_set (include/sluice/clock.h). */
#ifndef SLUICE_CLOCK_INTERNAL_H
#define SLUICE_CLOCK_INTERNAL_H

#include <glib.h>

/* Microseconds on a monotonic scale: g_get_monotonic_time, or the virtual clock's. */
gint64 sluice__clock_now(void);
/* Keeps the next real clock read of sluice__clock_now on this thread, so that a
 * decision can be timed from its own read instead of one more. */
void sluice__clock_watch(void);
/* That read in nanoseconds on CLOCK_MONOTONIC (sluice__stats_clock_ns' scale), or
 * -1 when there was none (a virtual clock, or no read); ends the watch. */
gint64 sluice__clock_watched_ns(void);
/* TRUE when a virtual clock replaces the real one. */
gboolean sluice__clock_injected(void);
/* Under a virtual clock: its sleep until until_us. Returns FALSE (and does
 * nothing) when the real clock runs, so the caller waits its own way. */
gboolean sluice__clock_sleep_injected(gint64 until_us);
/* Rounds microseconds up to whole milliseconds; negative stays -1. */
static inline gint64 sluice__ceil_ms(gint64 us)
{
    return us < 0 ? -1 : us / 1000 + (us % 1000 != 0);
}

#endif
