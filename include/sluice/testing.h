/* Test hooks: an injectable clock and injected backend failures. Not for production. */
#ifndef SLUICE_TESTING_H
#define SLUICE_TESTING_H

#include <glib.h>
#include <sluice/export.h>

G_BEGIN_DECLS

/* The memory backend's clock, in microseconds on a monotonic scale. */
typedef gint64 (*sluice_clock_now_func)(gpointer user_data);
/* Called instead of sleeping when a caller waits for permits: the hook should
 * advance its clock to until_us (or further) and return. */
typedef void (*sluice_clock_sleep_func)(gint64 until_us, gpointer user_data);

/* Replaces the clock (and the sleep of waiting callers) for the whole process;
 * now == NULL restores the real monotonic clock. Set it before deciding: times
 * already stored by the memory backend are on the clock that stored them. */
SLUICE_API void sluice_testing_set_clock(sluice_clock_now_func now, sluice_clock_sleep_func sleep,
                                         gpointer user_data);

/* Makes the next `count` backend calls fail with SLUICE_ERROR_BACKEND and
 * `message`, as a broken backend would, so the on_error policies and error
 * callbacks can be tested on any backend. count 0 clears it. */
SLUICE_API void sluice_testing_fail_backend(guint count, const char *message);

/* How many per-key states the memory backend keeps for the limit `name` (states
 * back to full capacity are swept out as the table grows). */
SLUICE_API gsize sluice_testing_memory_keys(const char *name);

G_END_DECLS

#endif
