/* SPDX-License-Identifier: MIT */
/* One Redis server the backend sends to: its endpoint, links and breaker. */
#include "redis/node.h"

#include "redis/link.h"

sluice__redis_node *sluice__redis_node_new(sluice__redis_endpoint *endpoint)
{
    sluice__redis_node *n = g_new0(sluice__redis_node, 1);
    n->endpoint = *endpoint;
    *endpoint = (sluice__redis_endpoint){0};
    sluice__breaker_init(&n->breaker, n->endpoint.what);
    n->link = sluice__redis_link_new(&n->endpoint);
    return n;
}

void sluice__redis_node_retire(sluice__redis_node *node)
{
    sluice__redis_link_close(node->link);
}

void sluice__redis_node_free(sluice__redis_node *node)
{
    if (!node)
        return;
    sluice__redis_link_free(node->link);
    if (node->async)
        node->async_free(node->async);
    sluice__breaker_clear(&node->breaker);
    sluice__redis_endpoint_clear(&node->endpoint);
    g_free(node);
}
