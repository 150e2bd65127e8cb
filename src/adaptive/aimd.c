/* SPDX-License-Identifier: MIT */
/* The aimd controller, after Netflix's AIMDLimit: add one while the limit is in use,
 * multiply down on a timeout or a drop.
 *
 *   timeout = latency > 2 x base
 *   next    = min(limit - 1, floor(limit x 0.9))   after a window with a drop or a timeout
 *           = limit + 1                            when in use (most in flight >= limit / 2)
 *           = limit                                otherwise
 *
 * AIMDLimit's timeout is a fixed 5 s; here it is relative to the no-load latency,
 * so that a decorated body, which reports no timeouts of its own, still backs off. */
#include <math.h>

#include "adaptive/controller.h"

#define BACKOFF 0.9
#define TIMEOUT 2.0

double sluice__aimd_next(double limit, const sluice__window_view *w)
{
    gboolean timeout =
        w->latency_ns > 0 && w->base_ns > 0 && (double)w->latency_ns > TIMEOUT * (double)w->base_ns;
    double whole = floor(limit);
    if (w->drops > 0 || timeout)
        return MIN(whole - 1, floor(whole * BACKOFF));
    if (2 * w->max_in_flight >= (gint64)whole)
        return whole + 1;
    return limit;
}
