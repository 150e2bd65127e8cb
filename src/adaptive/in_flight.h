/* SPDX-License-Identifier: MIT */
/* An adaptive limit's limiter: counts calls in flight against a limit its controller
 * sets from their latency. */
#ifndef SLUICE_ADAPTIVE_IN_FLIGHT_H
#define SLUICE_ADAPTIVE_IN_FLIGHT_H

#include <glib.h>

#include "adaptive/controller.h"

typedef struct sluice__adaptive sluice__adaptive;

/* How a call in flight ended (the values of the public sluice_call_outcome). */
typedef enum {
    SLUICE__CALL_OK,      /* returned: its latency is a sample                    */
    SLUICE__CALL_DROPPED, /* failed as overload fails (a timeout, an error callback) */
    SLUICE__CALL_IGNORED, /* says nothing of the downstream: only given back       */
} sluice__call_end;

/* A limiter with no bounds yet (sluice__adaptive_configure sets them); seed makes
 * its windows' jitter and sampling (the same seed, the same windows). */
sluice__adaptive *sluice__adaptive_new(guint64 seed);
void sluice__adaptive_free(sluice__adaptive *a);

/* Sets the bounds and the controller, and the tag they came with (the rule): the
 * first time the limit starts at min_limit; later it is kept within the new
 * bounds, and the no-load latency learnt so far stays. */
void sluice__adaptive_configure(sluice__adaptive *a, gconstpointer tag, gint64 min_limit,
                                gint64 max_limit, sluice__controller controller);
/* The tag of the last configure (NULL before): loaded atomically. */
gconstpointer sluice__adaptive_tag(sluice__adaptive *a);

/* Admits `permits` calls when they fit under the limit with those in flight, and
 * counts them in flight; permits 0 asks whether one would fit and takes nothing.
 * *limit and *in_flight: the limit and the calls in flight after the decision.
 * Takes no lock. */
gboolean sluice__adaptive_admit(sluice__adaptive *a, gint64 permits, gint64 *limit,
                                gint64 *in_flight);

/* Ends `permits` calls in flight (at most those in flight: a give-back of more
 * gives back what there is), at now_ns: ok with latency_ns a sample; dropped a
 * drop; ignored nothing more. permits 0 with dropped: a drop of a call that was
 * never in flight (the limiter failed and an error callback answered). A window
 * that closes sets the limit. Locks only to record the sample: the caller reads
 * the clock before. */
void sluice__adaptive_end(sluice__adaptive *a, gint64 permits, sluice__call_end end,
                          gint64 latency_ns, gint64 now_ns);

/* The current limit, the calls in flight, and the median latency of the last
 * window that had one (0: none yet). */
gint64 sluice__adaptive_limit(sluice__adaptive *a);
gint64 sluice__adaptive_in_flight(sluice__adaptive *a);
gint64 sluice__adaptive_latency_ns(sluice__adaptive *a);
/* The no-load latency learnt so far (0: none yet). */
gint64 sluice__adaptive_base_ns(sluice__adaptive *a);

/* Forgets what was learnt: the limit back at min_limit, no no-load latency, a new
 * window. The calls in flight stay in flight. */
void sluice__adaptive_reset(sluice__adaptive *a);

#endif
