/* SPDX-License-Identifier: MIT */
/* What the Redis family shares: the backend's state, and the node each call goes to. */
#ifndef SLUICE_REDIS_INTERNAL_H
#define SLUICE_REDIS_INTERNAL_H

#include <glib.h>

#include "algorithm_table.h"
#include "backend.h"
#include "redis/key.h"
#include "redis/node.h"
#include "redis/sentinel_master.h"
#include "redis/url.h"

typedef struct sluice__redis_cluster sluice__redis_cluster;

typedef struct {
    sluice__backend base;
    sluice__redis_url url;
    char *prefix;
    /* key_prefix and the algorithm's tag ("sluice:sw:"): a limit whose algorithm a
     * reload changes starts on fresh keys instead of reading another's state */
    char *prefixes[SLUICE__ALGORITHMS];
    gsize prefix_len[SLUICE__ALGORITHMS];
    gint64 timeout_us;
    sluice__redis_node *node;       /* the one server (NULL on a Cluster, with Sentinel) */
    sluice__redis_cluster *cluster; /* a Cluster's masters and slot map, or NULL */
    sluice__redis_master *master;   /* redis+sentinel://: the master, as it moves, or NULL */
    sluice__tls_context *tls;       /* rediss: the tls_* settings every node uses, or NULL */
} sluice__redis_backend;

/* Outside a Cluster (whose calls find their node by slot, redis/cluster.h): the node
 * that holds keys, the one server or the Sentinel's current master; NULL and
 * *error when none is known now (no master found yet). */
static inline sluice__redis_node *
sluice__redis_route(sluice__redis_backend *b, const sluice__redis_keys *keys, GError **error)
{
    (void)keys;
    return b->master ? sluice__redis_master_node(b->master, error) : b->node;
}

/* A call to node failed: a Sentinel-managed backend looks for the master again. */
static inline void sluice__redis_failed(sluice__redis_backend *b, sluice__redis_node *node)
{
    if (b->master)
        sluice__redis_master_failed(b->master, node);
}

#endif
