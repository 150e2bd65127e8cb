/* The clock of the memory backend and of waiting callers: monotonic, injectable. */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include <glib.h>

/* Microseconds on a monotonic scale: g_get_monotonic_time, or the test hook's. */
gint64 sluice__clock_now(void);
/* TRUE when a test hook replaces the clock. */
gboolean sluice__clock_injected(void);
/* Under a test hook: the hook's sleep until until_us. Returns FALSE (and does
 * nothing) when the real clock runs, so the caller waits its own way. */
gboolean sluice__clock_sleep_injected(gint64 until_us);
/* Rounds microseconds up to whole milliseconds; negative stays -1. */
static inline gint64 sluice__ceil_ms(gint64 us)
{
    return us < 0 ? -1 : us / 1000 + (us % 1000 != 0);
}

#endif
