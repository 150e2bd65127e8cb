/* SPDX-License-Identifier: MIT */
/* A Sentinel-managed Redis for the tests: a master, its replica and three redis-sentinel. */
#ifndef SLUICE_TEST_REDIS_SENTINEL_H
#define SLUICE_TEST_REDIS_SENTINEL_H

#include <glib.h>
#include <hiredis/hiredis.h>

#include "redis_server.h"

#define TEST_SENTINEL_MASTER "sluice" /* the name the Sentinels know the master by */

typedef struct {
    const char *password;          /* the data nodes' (requirepass, masterauth), or NULL */
    const char *sentinel_password; /* the Sentinels' own (requirepass), or NULL */
    int down_after_ms;             /* how long the master must not answer: 0 for 400 ms */
    gboolean tls;                /* every server and Sentinel speaks TLS too (tests/support/tls_certs.h) on
                                  * ports[1]; replication and the Sentinels' own links are TLS only */
    const char *tls_master_cert; /* with tls: node[0]'s certificate (a name of
                                  * tests/support/tls_certs.sh), the others' being "server";
                                  * NULL: "server" too */
} test_sentinel_options;

typedef struct {
    test_redis *node[2];     /* node[0] starts as the master, node[1] as its replica */
    test_redis *sentinel[3]; /* quorum 2 */
    char *password;
    char *sentinel_password;
    gboolean tls; /* the TLS ports are ports[1]: the Sentinels name those; port stays
                   * plaintext for the tests' own commands (hiredis 0.14 has no TLS) */
} test_sentinel;

/* Starts the master, its replica (in sync) and three Sentinels on free loopback
 * ports (options may be NULL), and waits until every Sentinel knows the replica and
 * the two other Sentinels, so that a failover can start. Aborts the test (never
 * skips) when it cannot: a missing redis-server or redis-sentinel fails the suite. */
test_sentinel *test_sentinel_start(const test_sentinel_options *options);
/* Stops the five processes (those still running) and removes their directories. */
void test_sentinel_stop(test_sentinel *s);

/* redis+sentinel://127.0.0.1:A,127.0.0.1:B,127.0.0.1:C/sluice (g_free it); with tls,
 * rediss+sentinel:// and the Sentinels' TLS ports. */
char *test_sentinel_url(const test_sentinel *s);

/* The node Sentinel i names as the master (get-master-addr-by-name), or NULL when it
 * names neither (or does not answer). */
test_redis *test_sentinel_named(const test_sentinel *s, int i);
/* The node that is master now: the one every Sentinel names and whose ROLE says
 * master, waiting up to timeout_us (µs) for them to agree; NULL if they did not. */
test_redis *test_sentinel_master(const test_sentinel *s, gint64 timeout_us);
/* The other node. */
test_redis *test_sentinel_other(const test_sentinel *s, const test_redis *node);

/* A connection to Sentinel i subscribed to +switch-master (redisFree it). */
redisContext *test_sentinel_subscribe(const test_sentinel *s, int i);
/* Waits up to timeout_us for a +switch-master on any of the n subscriptions; the
 * node the first names as the new master (NULL when none came in time), *at_us
 * the monotonic time it arrived. */
test_redis *test_sentinel_wait_switch(const test_sentinel *s, redisContext *const *subs, int n,
                                      gint64 timeout_us, gint64 *at_us);

/* Runs one command (printf-style) on node, authenticated with the data nodes'
 * password; the reply (freeReplyObject it), or NULL when the node does not answer. */
redisReply *test_sentinel_node_command(const test_sentinel *s, const test_redis *node,
                                       const char *format, ...) G_GNUC_PRINTF(3, 4);
/* The same on Sentinel i, with the Sentinels' password. */
redisReply *test_sentinel_command(const test_sentinel *s, int i, const char *format, ...)
    G_GNUC_PRINTF(3, 4);

#endif
