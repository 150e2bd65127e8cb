/* SPDX-License-Identifier: MIT */
/* A Redis Cluster for the tests: masters (each with its replicas) on free loopback
 * ports, every slot served, stopped afterwards. */
#ifndef SLUICE_TEST_REDIS_CLUSTER_H
#define SLUICE_TEST_REDIS_CLUSTER_H

#include <glib.h>
#include <hiredis/hiredis.h>

#include "redis_server.h"

typedef struct {
    int masters;               /* 0 for 3                                              */
    int replicas;              /* per master                                           */
    int node_timeout_ms;       /* cluster-node-timeout: 0 for 5 s (a loaded machine must not
                                * look like a dead node); a failover test sets less   */
    gboolean partial;          /* cluster-require-full-coverage no: the slots of a dead
                                * master fail, the others go on                        */
    const char *password;      /* requirepass and masterauth of every node, or NULL    */
    gboolean tls;              /* every node speaks TLS too (tests/support/tls_certs.h) on
                                * ports[2], and the bus and replication are TLS only:
                                * tls-cluster, tls-replication */
    const char *tls_last_cert; /* with tls: the last node's certificate (a name of
                                * tests/support/tls_certs.sh), the others' being "server";
                                * NULL: "server" too */
} test_cluster_options;

typedef struct {
    int masters, replicas;
    /* node[m] (m < masters) starts as master m, serving slots m × 16384 / masters up
     * to the next master's; node[masters + m × replicas + r] as its replica r */
    test_redis **node;
    int n_nodes;
    char *password;
    gboolean tls; /* the nodes' TLS ports are ports[2]; port stays plaintext for the
                   * tests' own commands (hiredis 0.14 has no TLS) */
} test_cluster;

/* Starts the nodes (cluster-enabled, each with its own directory for nodes.conf and
 * its own cluster bus port), gives each master its slots, joins them (CLUSTER MEET),
 * makes the replicas (CLUSTER REPLICATE) and waits until every node says
 * cluster_state:ok, knows every slot's master and each replica is in sync. options
 * may be NULL. Aborts the test (never skips) when it cannot: a missing redis-server
 * fails the suite. */
test_cluster *test_cluster_start(const test_cluster_options *options);
/* Stops every node still running and removes their directories. */
void test_cluster_stop(test_cluster *c);

/* redis+cluster://127.0.0.1:PORT of node[0] and of node[1] (g_free it): the rest
 * is discovered. With tls, rediss+cluster:// and their TLS ports. */
char *test_cluster_url(const test_cluster *c);

/* Runs one command (printf-style) on node, authenticated; the reply
 * (freeReplyObject it), or NULL when the node does not answer (or was killed). */
redisReply *test_cluster_command(const test_cluster *c, const test_redis *node, const char *format,
                                 ...) G_GNUC_PRINTF(3, 4);

/* The node that serves slot now as every live node sees it (CLUSTER SLOTS), or NULL
 * when they disagree or none serves it. */
test_redis *test_cluster_master_of(const test_cluster *c, guint slot);
/* The same for the slot of key (CLUSTER KEYSLOT, asked of the first live node). */
test_redis *test_cluster_master_of_key(const test_cluster *c, const char *key);
/* Waits up to timeout_us for every live node to say cluster_state:ok and agree on
 * a live master for every slot; TRUE when they did. */
gboolean test_cluster_wait_ok(const test_cluster *c, gint64 timeout_us);
/* TRUE when node's ROLE says master. */
gboolean test_cluster_is_master(const test_cluster *c, const test_redis *node);
/* How many keys node holds (DBSIZE), -1 when it does not answer. */
gint64 test_cluster_keys(const test_cluster *c, const test_redis *node);

#endif
