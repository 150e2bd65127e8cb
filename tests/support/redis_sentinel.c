/* SPDX-License-Identifier: MIT */
/* A Sentinel-managed Redis for the tests: a master, its replica and three redis-sentinel. */
#include "redis_sentinel.h"

#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tls_certs.h"

/* Ends the process with a message, as redis_server.c does: a suite that needs
 * Sentinel fails without it. */
#define need(cond, ...)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            g_printerr("redis_sentinel: " __VA_ARGS__);                                            \
            g_printerr("\n");                                                                      \
            exit(EXIT_FAILURE);                                                                    \
        }                                                                                          \
    } while (0)

static redisReply *vcommand(const test_redis *server, const char *password, const char *format,
                            va_list ap)
{
    if (server->pid == 0)
        return NULL; /* killed */
    redisContext *ctx = test_redis_connect(server, password);
    redisReply *r = ctx && !ctx->err ? redisvCommand(ctx, format, ap) : NULL;
    if (ctx)
        redisFree(ctx);
    return r;
}

redisReply *test_sentinel_node_command(const test_sentinel *s, const test_redis *node,
                                       const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    redisReply *r = vcommand(node, s->password, format, ap);
    va_end(ap);
    return r;
}

redisReply *test_sentinel_command(const test_sentinel *s, int i, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    redisReply *r = vcommand(s->sentinel[i], s->sentinel_password, format, ap);
    va_end(ap);
    return r;
}

/* The integer after `field` in a flat field/value reply (SENTINEL MASTER, INFO is
 * not one), or -1. */
static gint64 field_of(const redisReply *r, const char *field)
{
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING && strcmp(r->element[i]->str, field) == 0)
            return g_ascii_strtoll(r->element[i + 1]->str, NULL, 10);
    return -1;
}

/* TRUE once node's INFO says `line` (e.g. "master_link_status:up"). */
static gboolean info_says(const test_sentinel *s, const test_redis *node, const char *line)
{
    redisReply *r = test_sentinel_node_command(s, node, "INFO replication");
    gboolean yes = r && r->type == REDIS_REPLY_STRING && strstr(r->str, line);
    if (r)
        freeReplyObject(r);
    return yes;
}

/* Polls cond(s, i) every 10 ms for up to timeout_us; TRUE when it held. */
static gboolean wait_for(const test_sentinel *s, gboolean (*cond)(const test_sentinel *, int),
                         int i, gint64 timeout_us)
{
    gint64 end = g_get_monotonic_time() + timeout_us;
    do {
        if (cond(s, i))
            return TRUE;
        g_usleep(10000);
    } while (g_get_monotonic_time() < end);
    return FALSE;
}

static gboolean replica_in_sync(const test_sentinel *s, int i)
{
    (void)i;
    return info_says(s, s->node[1], "master_link_status:up") &&
           info_says(s, s->node[0], "connected_slaves:1");
}

/* Sentinel i knows the replica and both other Sentinels: a failover can start. */
static gboolean sentinel_ready(const test_sentinel *s, int i)
{
    redisReply *r = test_sentinel_command(s, i, "SENTINEL MASTER %s", TEST_SENTINEL_MASTER);
    gboolean ready = field_of(r, "num-slaves") == 1 && field_of(r, "num-other-sentinels") == 2;
    if (r)
        freeReplyObject(r);
    return ready;
}

/* Where node (or a Sentinel) is reached by the others: its TLS port under TLS. */
static int served_port(const test_sentinel *s, const test_redis *server)
{
    return s->tls ? server->ports[1] : server->port;
}

/* A server of the setup: redis-server (config NULL) or redis-sentinel, with args
 * (NULL-ended) and under TLS the arguments that make it speak TLS on ports[1] with
 * the certificate `cert`. */
static test_redis *start_server(const test_sentinel *s, const char *config, const char *const *args,
                                const char *cert)
{
    g_autoptr(GPtrArray) all = g_ptr_array_new();
    for (int i = 0; args && args[i]; i++)
        g_ptr_array_add(all, test_unconst(args[i]));
    g_auto(GStrv) tls = s->tls ? test_tls_server_args(cert, "optional", "{port1}") : NULL;
    for (int i = 0; tls && tls[i]; i++)
        g_ptr_array_add(all, tls[i]);
    if (tls) {
        g_ptr_array_add(all, test_unconst("--tls-replication"));
        g_ptr_array_add(all, test_unconst("yes"));
    }
    g_ptr_array_add(all, NULL);
    test_redis_options options = {.program = config ? "redis-sentinel" : NULL,
                                  .config = config,
                                  .args = (const char *const *)all->pdata,
                                  .more_ports = s->tls ? 1 : 0};
    return test_redis_start_with(&options);
}

static char *sentinel_config(const test_sentinel *s, int down_after_ms)
{
    GString *c = g_string_new(NULL);
    g_string_append_printf(c, "sentinel monitor %s 127.0.0.1 %d 2\n", TEST_SENTINEL_MASTER,
                           served_port(s, s->node[0]));
    /* failover-timeout also spaces a second attempt after a failed one */
    g_string_append_printf(c, "sentinel down-after-milliseconds %s %d\n", TEST_SENTINEL_MASTER,
                           down_after_ms);
    g_string_append_printf(c, "sentinel failover-timeout %s 2000\n", TEST_SENTINEL_MASTER);
    if (s->password)
        g_string_append_printf(c, "sentinel auth-pass %s %s\n", TEST_SENTINEL_MASTER, s->password);
    if (s->sentinel_password) /* asked of clients and given to the other Sentinels */
        g_string_append_printf(c, "requirepass %s\n", s->sentinel_password);
    return g_string_free(c, FALSE);
}

test_sentinel *test_sentinel_start(const test_sentinel_options *options)
{
    test_sentinel_options none = {0};
    if (!options)
        options = &none;
    test_sentinel *s = g_new0(test_sentinel, 1);
    s->password = g_strdup(options->password);
    s->sentinel_password = g_strdup(options->sentinel_password);
    s->tls = options->tls;

    /* either node may be the master: both sync their replica at once (the default
     * waits 5 s for more replicas), both have the password */
    const char *master[] = {"--repl-diskless-sync-delay",
                            "0",
                            "--requirepass",
                            s->password,
                            "--masterauth",
                            s->password,
                            NULL};
    if (!s->password)
        master[2] = NULL;
    s->node[0] = start_server(s, NULL, master,
                              options->tls_master_cert ? options->tls_master_cert : "server");
    g_autofree char *master_port = g_strdup_printf("%d", served_port(s, s->node[0]));
    const char *replica[] = {"--replicaof", "127.0.0.1",
                             master_port,   "--repl-diskless-sync-delay",
                             "0",           "--requirepass",
                             s->password,   "--masterauth",
                             s->password,   NULL};
    if (!s->password)
        replica[5] = NULL;
    s->node[1] = start_server(s, NULL, replica, "server");
    /* Sentinels learn of replicas from the master's INFO, asked every 10 s: the
     * replica is attached before they ask the first time */
    need(wait_for(s, replica_in_sync, 0, 10 * G_USEC_PER_SEC),
         "the replica on port %d did not sync with the master on port %d", s->node[1]->port,
         s->node[0]->port);

    g_autofree char *config =
        sentinel_config(s, options->down_after_ms > 0 ? options->down_after_ms : 400);
    for (int i = 0; i < 3; i++)
        s->sentinel[i] = start_server(s, config, NULL, "server");
    /* the Sentinels find each other through hello messages, every 2 s */
    for (int i = 0; i < 3; i++)
        need(wait_for(s, sentinel_ready, i, 15 * G_USEC_PER_SEC),
             "the Sentinel on port %d did not learn of the replica and the other Sentinels",
             s->sentinel[i]->port);
    return s;
}

void test_sentinel_stop(test_sentinel *s)
{
    if (!s)
        return;
    for (int i = 0; i < 3; i++)
        test_redis_stop(s->sentinel[i]);
    for (int i = 0; i < 2; i++)
        test_redis_stop(s->node[i]);
    g_free(s->password);
    g_free(s->sentinel_password);
    g_free(s);
}

char *test_sentinel_url(const test_sentinel *s)
{
    return g_strdup_printf("%s://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/%s",
                           s->tls ? "rediss+sentinel" : "redis+sentinel",
                           served_port(s, s->sentinel[0]), served_port(s, s->sentinel[1]),
                           served_port(s, s->sentinel[2]), TEST_SENTINEL_MASTER);
}

static test_redis *node_at(const test_sentinel *s, int port)
{
    for (int n = 0; n < 2; n++)
        if (served_port(s, s->node[n]) == port)
            return s->node[n];
    return NULL;
}

test_redis *test_sentinel_named(const test_sentinel *s, int i)
{
    redisReply *r =
        test_sentinel_command(s, i, "SENTINEL get-master-addr-by-name %s", TEST_SENTINEL_MASTER);
    test_redis *named = NULL;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        strcmp(r->element[0]->str, "127.0.0.1") == 0)
        named = node_at(s, (int)g_ascii_strtoll(r->element[1]->str, NULL, 10));
    if (r)
        freeReplyObject(r);
    return named;
}

test_redis *test_sentinel_other(const test_sentinel *s, const test_redis *node)
{
    return node == s->node[0] ? s->node[1] : s->node[0];
}

static gboolean role_is_master(const test_sentinel *s, const test_redis *node)
{
    redisReply *r = test_sentinel_node_command(s, node, "ROLE");
    gboolean master = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                      r->element[0]->type == REDIS_REPLY_STRING &&
                      strcmp(r->element[0]->str, "master") == 0;
    if (r)
        freeReplyObject(r);
    return master;
}

test_redis *test_sentinel_master(const test_sentinel *s, gint64 timeout_us)
{
    gint64 end = g_get_monotonic_time() + timeout_us;
    do {
        test_redis *named = test_sentinel_named(s, 0);
        gboolean agreed = named != NULL;
        for (int i = 1; agreed && i < 3; i++)
            agreed = test_sentinel_named(s, i) == named;
        if (agreed && role_is_master(s, named))
            return named;
        g_usleep(10000);
    } while (g_get_monotonic_time() < end);
    return NULL;
}

redisContext *test_sentinel_subscribe(const test_sentinel *s, int i)
{
    redisContext *ctx = test_redis_connect(s->sentinel[i], s->sentinel_password);
    need(ctx && !ctx->err, "cannot connect to the Sentinel on port %d", s->sentinel[i]->port);
    redisReply *r = redisCommand(ctx, "SUBSCRIBE +switch-master");
    need(r && r->type == REDIS_REPLY_ARRAY, "SUBSCRIBE +switch-master refused by the Sentinel");
    freeReplyObject(r);
    return ctx;
}

/* The node a +switch-master message names as the new master, or NULL. */
static test_redis *switched_to(const test_sentinel *s, const redisReply *r)
{
    /* ["message", "+switch-master", "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT"] */
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3)
        return NULL;
    g_auto(GStrv) words = g_strsplit(r->element[2]->str, " ", -1);
    if (g_strv_length(words) != 5 || strcmp(words[0], TEST_SENTINEL_MASTER) != 0)
        return NULL;
    return node_at(s, (int)g_ascii_strtoll(words[4], NULL, 10));
}

test_redis *test_sentinel_wait_switch(const test_sentinel *s, redisContext *const *subs, int n,
                                      gint64 timeout_us, gint64 *at_us)
{
    struct pollfd polled[8];
    g_assert(n <= (int)G_N_ELEMENTS(polled));
    gint64 end = g_get_monotonic_time() + timeout_us;
    for (gint64 left; (left = end - g_get_monotonic_time()) > 0;) {
        for (int i = 0; i < n; i++)
            polled[i] = (struct pollfd){.fd = subs[i]->fd, .events = POLLIN};
        if (poll(polled, n, (int)(left / 1000) + 1) <= 0)
            continue;
        *at_us = g_get_monotonic_time();
        for (int i = 0; i < n; i++) {
            redisReply *r = NULL;
            if (!polled[i].revents || redisGetReply(subs[i], (void **)&r) != REDIS_OK || !r)
                continue; /* a blocking read: the message is there */
            test_redis *named = switched_to(s, r);
            freeReplyObject(r);
            if (named)
                return named;
        }
    }
    return NULL;
}
