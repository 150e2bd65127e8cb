/* The redis backend without blocking: one hiredis asynchronous connection per node
 * and main context. */
#ifndef SLUICE_REDIS_ASYNC_CLIENT_H
#define SLUICE_REDIS_ASYNC_CLIENT_H

#include "redis/internal.h"

sluice__redis_async *sluice__redis_async_new(void);
/* Fails what is still in flight and closes every connection. No main context may
 * be dispatching one of them meanwhile. */
void sluice__redis_async_free(sluice__redis_async *async);

/* The backend's decide_async on node (which holds keys, in slot on a Cluster): the
 * rule's script on the connection of node and context, within b's timeout; on a
 * Cluster MOVED, ASK and TRYAGAIN are followed. Takes over keys (left empty). */
void sluice__redis_async_decide(sluice__redis_backend *b, sluice__redis_node *node, guint slot,
                                const sluice__rule *rule, sluice__redis_keys *keys, gint64 permits,
                                gint64 reserve_us, GMainContext *context, sluice__decided_func done,
                                gpointer data);

#endif
