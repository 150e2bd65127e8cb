/* SPDX-License-Identifier: MIT */
/* A Redis Cluster as the redis backend sees it: a node per master, the slot map, and
 * what a node's refusal means for the call.
 *
 * Nodes are made as the Cluster names them (CLUSTER SLOTS, MOVED) and kept until the
 * backend is freed, each published in a fixed table so that a call finds its node
 * with two atomic loads (slot -> index -> node) and no lock. The map is read at
 * start and again, at most every SLUICE__CLUSTER_REFRESH_US and by one thread at a
 * time, when a call could not be served (a dead node, CLUSTERDOWN, no master known);
 * MOVED updates its slot at once and asks for a full read too, since a failover or
 * a resharding moves more than one slot. */
#include "redis/cluster.h"

#include <string.h>

#include <sluice/error.h>

#include "redis/conn.h"
#include "redis/link.h"
#include "redis/tls.h"
#include "secret.h"

#define MAX_NODES        256  /* masters, past and present, of one Cluster */
#define REFRESH_LEAST_US 1000 /* a call with less time left does not refresh */

struct sluice__redis_cluster {
    sluice__cluster_map map;              /* slot -> index in nodes                  */
    sluice__redis_node *nodes[MAX_NODES]; /* published once each, never moved         */
    gint n_nodes;                         /* atomic                                  */
    GMutex lock;                          /* adding nodes                            */
    gint refreshing;                      /* atomic: a thread reads the map          */
    gint64 refreshed_at;                  /* atomic: when the last read began        */
    guint first_asked;                    /* atomic: the node a refresh asks first   */
    GThread *refresher;                   /* refresh_soon's, joined before the next  */
    gint refresher_done;                  /* atomic                                  */
    gboolean freeing;                     /* under lock: refresh_soon starts no more  */
    char *user, *password;                /* every node's                            */
    sluice__tls_context *tls;             /* rediss+cluster://: every node's, or NULL */
    char *tls_name;                       /* tls_server_name, or NULL: each node's host */
    guint n_seeds;                        /* nodes[0 .. n_seeds): the URL's           */
};

/* The node at host:port, made (and published) when the Cluster names a new one;
 * its index, or -1 when the table is full. */
static gint node_index(sluice__redis_cluster *c, const char *host, int port)
{
    g_mutex_lock(&c->lock);
    gint n = g_atomic_int_get(&c->n_nodes);
    for (gint i = 0; i < n; i++) {
        const sluice__redis_endpoint *e = &c->nodes[i]->endpoint;
        if (e->port == port && strcmp(e->host, host) == 0) {
            g_mutex_unlock(&c->lock);
            return i;
        }
    }
    if (n == MAX_NODES) {
        g_mutex_unlock(&c->lock);
        return -1;
    }
    sluice__redis_endpoint e;
    sluice__redis_endpoint_init(&e, host, port, NULL, c->user, c->password, 0);
    if (c->tls)
        sluice__redis_endpoint_use_tls(&e, c->tls, c->tls_name);
    g_atomic_pointer_set(&c->nodes[n], sluice__redis_node_new(&e));
    g_atomic_int_set(&c->n_nodes, n + 1);
    g_mutex_unlock(&c->lock);
    return n;
}

sluice__redis_cluster *sluice__redis_cluster_new(const sluice__redis_url *url, const char *password,
                                                 sluice__tls_context *tls, const char *tls_name)
{
    sluice__redis_cluster *c = g_new0(sluice__redis_cluster, 1);
    g_mutex_init(&c->lock);
    sluice__cluster_map_init(&c->map);
    c->user = g_strdup(url->user);
    c->password = g_strdup(url->password ? url->password : password);
    c->tls = sluice__tls_context_ref(tls);
    c->tls_name = g_strdup(tls_name);
    for (guint i = 0; i < url->n_addresses && i < MAX_NODES / 2; i++)
        node_index(c, url->addresses[i].host, url->addresses[i].port);
    c->n_seeds = (guint)g_atomic_int_get(&c->n_nodes);
    return c;
}

void sluice__redis_cluster_free(sluice__redis_cluster *c)
{
    if (!c)
        return;
    /* freeing a node fails the asynchronous calls still on it, which would ask for
     * a refresh of the map: none may start, and the one running ends first */
    g_mutex_lock(&c->lock);
    c->freeing = TRUE;
    GThread *refresher = g_steal_pointer(&c->refresher);
    g_mutex_unlock(&c->lock);
    if (refresher)
        g_thread_join(refresher);
    for (gint i = 0; i < c->n_nodes; i++)
        sluice__redis_node_free(c->nodes[i]);
    g_mutex_clear(&c->lock);
    g_free(c->user);
    sluice__secret_free(c->password);
    sluice__tls_context_unref(c->tls);
    g_free(c->tls_name);
    g_free(c);
}

void sluice__redis_cluster_retire(sluice__redis_cluster *c)
{
    gint n = g_atomic_int_get(&c->n_nodes);
    for (gint i = 0; i < n; i++)
        sluice__redis_node_retire(c->nodes[i]);
}

sluice__redis_node *sluice__redis_cluster_nth(sluice__redis_cluster *c, guint i)
{
    return i < (guint)g_atomic_int_get(&c->n_nodes) ? g_atomic_pointer_get(&c->nodes[i]) : NULL;
}

sluice__redis_node *sluice__redis_cluster_node(sluice__redis_cluster *c, guint slot)
{
    gint i = sluice__cluster_map_owner(&c->map, slot);
    return i == SLUICE__CLUSTER_NO_NODE ? NULL : g_atomic_pointer_get(&c->nodes[i]);
}

/* ---- the map ---------------------------------------------------------------------------- */

/* Makes the map what slots says: each range to its master's node, the rest to none. */
static void apply(sluice__redis_cluster *c, const sluice__cluster_slots *slots)
{
    g_autofree gint *owner = g_new(gint, SLUICE__CLUSTER_SLOTS);
    for (guint s = 0; s < SLUICE__CLUSTER_SLOTS; s++)
        owner[s] = SLUICE__CLUSTER_NO_NODE;
    for (guint i = 0; i < slots->n_ranges; i++) {
        const sluice__cluster_range *r = &slots->ranges[i];
        gint node = node_index(c, r->host, r->port);
        for (guint s = r->first; s <= r->last; s++)
            owner[s] = node;
    }
    for (guint s = 0; s < SLUICE__CLUSTER_SLOTS; s++)
        if (sluice__cluster_map_owner(&c->map, s) != owner[s])
            sluice__cluster_map_set(&c->map, s, s, owner[s]);
}

/* CLUSTER SLOTS from node, applied; FALSE and *error when it did not answer one. On
 * a connection of its own: a refresh that runs out of time must not drop the link
 * that calls share (its reader would fail them all). */
static gboolean read_map(sluice__redis_cluster *c, sluice__redis_node *node, gint64 deadline,
                         GError **error)
{
    static const char *argv[] = {"CLUSTER", "SLOTS"};
    sluice__redis_transport *t = sluice__redis_connect(&node->endpoint, deadline, FALSE, error);
    if (!t)
        return FALSE;
    redisReply *reply = sluice__redis_conn_command(&node->endpoint, t, deadline, 2, argv, error);
    sluice__redis_transport_free(t);
    if (!reply)
        return FALSE;
    sluice__cluster_slots slots;
    char *why = NULL;
    gboolean ok = sluice__cluster_slots_parse(reply, node->endpoint.host, &slots, &why);
    freeReplyObject(reply);
    if (!ok) {
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, &node->endpoint, "CLUSTER SLOTS", why);
        g_free(why);
        return FALSE;
    }
    apply(c, &slots);
    sluice__cluster_slots_clear(&slots);
    return TRUE;
}

gboolean sluice__redis_cluster_start(sluice__redis_cluster *c, gint64 deadline, GError **error)
{
    GError *last = NULL;
    g_atomic_int_set(&c->refreshing, 1);
    __atomic_store_n(&c->refreshed_at, g_get_monotonic_time(), __ATOMIC_RELEASE);
    for (guint i = 0; i < c->n_seeds && g_get_monotonic_time() < deadline; i++) {
        sluice__redis_node *node = c->nodes[i];
        g_clear_error(&last);
        if (sluice__redis_link_connect(node->link, deadline, &last) &&
            read_map(c, node, deadline, &last))
            break;
        if (g_error_matches(last, SLUICE_ERROR, SLUICE_ERROR_AUTH) ||
            g_error_matches(last, SLUICE_ERROR, SLUICE_ERROR_TLS))
            break;
    }
    g_atomic_int_set(&c->refreshing, 0);
    if (!last)
        return TRUE;
    g_propagate_error(error, last);
    return FALSE;
}

void sluice__redis_cluster_refresh(sluice__redis_cluster *c, gint64 deadline)
{
    gint64 now = g_get_monotonic_time();
    if (deadline - now < REFRESH_LEAST_US ||
        now - __atomic_load_n(&c->refreshed_at, __ATOMIC_ACQUIRE) < SLUICE__CLUSTER_REFRESH_US ||
        !g_atomic_int_compare_and_exchange(&c->refreshing, 0, 1))
        return;
    __atomic_store_n(&c->refreshed_at, now, __ATOMIC_RELEASE);
    /* each refresh starts at the next node, so a node that hangs is not asked first
     * every time; nodes whose breaker is open are not asked */
    guint n = (guint)g_atomic_int_get(&c->n_nodes), first = g_atomic_int_add(&c->first_asked, 1);
    for (guint k = 0; k < n && g_get_monotonic_time() < deadline; k++) {
        sluice__redis_node *node = g_atomic_pointer_get(&c->nodes[(first + k) % n]);
        if (g_atomic_int_get(&node->breaker.open))
            continue;
        GError *ignored = NULL;
        gboolean ok = read_map(c, node, deadline, &ignored);
        g_clear_error(&ignored);
        if (ok)
            break;
    }
    g_atomic_int_set(&c->refreshing, 0);
}

typedef struct {
    sluice__redis_cluster *c;
    gint64 timeout_us;
} soon;

static gpointer refresh_thread(gpointer p)
{
    soon *s = p;
    sluice__redis_cluster_refresh(s->c, g_get_monotonic_time() + s->timeout_us);
    g_atomic_int_set(&s->c->refresher_done, 1);
    g_free(s);
    return NULL;
}

void sluice__redis_cluster_refresh_soon(sluice__redis_cluster *c, gint64 timeout_us)
{
    if (g_get_monotonic_time() - __atomic_load_n(&c->refreshed_at, __ATOMIC_ACQUIRE) <
        SLUICE__CLUSTER_REFRESH_US)
        return;
    g_mutex_lock(&c->lock);
    if (c->freeing) {
        g_mutex_unlock(&c->lock);
        return;
    }
    if (c->refresher && g_atomic_int_get(&c->refresher_done)) {
        g_thread_join(c->refresher);
        c->refresher = NULL;
    }
    if (!c->refresher) {
        soon *s = g_new(soon, 1);
        *s = (soon){c, timeout_us};
        g_atomic_int_set(&c->refresher_done, 0);
        c->refresher = g_thread_try_new("sluice-cluster", refresh_thread, s, NULL);
        if (!c->refresher)
            g_free(s);
    }
    g_mutex_unlock(&c->lock);
}

/* ---- refusals --------------------------------------------------------------------------- */

static gboolean starts_with(const redisReply *reply, const char *word)
{
    gsize n = strlen(word);
    return reply->len >= n && memcmp(reply->str, word, n) == 0 &&
           (reply->len == n || reply->str[n] == ' ');
}

sluice__cluster_action sluice__redis_cluster_answered(sluice__redis_cluster *c,
                                                      const sluice__redis_node *node, guint slot,
                                                      const redisReply *reply,
                                                      sluice__redis_node **next)
{
    sluice__cluster_redirect to;
    *next = NULL;
    if (reply->type != REDIS_REPLY_ERROR)
        return SLUICE__CLUSTER_FAIL;
    if (sluice__cluster_redirect_parse(reply->str, reply->len, &to) && to.slot == slot) {
        gint i = node_index(c, to.host[0] ? to.host : node->endpoint.host, to.port);
        if (i < 0)
            return SLUICE__CLUSTER_FAIL;
        *next = g_atomic_pointer_get(&c->nodes[i]);
        if (to.kind == SLUICE__CLUSTER_ASK)
            return SLUICE__CLUSTER_ASKING;
        sluice__cluster_map_set(&c->map, slot, slot, i);
        return SLUICE__CLUSTER_RESEND;
    }
    if (starts_with(reply, "TRYAGAIN"))
        return SLUICE__CLUSTER_TRY_AGAIN;
    return SLUICE__CLUSTER_FAIL;
}

void sluice__redis_cluster_name_slot(GError *error, const sluice__redis_node *node, guint slot)
{
    const char *what = node ? node->endpoint.what : "redis cluster";
    gsize n = strlen(what);
    const char *rest = strncmp(error->message, what, n) == 0 ? error->message + n : NULL;
    char *named = rest ? g_strdup_printf("%s (cluster slot %u)%s", what, slot, rest)
                       : g_strdup_printf("%s (cluster slot %u): %s", what, slot, error->message);
    g_free(error->message);
    error->message = named;
}
