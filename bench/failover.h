/* SPDX-License-Identifier: MIT */
/* What the failover benchmarks share: threads deciding through a master's death, and when
 * decisions on its callers resumed. */
#ifndef SLUICE_BENCH_FAILOVER_H
#define SLUICE_BENCH_FAILOVER_H

#include <glib.h>

#define FAILOVER_MAX_THREADS 16

typedef struct {
    /* set before failover_start */
    const char *name;          /* the limit */
    char *const *keys;         /* the callers, called in turn; NULL: one caller, no key */
    guint n_keys;              /* 1 when keys is NULL */
    const gboolean *on_victim; /* per caller: its state is on the master killed; NULL: all */

    gint stop;
    gint calls, failed;    /* atomic */
    GMutex lock;           /* guards the rest: */
    gint64 killed;         /* monotonic µs of the master's death; 0 before */
    gint64 *failing;       /* per caller: its first call sent after the kill that failed; 0 */
    gint64 resumed;        /* the first decision on a failing caller, sent after its failure */
    gint failed_elsewhere; /* calls on the other callers that failed */
    char *first_elsewhere; /* the first one's message */
    GThread *threads[FAILOVER_MAX_THREADS];
    int n_threads;
} failover_run;

/* Starts `threads` threads calling sluice_acquire(r->name, caller, 1) in a loop, each
 * from a caller of its own onwards. */
void failover_start(failover_run *r, int threads);
/* The master dies now (call it just before killing it); the time. */
gint64 failover_killed(failover_run *r);
/* Waits up to timeout_us for decisions to resume; their time, or 0. */
gint64 failover_wait_resumed(failover_run *r, gint64 timeout_us);
/* Stops and joins the threads. */
void failover_stop(failover_run *r);
/* Frees what failover_start and the threads made (after failover_stop). */
void failover_clear(failover_run *r);

#endif
