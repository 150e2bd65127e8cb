/* SPDX-License-Identifier: MIT */
/* Which server is the master that a group of Sentinels watches: ask them, then ask it.
 *
 * As Redis' guidelines for Sentinel clients say: ask each Sentinel in turn, with a
 * short timeout, starting with the one that answered last, for the master's
 * address (SENTINEL get-master-addr-by-name); then ask that server its ROLE, and
 * take it only if it says master. A Sentinel that does not answer, does not know
 * the name, or names a server that is not (or is no longer) the master is passed
 * over for the next. Each exchange is on a connection of its own, made and closed
 * here (src/redis/conn.c: connect and command bounded by a deadline). */
#include "redis/sentinel.h"

#include <hiredis/hiredis.h>
#include <sluice/error.h>
#include <string.h>

#include "redis/conn.h"
#include "redis/tls.h"
#include "secret.h"

struct sluice__redis_sentinel {
    sluice__redis_endpoint *sentinels; /* "redis sentinel HOST:PORT", with their password */
    guint n;
    gint first; /* atomic: the Sentinel that answered last */
    char *master;
    char *user, *password;    /* the data nodes' */
    sluice__tls_context *tls; /* everyone's, or NULL */
    char *tls_name;           /* tls_server_name, or NULL: each one's host */
    char *what;
};

sluice__redis_sentinel *sluice__redis_sentinel_new(const char *const *hosts, const int *ports,
                                                   guint n, const char *master,
                                                   const char *sentinel_password, const char *user,
                                                   const char *password, sluice__tls_context *tls,
                                                   const char *tls_name)
{
    sluice__redis_sentinel *s = g_new0(sluice__redis_sentinel, 1);
    s->tls = sluice__tls_context_ref(tls);
    s->tls_name = g_strdup(tls_name);
    s->sentinels = g_new0(sluice__redis_endpoint, n);
    s->n = n;
    for (guint i = 0; i < n; i++) {
        sluice__redis_endpoint *e = &s->sentinels[i];
        sluice__redis_endpoint_init(e, hosts[i], ports[i], NULL, NULL, sentinel_password, 0);
        g_free(e->what);
        e->what = g_strdup_printf("redis sentinel %s:%d", hosts[i], ports[i]);
        if (tls)
            sluice__redis_endpoint_use_tls(e, tls, tls_name);
    }
    s->master = g_strdup(master);
    s->user = g_strdup(user);
    s->password = g_strdup(password);
    s->what = g_strdup_printf("redis+sentinel master %s", master);
    return s;
}

void sluice__redis_sentinel_free(sluice__redis_sentinel *s)
{
    if (!s)
        return;
    for (guint i = 0; i < s->n; i++)
        sluice__redis_endpoint_clear(&s->sentinels[i]);
    g_free(s->sentinels);
    g_free(s->master);
    g_free(s->user);
    sluice__secret_free(s->password);
    sluice__tls_context_unref(s->tls);
    g_free(s->tls_name);
    g_free(s->what);
    g_free(s);
}

const char *sluice__redis_sentinel_what(const sluice__redis_sentinel *s)
{
    return s->what;
}

const char *sluice__redis_sentinel_master(const sluice__redis_sentinel *s)
{
    return s->master;
}

void sluice__redis_sentinel_node(const sluice__redis_sentinel *s, sluice__redis_endpoint *e,
                                 const char *host, int port, int db)
{
    sluice__redis_endpoint_init(e, host, port, NULL, s->user, s->password, db);
    if (s->tls)
        sluice__redis_endpoint_use_tls(e, s->tls, s->tls_name);
}

guint sluice__redis_sentinel_count(const sluice__redis_sentinel *s)
{
    return s->n;
}

const sluice__redis_endpoint *sluice__redis_sentinel_at(const sluice__redis_sentinel *s, guint i)
{
    return &s->sentinels[i];
}

void sluice__redis_sentinel_prefer(sluice__redis_sentinel *s, guint i)
{
    g_atomic_int_set(&s->first, (gint)i);
}

/* An error reply that says a password is missing or wrong. */
static gboolean refused(const redisReply *r)
{
    return g_str_has_prefix(r->str, "NOAUTH") || g_str_has_prefix(r->str, "WRONGPASS") ||
           g_str_has_prefix(r->str, "NOPERM");
}

/* Connects to e and runs argv before deadline: the reply, which is not an error
 * reply, or NULL and *error. */
static redisReply *ask(const sluice__redis_endpoint *e, gint64 deadline, int argc,
                       const char **argv, GError **error)
{
    sluice__redis_transport *t = sluice__redis_connect(e, deadline, FALSE, error);
    if (!t)
        return NULL;
    redisReply *r = sluice__redis_conn_command(e, t, deadline, argc, argv, error);
    sluice__redis_transport_free(t);
    if (r && r->type == REDIS_REPLY_ERROR) {
        sluice__redis_fail(error, refused(r) ? SLUICE_ERROR_AUTH : SLUICE_ERROR_BACKEND, e, argv[0],
                           r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* The address Sentinel e gives for the master before deadline: TRUE, *host and
 * *port; else FALSE and *error. */
static gboolean master_address(const sluice__redis_sentinel *s, const sluice__redis_endpoint *e,
                               gint64 deadline, char **host, int *port, GError **error)
{
    const char *argv[] = {"SENTINEL", "get-master-addr-by-name", s->master};
    redisReply *r = ask(e, deadline, G_N_ELEMENTS(argv), argv, error);
    if (!r)
        return FALSE;
    gint64 p = 0;
    gboolean ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                  r->element[0]->type == REDIS_REPLY_STRING &&
                  r->element[1]->type == REDIS_REPLY_STRING && r->element[0]->len > 0 &&
                  g_ascii_string_to_signed(r->element[1]->str, 10, 1, 65535, &p, NULL);
    if (ok) {
        *host = g_strdup(r->element[0]->str);
        *port = (int)p;
    } else if (r->type == REDIS_REPLY_NIL) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND, "%s: watches no master called %s",
                    e->what, s->master);
    } else {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND,
                    "%s: SENTINEL get-master-addr-by-name: not an address", e->what);
    }
    freeReplyObject(r);
    return ok;
}

gboolean sluice__redis_sentinel_is_master(const sluice__redis_sentinel *s, const char *host,
                                          int port, gint64 deadline, GError **error)
{
    sluice__redis_endpoint node;
    sluice__redis_sentinel_node(s, &node, host, port, 0);
    const char *argv[] = {"ROLE"};
    redisReply *r = ask(&node, deadline, 1, argv, error);
    gboolean master = FALSE;
    if (r) {
        /* ["master", offset, replicas] or ["slave", host, port, state, offset] */
        const char *role = r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                                   r->element[0]->type == REDIS_REPLY_STRING
                               ? r->element[0]->str
                               : "?";
        master = strcmp(role, "master") == 0;
        if (!master)
            g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND,
                        "%s: ROLE: says it is a %s, not the master", node.what, role);
        freeReplyObject(r);
    }
    sluice__redis_endpoint_clear(&node);
    return master;
}

gboolean sluice__redis_sentinel_resolve(sluice__redis_sentinel *s, gint64 step_us, char **host,
                                        int *port, GError **error)
{
    g_autoptr(GString) said = g_string_new(NULL);
    int code = SLUICE_ERROR_BACKEND;
    guint first = (guint)g_atomic_int_get(&s->first);
    for (guint k = 0; k < s->n; k++) {
        guint i = (first + k) % s->n;
        const sluice__redis_endpoint *e = &s->sentinels[i];
        gint64 deadline = g_get_monotonic_time() + step_us;
        g_autoptr(GError) failure = NULL;
        char *h = NULL;
        int p = 0;
        if (master_address(s, e, deadline, &h, &p, &failure) &&
            sluice__redis_sentinel_is_master(s, h, p, deadline, &failure)) {
            sluice__redis_sentinel_prefer(s, i);
            *host = h;
            *port = p;
            return TRUE;
        }
        if (failure->code == SLUICE_ERROR_AUTH ||
            (failure->code == SLUICE_ERROR_TLS && code != SLUICE_ERROR_AUTH))
            code = failure->code;
        if (said->len)
            g_string_append(said, "; ");
        if (h) /* the server it named did not say master */
            g_string_append_printf(said, "%s named it: ", e->what);
        g_string_append(said, failure->message);
        g_free(h);
    }
    g_set_error(error, SLUICE_ERROR, code, "%s: no Sentinel named a master: %s", s->what,
                said->str);
    return FALSE;
}
