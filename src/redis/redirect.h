/* SPDX-License-Identifier: MIT */
/* What a call on a Cluster does after a node refused it with MOVED, ASK or TRYAGAIN:
 * one policy, which the blocking client (redis/backend.c) and the asynchronous one
 * (redis/async_client.c) both follow, each waiting its own way. */
#ifndef SLUICE_REDIS_REDIRECT_H
#define SLUICE_REDIS_REDIRECT_H

#include <glib.h>

#include "redis/cluster.h"

/* Redirections (MOVED, ASK) a call follows before it pauses, as after TRYAGAIN:
 * nodes may disagree on a slot's owner for a moment while it moves. */
#define SLUICE__REDIRECT_MAX_HOPS 5
/* How long a pause lasts (after TRYAGAIN, a slot half migrated; or after
 * SLUICE__REDIRECT_MAX_HOPS redirections). */
#define SLUICE__REDIRECT_PAUSE_US 2000

/* One call's course through the Cluster; zeroed when it begins. */
typedef struct {
    int hops;         /* redirections followed since it began or last paused */
    gboolean asking;  /* the next send goes after ASKING                       */
    gboolean refresh; /* MOVED was seen: the map is read again once the call ends
                       * (more slots may have moved with that one) */
} sluice__redirect;

/* The next step of a call. */
typedef enum {
    SLUICE__REDIRECT_SEND,  /* to the node the refusal named (after ASKING when asking) */
    SLUICE__REDIRECT_PAUSE, /* SLUICE__REDIRECT_PAUSE_US, then to the slot's master by the map */
    SLUICE__REDIRECT_FAIL,  /* the call fails: with *why, or when that is NULL the reply's text */
} sluice__redirect_step;

/* The step after a node's error reply that sluice__redis_cluster_answered read as
 * action, time_left_us before the call's deadline. MOVED and ASK are followed
 * (ASK once: the next send only goes after ASKING) until the hop limit, where the
 * call pauses; TRYAGAIN pauses; each pause starts the hop count again; a pause that
 * would end past the deadline fails the call instead. */
sluice__redirect_step sluice__redirect_next(sluice__redirect *r, sluice__cluster_action action,
                                            gint64 time_left_us, const char **why);

#endif
