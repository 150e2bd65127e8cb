/* SPDX-License-Identifier: MIT */
/* One Redis server as sluice reaches it: where, as whom, and its name in messages. */
#include "redis/endpoint.h"

#include <sluice/error.h>

#include "redis/tls.h"
#include "secret.h"

void sluice__redis_endpoint_init(sluice__redis_endpoint *e, const char *host, int port,
                                 const char *socket, const char *user, const char *password, int db)
{
    e->host = g_strdup(host);
    e->port = port;
    e->socket = g_strdup(socket);
    e->user = g_strdup(user);
    e->password = g_strdup(password);
    e->db = db;
    e->tls = NULL;
    e->tls_name = NULL;
    e->what =
        socket ? g_strdup_printf("redis %s", socket) : g_strdup_printf("redis %s:%d", host, port);
}

void sluice__redis_endpoint_clear(sluice__redis_endpoint *e)
{
    g_clear_pointer(&e->host, g_free);
    g_clear_pointer(&e->socket, g_free);
    g_clear_pointer(&e->user, g_free);
    g_clear_pointer(&e->password, sluice__secret_free);
    g_clear_pointer(&e->what, g_free);
    g_clear_pointer(&e->tls, sluice__tls_context_unref);
    g_clear_pointer(&e->tls_name, g_free);
}

void sluice__redis_endpoint_use_tls(sluice__redis_endpoint *e, sluice__tls_context *tls,
                                    const char *name)
{
    e->tls = sluice__tls_context_ref(tls);
    e->tls_name = g_strdup(name ? name : e->host);
}

void sluice__redis_fail(GError **error, int code, const sluice__redis_endpoint *e, const char *step,
                        const char *detail)
{
    g_set_error(error, SLUICE_ERROR, code, "%s: %s: %s", e->what, step, detail);
}
