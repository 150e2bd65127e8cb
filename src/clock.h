/* The clock of every decision and of waiting callers: monotonic, or the virtual one
 * of sluice_clock_set (include/sluice/clock.h). */
#ifndef SLUICE_CLOCK_INTERNAL_H
#define SLUICE_CLOCK_INTERNAL_H

#include <glib.h>

/* Microseconds on a monotonic scale: g_get_monotonic_time, or the virtual clock's. */
gint64 sluice__clock_now(void);
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
