/* SPDX-License-Identifier: MIT */
/* What the engine calls for a rule with algorithm = adaptive: decisions in process
 * whatever the backend, and the ends of the calls they admit, with their latency. */
#ifndef SLUICE_ADAPTIVE_H
#define SLUICE_ADAPTIVE_H

#include <glib.h>

#include "algorithm.h"
#include "limiter.h"
#include "adaptive/in_flight.h"

/* Decides `permits` calls (0: a peek at one) of limiter under rule (adaptive) in
 * process, as sluice__decide answers: limit the current limit, remaining what
 * else fits under it, leased the calls admitted. The time an admitted call starts
 * is kept for the thread that ends it (sluice__adaptive_end_calls). */
void sluice__adaptive_decide(sluice__limiter *limiter, const sluice__rule *rule, gint64 permits,
                             sluice__verdict *verdict);

/* Ends `permits` calls of limiter as `end` says. An ok call's latency runs from the
 * admission this thread made last for limiter and has not ended; with none (the
 * calls were admitted on another thread) the calls are only given back. */
void sluice__adaptive_end_calls(sluice__limiter *limiter, gint64 permits, sluice__call_end end);

/* A call of limiter that never was in flight ended as a drop: the limiter failed
 * and an error callback answered instead. */
void sluice__adaptive_dropped(sluice__limiter *limiter);

/* The current limit of limiter under rule (adaptive): its floor before any
 * decision, and within the rule's bounds before the first decision under it. */
gint64 sluice__adaptive_current(sluice__limiter *limiter, const sluice__rule *rule);

/* Forgets what limiter's adaptive rule learnt (sluice_reset): back at its floor. */
void sluice__adaptive_forget(sluice__limiter *limiter);

#endif
