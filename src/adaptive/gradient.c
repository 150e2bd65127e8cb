/* SPDX-License-Identifier: MIT */
/* The gradient controller, after Netflix's Gradient2 and Envoy's adaptive concurrency
 * filter: the no-load latency against the window's, a bounded gradient, and
 * headroom that grows with the limit.
 *
 *   g      = min(1, max(0.5, 1.1 x base / latency))
 *   target = limit / 2                    after a window with a drop
 *          = limit x g                    g < 1: a queue
 *          = limit + sqrt(limit)          g = 1 and the limit in use (the most in
 *                                         flight >= limit / 2)
 *          = limit                        g = 1, not in use
 *   next   = target                       when it is more than the limit
 *          = limit + (target - limit) / 2 when it is less
 *
 * base is the no-load latency (baseline.c), latency the window's median; 10% over
 * base is noise, not a queue (Envoy's buffer). Under a queue the latency is limit /
 * C times base (C: the calls the downstream serves at once), so limit x g is 1.1 C:
 * the limit falls towards it, grows by its headroom once no queue shows, and so
 * stays between 1.1 C and 1.1 C + sqrt(1.1 C). Gradient2 and Envoy add the headroom
 * to every update, which keeps a queue of sqrt(C) on purpose; here it is added only
 * where no queue shows, as concurrency-limits#134 proposes. base never follows the queue's latency,
 * so the limit does not creep up as Gradient2's does once its long-term average has caught up with
 * the short one. A drop halves the target, so steady timeouts push the limit down even when their
 * latency never varies (concurrency-limits#137). */
#include <math.h>

#include "adaptive/controller.h"

/* Latency within this factor of the no-load latency is noise, not a queue. */
#define TOLERANCE 1.1
/* The least gradient: one window at most halves the target. */
#define MIN_GRADIENT 0.5

double sluice__gradient_next(double limit, const sluice__window_view *w)
{
    double target;
    if (w->drops > 0) {
        target = limit * MIN_GRADIENT;
    } else if (w->latency_ns <= 0 || w->base_ns <= 0) {
        return limit; /* nothing measured */
    } else {
        double g = MAX(MIN_GRADIENT, TOLERANCE * (double)w->base_ns / (double)w->latency_ns);
        if (g < 1.0)
            target = limit * g; /* a queue */
        else if (2 * w->max_in_flight >= (gint64)limit)
            target = limit + sqrt(limit);
        else
            return limit; /* not in use: the latency says nothing of a higher limit */
    }
    return target >= limit ? target : limit + (target - limit) / 2;
}
