/* SPDX-License-Identifier: MIT */
/* The vegas controller, after TCP Vegas as Netflix's VegasLimit applies it: the
 * queue the latency says the limit keeps, against thresholds that grow with the
 * log of the limit.
 *
 *   lg     = max(1, floor(log10(limit)))
 *   queue  = ceil(limit x (1 - base / latency))
 *   next   = limit - lg          after a window with a drop
 *          = limit               when not in use (most in flight < limit / 2)
 *          = limit + 6 lg        queue <= lg       (no queue: grow fast)
 *          = limit + lg          queue <  3 lg
 *          = limit - lg          queue >  6 lg
 *          = limit               otherwise
 *
 * The no-load latency is baseline.c's, shared by every controller, where
 * VegasLimit probes by taking a current latency as the no-load one (which, under
 * a queue, makes the queue look like none). */
#include <math.h>

#include "adaptive/controller.h"

double sluice__vegas_next(double limit, const sluice__window_view *w)
{
    double lg = MAX(1.0, floor(log10(limit)));
    if (w->drops > 0)
        return limit - lg;
    if (w->latency_ns <= 0 || w->base_ns <= 0 || 2 * w->max_in_flight < (gint64)limit)
        return limit;
    double queue = ceil(floor(limit) * (1.0 - (double)w->base_ns / (double)w->latency_ns));
    if (queue <= lg)
        return limit + 6 * lg;
    if (queue < 3 * lg)
        return limit + lg;
    if (queue > 6 * lg)
        return limit - lg;
    return limit;
}
