/* SPDX-License-Identifier: MIT */
/** @file
 * The clock sluice decides by: the monotonic clock, or a virtual one that a
 * program sets to replay a trace or simulate time. */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include <glib.h>
#include <sluice/export.h>

G_BEGIN_DECLS

/** The current time in microseconds on a monotonic scale. */
typedef gint64 (*sluice_clock_now_func)(gpointer user_data);
/** Called instead of sleeping when a caller waits for permits (sluice_acquire_wait,
 * a rule's `wait`, the asynchronous API): it should advance the virtual clock to
 * until_us (or further) and return. NULL: waiting callers return at once. */
typedef void (*sluice_clock_sleep_func)(gint64 until_us, gpointer user_data);

/** Makes `now` the clock of every decision of the process, and `sleep` the way
 * waiting callers wait; now == NULL restores the real monotonic clock. Both may be
 * called from any thread that decides, at once. Set it before deciding: times
 * already stored by the memory backend are on the clock that stored them. On the
 * redis backend the virtual time is sent with each script call and replaces Redis
 * TIME, so every process sharing the limits must use the same clock (the `sluice
 * replay` command does this with a private key_prefix). A virtual time counts as
 * microseconds since 1970-01-01T00:00:00Z where a rule places windows on the
 * calendar (fixed_window, anchor = epoch). */
SLUICE_API void sluice_clock_set(sluice_clock_now_func now, sluice_clock_sleep_func sleep,
                                 gpointer user_data);

/** The time a decision made now would be made at, in microseconds: the virtual
 * clock's when one is set, else CLOCK_MONOTONIC's (as g_get_monotonic_time), read
 * the way decisions read it (from the CPU's time-stamp counter where the kernel
 * keeps CLOCK_MONOTONIC on it: docs/design.md). On one thread it never
 * goes back. */
SLUICE_API gint64 sluice_clock_now(void);

G_END_DECLS

#endif
