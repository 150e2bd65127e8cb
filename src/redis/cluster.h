/* SPDX-License-Identifier: MIT */
/* A Redis Cluster as the redis backend sees it: a node per master (each with its
 * link and breaker), the map of which node serves each slot, and what a node's
 * refusal (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) means for the call. */
#ifndef SLUICE_REDIS_CLUSTER_H
#define SLUICE_REDIS_CLUSTER_H

#include <glib.h>
#include <hiredis/hiredis.h>

#include "redis/cluster_slots.h"
#include "redis/node.h"
#include "redis/url.h"

typedef struct sluice__redis_cluster sluice__redis_cluster;

/* The Cluster that url's nodes (seeds) belong to; every node is reached with url's
 * user and password (else `password`), and over TLS with tls unless it is NULL
 * (rediss+cluster://), each node's certificate checked against tls_name, or when
 * that is NULL against the address the URL or the Cluster gives for the node.
 * Nothing is connected yet. */
sluice__redis_cluster *sluice__redis_cluster_new(const sluice__redis_url *url, const char *password,
                                                 sluice__tls_context *tls, const char *tls_name);
/* No call may be in progress. */
void sluice__redis_cluster_free(sluice__redis_cluster *c);
/* Lets go of every node's blocking connection (calls still on them finish first). */
void sluice__redis_cluster_retire(sluice__redis_cluster *c);

/* Connects to the seeds in turn and reads the slot map before deadline: FALSE and
 * *error when none answered (SLUICE_ERROR_AUTH when one refused the credentials,
 * SLUICE_ERROR_TLS when TLS refused one: neither is tried past). */
gboolean sluice__redis_cluster_start(sluice__redis_cluster *c, gint64 deadline, GError **error);

/* The node at index i of the nodes known so far (seeds, then masters as found), or
 * NULL past the last. Takes no lock. */
sluice__redis_node *sluice__redis_cluster_nth(sluice__redis_cluster *c, guint i);

/* The node that serves slot by the map, or NULL when it names none. Takes no lock
 * and allocates nothing. */
sluice__redis_node *sluice__redis_cluster_node(sluice__redis_cluster *c, guint slot);

/* Reads the slot map again from a node whose breaker is closed, before deadline;
 * does nothing when another thread is at it or it was read less than
 * SLUICE__CLUSTER_REFRESH_US ago. */
#define SLUICE__CLUSTER_REFRESH_US (G_GINT64_CONSTANT(200000))
void sluice__redis_cluster_refresh(sluice__redis_cluster *c, gint64 deadline);
/* The same on a thread of its own, for callers that must not block (a main loop). */
void sluice__redis_cluster_refresh_soon(sluice__redis_cluster *c, gint64 timeout_us);

/* What a call does after node answered slot's command with an error reply. */
typedef enum {
    SLUICE__CLUSTER_FAIL,      /* the call fails with the reply's text         */
    SLUICE__CLUSTER_RESEND,    /* MOVED: the map says *next now; send it there */
    SLUICE__CLUSTER_ASKING,    /* ASK: ASKING, then the command, to *next once */
    SLUICE__CLUSTER_TRY_AGAIN, /* TRYAGAIN: the slot is migrating; a moment     */
} sluice__cluster_action;

sluice__cluster_action sluice__redis_cluster_answered(sluice__redis_cluster *c,
                                                      const sluice__redis_node *node, guint slot,
                                                      const redisReply *reply,
                                                      sluice__redis_node **next);

/* Makes error's message name the slot: "redis HOST:PORT (cluster slot N): ...". */
void sluice__redis_cluster_name_slot(GError *error, const sluice__redis_node *node, guint slot);

#endif
