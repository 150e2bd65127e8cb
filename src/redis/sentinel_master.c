/* SPDX-License-Identifier: MIT */
/* The master of a Sentinel-managed backend: the node calls go to, moved by failovers.
 *
 * Each address the master has had gets a node of its own (endpoint, links,
 * breaker), kept until the backend is freed, since calls may still be on it when
 * the master moves: the addresses are those of the few servers the Sentinels
 * watch. The current node is one atomic pointer, read by every call; the watch's
 * thread moves it when a failover ends or a failed call made it look again. A node
 * the master leaves lets go of its connection, so that coming back to it later
 * connects again. A node is called "redis HOST:PORT (master NAME)" in messages. */
#include "redis/sentinel_master.h"

#include <sluice/error.h>
#include <string.h>

#include "redis/link.h"
#include "redis/sentinel.h"
#include "redis/sentinel_watch.h"
#include "secret.h"

struct sluice__redis_master {
    sluice__redis_sentinel *sentinel;
    sluice__redis_watch *watch;
    sluice__redis_node *current; /* atomic; NULL until a master is found */
    GMutex lock;                 /* guards nodes and moving current */
    GPtrArray *nodes;            /* every master seen */
    char *user, *password;       /* the data nodes' */
    int db;
};

/* The node for host:port, made if it is new. Under the lock. */
static sluice__redis_node *node_at(sluice__redis_master *m, const char *host, int port)
{
    for (guint i = 0; i < m->nodes->len; i++) {
        sluice__redis_node *n = g_ptr_array_index(m->nodes, i);
        if (n->endpoint.port == port && strcmp(n->endpoint.host, host) == 0)
            return n;
    }
    sluice__redis_endpoint e;
    sluice__redis_sentinel_node(m->sentinel, &e, host, port, m->db);
    g_free(e.what);
    e.what = g_strdup_printf("redis %s:%d (master %s)", host, port,
                             sluice__redis_sentinel_master(m->sentinel));
    sluice__redis_node *n = sluice__redis_node_new(&e);
    g_ptr_array_add(m->nodes, n);
    return n;
}

/* The master is at host:port (it said so): calls go there from now on. */
static void found(const char *host, int port, gpointer data)
{
    sluice__redis_master *m = data;
    g_mutex_lock(&m->lock);
    sluice__redis_node *was = g_atomic_pointer_get(&m->current), *now = node_at(m, host, port);
    g_atomic_pointer_set(&m->current, now);
    g_mutex_unlock(&m->lock);
    if (now == was)
        return;
    if (!was) {
        g_debug("%s: the master is %s", sluice__redis_sentinel_what(m->sentinel),
                now->endpoint.what);
        return;
    }
    sluice__redis_node_retire(was);
    g_message("%s: the master is now %s, no longer %s", sluice__redis_sentinel_what(m->sentinel),
              now->endpoint.what, was->endpoint.what);
}

/* A failure that stops init: a refused password, or a certificate TLS refused. */
static gboolean fatal(const GError *failure)
{
    return g_error_matches(failure, SLUICE_ERROR, SLUICE_ERROR_AUTH) ||
           g_error_matches(failure, SLUICE_ERROR, SLUICE_ERROR_TLS);
}

sluice__redis_master *sluice__redis_master_new(const sluice__redis_url *url, const char *password,
                                               const char *sentinel_password,
                                               sluice__tls_context *tls, const char *tls_name,
                                               gint64 timeout_us, GError **error)
{
    sluice__redis_master *m = g_new0(sluice__redis_master, 1);
    const char **hosts = g_new(const char *, url->n_addresses);
    int *ports = g_new(int, url->n_addresses);
    for (guint i = 0; i < url->n_addresses; i++) {
        hosts[i] = url->addresses[i].host;
        ports[i] = url->addresses[i].port;
    }
    m->user = g_strdup(url->user);
    m->password = g_strdup(url->password ? url->password : password);
    m->db = url->db;
    m->sentinel =
        sluice__redis_sentinel_new(hosts, ports, url->n_addresses, url->master, sentinel_password,
                                   m->user, m->password, tls, tls_name);
    g_free(hosts);
    g_free(ports);
    g_mutex_init(&m->lock);
    m->nodes = g_ptr_array_new_with_free_func((GDestroyNotify)sluice__redis_node_free);

    GError *failure = NULL;
    g_autofree char *host = NULL;
    int port;
    if (sluice__redis_sentinel_resolve(m->sentinel, timeout_us, &host, &port, &failure)) {
        found(host, port, m);
        /* bad credentials stop init here, as for one server */
        sluice__redis_node *node = g_atomic_pointer_get(&m->current);
        if (!sluice__redis_link_connect(node->link, g_get_monotonic_time() + timeout_us,
                                        &failure) &&
            !fatal(failure))
            g_clear_error(&failure); /* gone meanwhile: the watch will see */
    }
    if (failure && fatal(failure)) {
        g_propagate_error(error, failure);
        sluice__redis_master_free(m);
        return NULL;
    }
    m->watch = sluice__redis_watch_new(m->sentinel, timeout_us, found, m);
    if (failure) { /* the watch says why, and tries again */
        g_error_free(failure);
        sluice__redis_watch_ask(m->watch);
    }
    return m;
}

void sluice__redis_master_retire(sluice__redis_master *m)
{
    sluice__redis_watch_stop(m->watch);
    sluice__redis_node *node = g_atomic_pointer_get(&m->current);
    if (node)
        sluice__redis_node_retire(node);
}

void sluice__redis_master_free(sluice__redis_master *m)
{
    if (!m)
        return;
    if (m->watch) /* its thread ends first: it moves the master */
        sluice__redis_watch_stop(m->watch);
    g_ptr_array_unref(m->nodes); /* the asynchronous calls they fail do not ask the watch */
    sluice__redis_watch_free(m->watch);
    g_mutex_clear(&m->lock);
    sluice__redis_sentinel_free(m->sentinel);
    g_free(m->user);
    sluice__secret_free(m->password);
    g_free(m);
}

sluice__redis_node *sluice__redis_master_node(sluice__redis_master *m, GError **error)
{
    sluice__redis_node *node = g_atomic_pointer_get(&m->current);
    if (!node)
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND, "%s: no master found yet",
                    sluice__redis_sentinel_what(m->sentinel));
    return node;
}

void sluice__redis_master_failed(sluice__redis_master *m, sluice__redis_node *node)
{
    if (node == g_atomic_pointer_get(&m->current))
        sluice__redis_watch_ask(m->watch);
}
