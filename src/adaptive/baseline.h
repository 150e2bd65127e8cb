/* SPDX-License-Identifier: MIT */
/* The no-load latency of an adaptive limit: what a call takes when nothing queues. */
#ifndef SLUICE_ADAPTIVE_BASELINE_H
#define SLUICE_ADAPTIVE_BASELINE_H

#include <glib.h>

/* Windows in a row at the floor that make their latency the no-load one. */
#define SLUICE__BASELINE_REBASE 5

typedef struct {
    gint64 ns;      /* the no-load latency; 0 until a window has measured one */
    guint at_floor; /* windows in a row measured at the floor, without a drop  */
} sluice__baseline;

/* After a window of `samples` calls that returned ok with median latency_ns and
 * `drops` dropped ones, decided with the limit at its floor or not: the least
 * median of a full window (SLUICE__WINDOW_MIN_SAMPLES) so far, or the median of
 * the SLUICE__BASELINE_REBASE-th full window in a row at the floor without a drop
 * (the downstream itself got slower: at the floor, nothing of ours queues). */
void sluice__baseline_update(sluice__baseline *b, gint64 latency_ns, guint samples, guint drops,
                             gboolean at_floor);

#endif
