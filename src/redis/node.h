/* SPDX-License-Identifier: MIT */
/* One Redis server the backend sends to: its endpoint, with the blocking link, the
 * asynchronous client's connections and the breaker that all calls to it share.
 * A node knows nothing of the asynchronous client (redis/async_client.c, which
 * routes through the Cluster and Sentinel files above it): the client makes its part
 * at its first call on the node and leaves the node how to free it. */
#ifndef SLUICE_REDIS_NODE_H
#define SLUICE_REDIS_NODE_H

#include <glib.h>

#include "redis/breaker.h"
#include "redis/endpoint.h"

typedef struct sluice__redis_async sluice__redis_async;
typedef struct sluice__redis_link sluice__redis_link;

/* Made once, never moved (the link and the breaker point into it). */
typedef struct {
    sluice__redis_endpoint endpoint;
    sluice__redis_link *link;   /* the blocking callers' shared connection         */
    sluice__redis_async *async; /* the asynchronous client's, one per main context:
                                 * NULL until its first call here (atomic) */
    GDestroyNotify async_free;  /* frees async: set by the client that set async */
    sluice__breaker breaker;    /* both clients': a dead node costs no other node  */
    gint library;               /* atomic: a sluice__redis_library, how scripts run
                                 * there (redis/library.h), learnt at the first call */
} sluice__redis_node;

/* A node for endpoint, which it takes over (e is left empty); connects on first use. */
sluice__redis_node *sluice__redis_node_new(sluice__redis_endpoint *endpoint);
/* Lets go of its blocking connection (calls still on it finish first). */
void sluice__redis_node_retire(sluice__redis_node *node);
/* No call may be in progress on it. */
void sluice__redis_node_free(sluice__redis_node *node);

#endif
