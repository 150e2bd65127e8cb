/* What the Redis family shares: the backend's state, and the node each call goes to. */
#ifndef SLUICE_REDIS_INTERNAL_H
#define SLUICE_REDIS_INTERNAL_H

#include <glib.h>

#include "backend.h"
#include "redis/key.h"
#include "redis/node.h"
#include "redis/url.h"

#define SLUICE__ALGORITHMS 6

typedef struct sluice__redis_cluster sluice__redis_cluster;

typedef struct {
    sluice__backend base;
    sluice__redis_url url;
    char *prefix;
    /* key_prefix and the algorithm's tag ("sluice:sw:"): a limit whose algorithm a
     * reload changes starts on fresh keys instead of reading another's state */
    char *prefixes[SLUICE__ALGORITHMS];
    gint64 timeout_us;
    char *sha[SLUICE__ALGORITHMS];
    sluice__redis_node *node;       /* the one server (NULL on a Cluster) */
    sluice__redis_cluster *cluster; /* a Cluster's masters and slot map, or NULL */
} sluice__redis_backend;

/* The node that holds keys (both keys of a call share one hash tag, so one node
 * holds both). */
static inline sluice__redis_node *sluice__redis_route(sluice__redis_backend *b,
                                                      const sluice__redis_keys *keys)
{
    (void)keys;
    return b->node;
}

#endif
