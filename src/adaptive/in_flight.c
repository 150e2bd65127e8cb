/* SPDX-License-Identifier: MIT */
/* An adaptive limit's limiter: counts calls in flight against a limit its controller
 * sets from their latency.
 *
 * Admission takes no lock: a compare-and-swap of the count in flight against the
 * limit, both atomics on one cache line. A call that ends gives its count back and,
 * under a lock of its own line, records its latency in the window; the call that
 * closes a window asks the controller for the next limit and publishes it. */
#include "adaptive/in_flight.h"

#include <math.h>

#include "adaptive/baseline.h"
#include "adaptive/window.h"

struct sluice__adaptive {
    /* read by every admission */
    gint64 in_flight;  /* atomic */
    gint64 limit;      /* atomic: the whole part of `estimate` */
    gconstpointer tag; /* atomic */
    /* written when calls end, under lock */
    GMutex lock __attribute__((aligned(64)));
    double estimate;
    gint64 min_limit, max_limit;
    sluice__controller controller;
    gint64 latency_ns; /* atomic: the last window's median */
    sluice__baseline baseline;
    gboolean opened; /* the window has started */
    sluice__window window;
};

sluice__adaptive *sluice__adaptive_new(guint64 seed)
{
    sluice__adaptive *a = g_aligned_alloc0(1, sizeof *a, 64);
    g_mutex_init(&a->lock);
    sluice__window_init(&a->window, seed);
    a->limit = 1;
    a->estimate = 1;
    a->min_limit = a->max_limit = 1;
    return a;
}

void sluice__adaptive_free(sluice__adaptive *a)
{
    if (!a)
        return;
    g_mutex_clear(&a->lock);
    g_aligned_free(a);
}

/* With the lock held: estimate kept within the bounds, and published. */
static void set_estimate(sluice__adaptive *a, double estimate)
{
    a->estimate = CLAMP(estimate, (double)a->min_limit, (double)a->max_limit);
    __atomic_store_n(&a->limit, (gint64)floor(a->estimate), __ATOMIC_RELEASE);
}

void sluice__adaptive_configure(sluice__adaptive *a, gconstpointer tag, gint64 min_limit,
                                gint64 max_limit, sluice__controller controller)
{
    g_mutex_lock(&a->lock);
    gboolean first = __atomic_load_n(&a->tag, __ATOMIC_RELAXED) == NULL;
    a->min_limit = min_limit;
    a->max_limit = max_limit;
    a->controller = controller;
    set_estimate(a, first ? (double)min_limit : a->estimate);
    __atomic_store_n(&a->tag, tag, __ATOMIC_RELEASE);
    g_mutex_unlock(&a->lock);
}

gconstpointer sluice__adaptive_tag(sluice__adaptive *a)
{
    return __atomic_load_n(&a->tag, __ATOMIC_ACQUIRE);
}

gboolean sluice__adaptive_admit(sluice__adaptive *a, gint64 permits, gint64 *limit,
                                gint64 *in_flight)
{
    gint64 n = __atomic_load_n(&a->in_flight, __ATOMIC_RELAXED);
    gint64 l = __atomic_load_n(&a->limit, __ATOMIC_ACQUIRE);
    gboolean admitted;
    if (permits == 0) {
        admitted = n + 1 <= l;
    } else {
        do {
            admitted = n + permits <= l;
        } while (admitted && !__atomic_compare_exchange_n(&a->in_flight, &n, n + permits, TRUE,
                                                          __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
        if (admitted)
            n += permits;
    }
    *limit = l;
    *in_flight = n;
    return admitted;
}

/* With the lock held: closes the window at now_ns and sets the next limit. */
static void close_window(sluice__adaptive *a, gint64 now_ns)
{
    sluice__window *w = &a->window;
    gint64 median = sluice__window_median(w);
    gboolean at_floor = floor(a->estimate) <= (double)a->min_limit;
    sluice__baseline_update(&a->baseline, median, w->samples, w->drops, at_floor);
    sluice__window_view view = {median, a->baseline.ns, w->max_in_flight, w->drops};
    set_estimate(a, sluice__controller_next(a->controller, a->estimate, &view));
    if (median > 0)
        __atomic_store_n(&a->latency_ns, median, __ATOMIC_RELAXED);
    sluice__window_open(w, now_ns, median > 0 ? median : a->latency_ns);
}

void sluice__adaptive_end(sluice__adaptive *a, gint64 permits, sluice__call_end end,
                          gint64 latency_ns, gint64 now_ns)
{
    gint64 n = __atomic_load_n(&a->in_flight, __ATOMIC_RELAXED);
    gint64 back;
    do {
        back = MIN(permits, n);
    } while (back > 0 && !__atomic_compare_exchange_n(&a->in_flight, &n, n - back, TRUE,
                                                      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
    if (end == SLUICE__CALL_IGNORED)
        return;
    g_mutex_lock(&a->lock);
    if (!a->opened) {
        sluice__window_open(&a->window, now_ns, 0);
        a->opened = TRUE;
    }
    sluice__window_add(&a->window, end == SLUICE__CALL_OK ? MAX(0, latency_ns) : -1, n);
    if (sluice__window_due(&a->window, now_ns))
        close_window(a, now_ns);
    g_mutex_unlock(&a->lock);
}

gint64 sluice__adaptive_limit(sluice__adaptive *a)
{
    return __atomic_load_n(&a->limit, __ATOMIC_ACQUIRE);
}

gint64 sluice__adaptive_in_flight(sluice__adaptive *a)
{
    return __atomic_load_n(&a->in_flight, __ATOMIC_RELAXED);
}

gint64 sluice__adaptive_latency_ns(sluice__adaptive *a)
{
    return __atomic_load_n(&a->latency_ns, __ATOMIC_RELAXED);
}

gint64 sluice__adaptive_base_ns(sluice__adaptive *a)
{
    g_mutex_lock(&a->lock);
    gint64 ns = a->baseline.ns;
    g_mutex_unlock(&a->lock);
    return ns;
}

void sluice__adaptive_reset(sluice__adaptive *a)
{
    g_mutex_lock(&a->lock);
    a->baseline = (sluice__baseline){0, 0};
    a->opened = FALSE;
    __atomic_store_n(&a->latency_ns, 0, __ATOMIC_RELAXED);
    set_estimate(a, (double)a->min_limit);
    g_mutex_unlock(&a->lock);
}
