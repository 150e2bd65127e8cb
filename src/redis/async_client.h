/* SPDX-License-Identifier: MIT */
/* The redis backend without blocking: sluice's own connection per node and main
 * context, replies parsed by hiredis' reader. */
#ifndef SLUICE_REDIS_ASYNC_CLIENT_H
#define SLUICE_REDIS_ASYNC_CLIENT_H

#include "redis/internal.h"

#include "redis/script.h"

/* A call for sluice__redis_async_decide, made in the request that will carry it
 * (sluice__redis_call_init it); sluice__redis_async_call_free when it is not decided. */
sluice__redis_call *sluice__redis_async_call_new(void);
void sluice__redis_async_call_free(sluice__redis_call *call);

/* The backend's decide_async of call on node (which holds its keys, in slot on a
 * Cluster): on the connection of node and context, within b's timeout; on a
 * Cluster MOVED, ASK and TRYAGAIN are followed. Takes over call. The node's part of
 * the client is made at its first call there, and freed with the node
 * (sluice__redis_node_free): what is still in flight then fails, and every
 * connection closes. */
void sluice__redis_async_decide(sluice__redis_backend *b, sluice__redis_node *node, guint slot,
                                sluice__redis_call *call, GMainContext *context,
                                sluice__decided_func done, gpointer data);

#endif
