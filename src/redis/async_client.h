/* SPDX-License-Identifier: MIT */
/* The redis backend without blocking: sluice's own connection per node and main
 * context, replies parsed by hiredis' reader. */
#ifndef SLUICE_REDIS_ASYNC_CLIENT_H
#define SLUICE_REDIS_ASYNC_CLIENT_H

#include "redis/internal.h"

/* The backend's decide_async on node (which holds keys, in slot on a Cluster): the
 * rule's script on the connection of node and context, within b's timeout; on a
 * Cluster MOVED, ASK and TRYAGAIN are followed. Takes over keys (left empty). The
 * node's part of the client is made at its first call there, and freed with the
 * node (sluice__redis_node_free): what is still in flight then fails, and every
 * connection closes. */
void sluice__redis_async_decide(sluice__redis_backend *b, sluice__redis_node *node, guint slot,
                                const sluice__rule *rule, sluice__redis_keys *keys, gint64 permits,
                                gint64 reserve_us, GMainContext *context, sluice__decided_func done,
                                gpointer data);

#endif
