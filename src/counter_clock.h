/* SPDX-License-Identifier: MIT */
/* CLOCK_MONOTONIC in nanoseconds, read from the CPU's time-stamp counter where
 * that is sound (a third of clock_gettime's cost), else from clock_gettime. */
#ifndef SLUICE_COUNTER_CLOCK_H
#define SLUICE_COUNTER_CLOCK_H

#include <glib.h>

/* Nanoseconds on CLOCK_MONOTONIC's scale; never less than the last value the
 * calling thread got. */
gint64 sluice__monotonic_ns(void);

#ifdef SLUICE_COUNTER_CLOCK_JUMPS
/* For tests (check_clock compiles its own copy with SLUICE_COUNTER_CLOCK_JUMPS; the
 * library has no such hook): the counter reads from now on as if it had jumped by
 * ns (its readings move, clock_gettime does not). */
void sluice__monotonic_jump(gint64 ns);
#endif

/* What sluice__monotonic_ns reads: "tsc" (the counter) or "system" (clock_gettime). */
const char *sluice__monotonic_source(void);

/* fork(): chooses the source if no call has yet, then holds the line (no reader
 * draws it) until _fork_unlock, so that the child finds both whole. */
void sluice__monotonic_fork_lock(void);
void sluice__monotonic_fork_unlock(void);

#endif
