/* SPDX-License-Identifier: MIT */
/* A window of calls of an adaptive limit: the latencies and drops its controller
 * reads when the window closes. */
#ifndef SLUICE_ADAPTIVE_WINDOW_H
#define SLUICE_ADAPTIVE_WINDOW_H

#include <glib.h>

/* The fewest calls (returned or dropped) a window closes with. */
#define SLUICE__WINDOW_MIN_SAMPLES 10
/* The shortest window; a window lasts at least twice the last median latency. */
#define SLUICE__WINDOW_MIN_NS (G_GINT64_CONSTANT(100) * 1000000)
/* Latencies kept for the median: a uniform sample of the window's (reservoir). */
#define SLUICE__WINDOW_KEPT 128

typedef struct {
    gint64 end_ns;        /* closes at the first call that returns from then on  */
    guint samples, drops; /* calls that returned ok, calls dropped               */
    gint64 max_in_flight;
    guint64 random; /* xorshift state: jitter and reservoir (never 0)       */
    gint64 kept[SLUICE__WINDOW_KEPT];
} sluice__window;

/* A window's first state: random seeds its jitter and sampling. */
void sluice__window_init(sluice__window *w, guint64 random);

/* Starts the next window at now_ns, last_latency_ns the last median (0: none): it
 * lasts max(SLUICE__WINDOW_MIN_NS, 2 x last_latency_ns), made up to 15% longer at
 * random so that processes do not close theirs in step. */
void sluice__window_open(sluice__window *w, gint64 now_ns, gint64 last_latency_ns);

/* A call that returned ok after latency_ns, or (latency_ns < 0) was dropped, with
 * in_flight calls in flight (itself included). */
void sluice__window_add(sluice__window *w, gint64 latency_ns, gint64 in_flight);

/* TRUE when the window may close at now_ns: it has lasted its length and holds
 * SLUICE__WINDOW_MIN_SAMPLES calls. */
gboolean sluice__window_due(const sluice__window *w, gint64 now_ns);

/* The median latency of the calls that returned ok (0: none); reorders kept. */
gint64 sluice__window_median(sluice__window *w);

#endif
