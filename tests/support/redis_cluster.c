/* SPDX-License-Identifier: MIT */
/* A Redis Cluster for the tests: masters (each with its replicas) on free loopback
 * ports, every slot served, stopped afterwards. Built as redis-cli --cluster create
 * does, by hand: ADDSLOTSRANGE and SET-CONFIG-EPOCH on each master, MEET, then
 * REPLICATE once every node knows every other. */
#include "redis_cluster.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tls_certs.h"

#define SLOTS 16384

/* Ends the process with a message, as redis_server.c does: a suite that needs a
 * Cluster fails without one. */
#define need(cond, ...)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            g_printerr("redis_cluster: " __VA_ARGS__);                                             \
            g_printerr("\n");                                                                      \
            exit(EXIT_FAILURE);                                                                    \
        }                                                                                          \
    } while (0)

static redisReply *vcommand(const test_cluster *c, const test_redis *node, const char *format,
                            va_list ap)
{
    if (node->pid == 0)
        return NULL; /* killed */
    redisContext *ctx = test_redis_connect(node, c->password);
    redisReply *r = ctx && !ctx->err ? redisvCommand(ctx, format, ap) : NULL;
    if (ctx)
        redisFree(ctx);
    return r;
}

redisReply *test_cluster_command(const test_cluster *c, const test_redis *node, const char *format,
                                 ...)
{
    va_list ap;
    va_start(ap, format);
    redisReply *r = vcommand(c, node, format, ap);
    va_end(ap);
    return r;
}

/* Runs a command that must answer +OK. */
static void must(const test_cluster *c, const test_redis *node, const char *format, ...)
    G_GNUC_PRINTF(3, 4);
static void must(const test_cluster *c, const test_redis *node, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    redisReply *r = vcommand(c, node, format, ap);
    va_end(ap);
    need(r && r->type == REDIS_REPLY_STATUS, "%s on port %d: %s", format, node->port,
         r && r->str ? r->str : "no answer");
    freeReplyObject(r);
}

/* TRUE when node's reply to `command section` (a bulk string) holds `text`. */
static gboolean says(const test_cluster *c, const test_redis *node, const char *command,
                     const char *section, const char *text)
{
    redisReply *r = test_cluster_command(c, node, "%s %s", command, section);
    gboolean yes = r && r->type == REDIS_REPLY_STRING && strstr(r->str, text);
    if (r)
        freeReplyObject(r);
    return yes;
}

static test_redis *node_at(const test_cluster *c, long long port)
{
    for (int i = 0; i < c->n_nodes; i++)
        if (c->node[i]->port == port || (c->tls && c->node[i]->ports[2] == port))
            return c->node[i];
    return NULL;
}

/* Fills owner[slot] with the node that serves it as node sees it (NULL: none);
 * FALSE when node does not answer. */
static gboolean owners_seen_by(const test_cluster *c, const test_redis *node, test_redis **owner)
{
    redisReply *r = test_cluster_command(c, node, "CLUSTER SLOTS");
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r)
            freeReplyObject(r);
        return FALSE;
    }
    memset(owner, 0, SLOTS * sizeof *owner);
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *range = r->element[i];
        test_redis *master = node_at(c, range->element[2]->element[1]->integer);
        for (long long s = range->element[0]->integer; s <= range->element[1]->integer; s++)
            owner[s] = master;
    }
    freeReplyObject(r);
    return TRUE;
}

/* Every live node's view: the owner of each slot when all agree, else NULL. */
static void agreed_owners(const test_cluster *c, test_redis **agreed)
{
    g_autofree test_redis **seen = g_new(test_redis *, SLOTS);
    gboolean first = TRUE;
    for (int i = 0; i < c->n_nodes; i++) {
        if (c->node[i]->pid == 0 || !owners_seen_by(c, c->node[i], seen))
            continue;
        for (int s = 0; s < SLOTS; s++)
            agreed[s] = first || agreed[s] == seen[s] ? seen[s] : NULL;
        first = FALSE;
    }
    if (first)
        memset(agreed, 0, SLOTS * sizeof *agreed);
}

test_redis *test_cluster_master_of(const test_cluster *c, guint slot)
{
    g_autofree test_redis **agreed = g_new(test_redis *, SLOTS);
    agreed_owners(c, agreed);
    return slot < SLOTS ? agreed[slot] : NULL;
}

test_redis *test_cluster_master_of_key(const test_cluster *c, const char *key)
{
    for (int i = 0; i < c->n_nodes; i++) {
        redisReply *r = test_cluster_command(c, c->node[i], "CLUSTER KEYSLOT %s", key);
        long long slot = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        if (r)
            freeReplyObject(r);
        if (slot >= 0)
            return test_cluster_master_of(c, (guint)slot);
    }
    return NULL;
}

gboolean test_cluster_is_master(const test_cluster *c, const test_redis *node)
{
    redisReply *r = test_cluster_command(c, node, "ROLE");
    gboolean yes = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                   strcmp(r->element[0]->str, "master") == 0;
    if (r)
        freeReplyObject(r);
    return yes;
}

gint64 test_cluster_keys(const test_cluster *c, const test_redis *node)
{
    redisReply *r = test_cluster_command(c, node, "DBSIZE");
    gint64 n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* Every live node ok, all agree on a live master for every slot, every live
 * replica in sync with its master. */
static gboolean all_ok(const test_cluster *c)
{
    for (int i = 0; i < c->n_nodes; i++) {
        const test_redis *node = c->node[i];
        if (node->pid == 0)
            continue;
        if (!says(c, node, "CLUSTER", "INFO", "cluster_state:ok"))
            return FALSE;
        if (!test_cluster_is_master(c, node) &&
            !says(c, node, "INFO", "replication", "master_link_status:up"))
            return FALSE;
    }
    g_autofree test_redis **agreed = g_new(test_redis *, SLOTS);
    agreed_owners(c, agreed);
    for (int s = 0; s < SLOTS; s++)
        if (!agreed[s] || agreed[s]->pid == 0)
            return FALSE;
    return TRUE;
}

gboolean test_cluster_wait_ok(const test_cluster *c, gint64 timeout_us)
{
    gint64 end = g_get_monotonic_time() + timeout_us;
    do {
        if (all_ok(c))
            return TRUE;
        g_usleep(20000);
    } while (g_get_monotonic_time() < end);
    return FALSE;
}

/* TRUE once node's CLUSTER NODES lists every node, none still in handshake. */
static gboolean knows_everyone(const test_cluster *c, const test_redis *node)
{
    redisReply *r = test_cluster_command(c, node, "CLUSTER NODES");
    gboolean yes = FALSE;
    if (r && r->type == REDIS_REPLY_STRING) {
        g_auto(GStrv) lines = g_strsplit(g_strstrip(r->str), "\n", -1);
        yes = (int)g_strv_length(lines) == c->n_nodes && !strstr(r->str, "handshake") &&
              !strstr(r->str, "noaddr");
    }
    if (r)
        freeReplyObject(r);
    return yes;
}

static char *node_id(const test_cluster *c, const test_redis *node)
{
    redisReply *r = test_cluster_command(c, node, "CLUSTER MYID");
    need(r && r->type == REDIS_REPLY_STRING, "CLUSTER MYID on port %d", node->port);
    char *id = g_strdup(r->str);
    freeReplyObject(r);
    return id;
}

/* A cluster-enabled node whose bus port (ports[1]) the starter picks with its own
 * (and its TLS port, ports[2], with tls, showing the certificate `cert`). */
static test_redis *start_node(const test_cluster_options *o, const char *cert)
{
    g_autofree char *timeout = g_strdup_printf("%d", o->node_timeout_ms);
    const char *args[] = {"--cluster-enabled", "yes", "--cluster-port", "{port1}",
                          "--cluster-node-timeout", timeout, "--cluster-require-full-coverage",
                          o->partial ? "no" : "yes",
                          /* a replica may take over however long it was cut off */
                          "--cluster-replica-validity-factor", "0",
                          o->password ? "--masterauth" : NULL, o->password, NULL};
    g_autoptr(GPtrArray) all = g_ptr_array_new();
    for (int i = 0; args[i]; i++)
        g_ptr_array_add(all, test_unconst(args[i]));
    g_auto(GStrv) tls = o->tls ? test_tls_server_args(cert, "optional", "{port2}") : NULL;
    static const char *const tls_only[] = {"--tls-cluster", "yes", "--tls-replication", "yes"};
    for (int i = 0; tls && tls[i]; i++)
        g_ptr_array_add(all, tls[i]);
    for (guint i = 0; tls && i < G_N_ELEMENTS(tls_only); i++)
        g_ptr_array_add(all, test_unconst(tls_only[i]));
    g_ptr_array_add(all, NULL);
    test_redis_options options = {.args = (const char *const *)all->pdata,
                                  .password = o->password,
                                  .more_ports = o->tls ? 2 : 1};
    return test_redis_start_with(&options);
}

test_cluster *test_cluster_start(const test_cluster_options *options)
{
    test_cluster_options o = options ? *options : (test_cluster_options){0};
    o.masters = o.masters > 0 ? o.masters : 3;
    o.node_timeout_ms = o.node_timeout_ms > 0 ? o.node_timeout_ms : 5000;
    test_cluster *c = g_new0(test_cluster, 1);
    c->masters = o.masters;
    c->replicas = o.replicas;
    c->n_nodes = o.masters * (1 + o.replicas);
    c->node = g_new0(test_redis *, c->n_nodes);
    c->password = g_strdup(o.password);
    c->tls = o.tls;

    for (int i = 0; i < c->n_nodes; i++) {
        gboolean last = i == c->n_nodes - 1 && o.tls_last_cert;
        c->node[i] = start_node(&o, last ? o.tls_last_cert : "server");
        must(c, c->node[i], "CLUSTER SET-CONFIG-EPOCH %d", i + 1);
    }
    for (int m = 0; m < c->masters; m++)
        must(c, c->node[m], "CLUSTER ADDSLOTSRANGE %d %d", m * SLOTS / c->masters,
             (m + 1) * SLOTS / c->masters - 1);
    for (int i = 1; i < c->n_nodes; i++)
        must(c, c->node[0], "CLUSTER MEET 127.0.0.1 %d %d", c->node[i]->port, c->node[i]->ports[1]);
    gint64 end = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
    for (int i = 0; i < c->n_nodes; i++)
        while (!knows_everyone(c, c->node[i])) {
            need(g_get_monotonic_time() < end, "node %d did not meet every other in 20 s", i);
            g_usleep(20000);
        }
    for (int m = 0; m < c->masters; m++) {
        g_autofree char *id = node_id(c, c->node[m]);
        for (int r = 0; r < c->replicas; r++)
            must(c, c->node[c->masters + m * c->replicas + r], "CLUSTER REPLICATE %s", id);
    }
    need(test_cluster_wait_ok(c, 20 * G_USEC_PER_SEC),
         "the cluster did not reach cluster_state:ok with every replica in sync in 20 s");
    return c;
}

void test_cluster_stop(test_cluster *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_nodes; i++)
        test_redis_stop(c->node[i]);
    g_free(c->node);
    g_free(c->password);
    g_free(c);
}

char *test_cluster_url(const test_cluster *c)
{
    if (c->tls && c->n_nodes == 1)
        return g_strdup_printf("rediss+cluster://127.0.0.1:%d", c->node[0]->ports[2]);
    if (c->tls)
        return g_strdup_printf("rediss+cluster://127.0.0.1:%d,127.0.0.1:%d", c->node[0]->ports[2],
                               c->node[1]->ports[2]);
    if (c->n_nodes == 1)
        return g_strdup_printf("redis+cluster://127.0.0.1:%d", c->node[0]->port);
    return g_strdup_printf("redis+cluster://127.0.0.1:%d,127.0.0.1:%d", c->node[0]->port,
                           c->node[1]->port);
}
