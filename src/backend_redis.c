/* The redis backend: the algorithms of lua/ run in Redis, shared by every process.
 *
 * Each thread has its own hiredis connection (so threads never queue behind each
 * other's round trips), made on first use and made again after an I/O error, in
 * a forked child, or for a new backend. A decision is one EVALSHA of the rule's
 * script; NOSCRIPT loads the script and retries once. Times come from Redis TIME
 * inside the script, except under the test clock (sluice_testing_set_clock),
 * whose time is passed as the scripts' override. A breaker stops calling a dead
 * server for a growing pause so that on_error answers at once meanwhile. */
#include "backend_redis.h"

#include <errno.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <sluice/error.h>

#include "breaker.h"
#include "clock.h"
#include "lua_scripts.h"
#include "redis_key.h"
#include "redis_url.h"

#define ALGORITHMS 6

typedef struct {
    sluice__backend base;
    sluice__redis_url url;
    char *prefix;
    gint64 timeout_us;
    char *what; /* "redis 127.0.0.1:6379", for messages (never the password) */
    char *sha[ALGORITHMS];
    sluice__breaker breaker;
    guint generation; /* tells this backend's connections from older ones */
} redis_backend;

/* One thread's connection. */
typedef struct {
    redisContext *ctx;
    pid_t pid;
    guint generation;
} connection;

static void connection_free(gpointer p)
{
    connection *c = p;
    if (c->ctx)
        redisFree(c->ctx);
    g_free(c);
}

static GPrivate thread_connection = G_PRIVATE_INIT(connection_free);
static guint generations; /* atomic */

static struct timeval to_timeval(gint64 us)
{
    return (struct timeval){.tv_sec = us / 1000000, .tv_usec = us % 1000000};
}

static void fail(GError **error, int code, const redis_backend *b, const char *what,
                 const char *detail)
{
    g_set_error(error, SLUICE_ERROR_DOMAIN, code, "%s: %s: %s", b->what, what, detail);
}

/* The reason of an I/O failure of ctx, in words an operator understands. */
static const char *io_reason(const redisContext *ctx)
{
    if (ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK))
        return "timed out";
    if (ctx->err == REDIS_ERR_EOF)
        return "connection closed by the server";
    return ctx->errstr[0] ? ctx->errstr : "I/O error";
}

/* Runs one command on ctx; FALSE (and *error) when it failed or Redis answered
 * with an error (auth_code is the code for that case). */
static gboolean command(const redis_backend *b, redisContext *ctx, int auth_code, GError **error,
                        int argc, const char **argv)
{
    redisReply *reply = redisCommandArgv(ctx, argc, argv, NULL);
    if (!reply) {
        fail(error, SLUICE_ERROR_BACKEND, b, argv[0], io_reason(ctx));
        return FALSE;
    }
    gboolean ok = reply->type != REDIS_REPLY_ERROR;
    if (!ok)
        fail(error, auth_code, b, argv[0], reply->str);
    freeReplyObject(reply);
    return ok;
}

/* A new connection, authenticated and on its database; NULL and *error when not.
 * probe: also PING, so that a server wanting a password it was not given fails
 * now with SLUICE_ERROR_AUTH (at init), not at the first decision. */
static redisContext *connect_to(const redis_backend *b, gboolean probe, GError **error)
{
    struct timeval tv = to_timeval(b->timeout_us);
    redisContext *ctx = b->url.socket ? redisConnectUnixWithTimeout(b->url.socket, tv)
                                      : redisConnectWithTimeout(b->url.host, b->url.port, tv);
    if (!ctx || ctx->err) {
        fail(error, SLUICE_ERROR_BACKEND, b, "connect",
             ctx ? (ctx->err == REDIS_ERR_IO && errno == EINPROGRESS ? "timed out" : ctx->errstr)
                 : "out of memory");
        if (ctx)
            redisFree(ctx);
        return NULL;
    }
    redisSetTimeout(ctx, tv);
    if (!b->url.socket)
        redisEnableKeepAlive(ctx);
    if (b->url.password) {
        const char *with_user[] = {"AUTH", b->url.user, b->url.password};
        const char *password_only[] = {"AUTH", b->url.password};
        gboolean ok = b->url.user ? command(b, ctx, SLUICE_ERROR_AUTH, error, 3, with_user)
                                  : command(b, ctx, SLUICE_ERROR_AUTH, error, 2, password_only);
        if (!ok) {
            redisFree(ctx);
            return NULL;
        }
    }
    const char *ping[] = {"PING"}; /* NOAUTH here: a password is needed and missing */
    if (probe && !command(b, ctx, SLUICE_ERROR_AUTH, error, 1, ping)) {
        redisFree(ctx);
        return NULL;
    }
    if (b->url.db != 0) {
        g_autofree char *db = g_strdup_printf("%d", b->url.db);
        const char *select[] = {"SELECT", db};
        if (!command(b, ctx, SLUICE_ERROR_BACKEND, error, 2, select)) {
            redisFree(ctx);
            return NULL;
        }
    }
    return ctx;
}

/* This thread's connection to b, connecting when needed; NULL and *error when not. */
static connection *connection_for(const redis_backend *b, gboolean probe, GError **error)
{
    connection *c = g_private_get(&thread_connection);
    if (!c) {
        c = g_new0(connection, 1);
        g_private_set(&thread_connection, c);
    }
    if (c->ctx && (c->generation != b->generation || c->pid != getpid())) {
        redisFree(c->ctx); /* another backend's, or the parent's socket after fork() */
        c->ctx = NULL;
    }
    if (!c->ctx) {
        c->ctx = connect_to(b, probe, error);
        if (!c->ctx)
            return NULL;
        c->pid = getpid();
        c->generation = b->generation;
    }
    return c;
}

static void drop_connection(connection *c)
{
    redisFree(c->ctx);
    c->ctx = NULL;
}

/* Runs the script of rule; the reply array on success. */
static redisReply *run_script(redis_backend *b, connection *c, const sluice__rule *rule,
                              const char *k1, const char *k2, const char *op, gint64 permits,
                              gint64 reserve_us, GError **error)
{
    char args[7][24];
    g_snprintf(args[0], 24, "%" G_GINT64_FORMAT, rule->limit);
    g_snprintf(args[1], 24, "%" G_GINT64_FORMAT, rule->window_us);
    g_snprintf(args[2], 24, "%" G_GINT64_FORMAT, rule->burst);
    g_snprintf(args[3], 24, "%" G_GINT64_FORMAT, rule->interval_us);
    g_snprintf(args[4], 24, "%" G_GINT64_FORMAT, permits);
    g_snprintf(args[5], 24, "%" G_GINT64_FORMAT, reserve_us);
    if (sluice__clock_injected()) /* tests and replay only: never in normal operation */
        g_snprintf(args[6], 24, "%" G_GINT64_FORMAT, sluice__clock_now());
    else
        args[6][0] = '\0';
    const char *argv[] = {"EVALSHA", b->sha[rule->algorithm],
                          "2",       k1,
                          k2,        op,
                          args[0],   args[1],
                          args[2],   args[3],
                          args[4],   args[5],
                          args[6]};

    for (int attempt = 0; attempt < 2; attempt++) {
        redisReply *reply = redisCommandArgv(c->ctx, G_N_ELEMENTS(argv), argv, NULL);
        if (!reply) {
            fail(error, SLUICE_ERROR_BACKEND, b, "EVALSHA", io_reason(c->ctx));
            drop_connection(c);
            return NULL;
        }
        if (reply->type == REDIS_REPLY_ERROR && g_str_has_prefix(reply->str, "NOSCRIPT") &&
            attempt == 0) {
            freeReplyObject(reply);
            const char *load[] = {"SCRIPT", "LOAD", sluice__lua_scripts[rule->algorithm]};
            if (!command(b, c->ctx, SLUICE_ERROR_BACKEND, error, 3, load)) {
                if (c->ctx->err)
                    drop_connection(c);
                return NULL;
            }
            continue;
        }
        if (reply->type == REDIS_REPLY_ERROR) {
            fail(error, SLUICE_ERROR_BACKEND, b, "script", reply->str);
            freeReplyObject(reply);
            return NULL;
        }
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 7) {
            fail(error, SLUICE_ERROR_BACKEND, b, "script", "unexpected reply");
            freeReplyObject(reply);
            return NULL;
        }
        for (size_t i = 0; i < 7; i++) {
            if (reply->element[i]->type != REDIS_REPLY_INTEGER) {
                fail(error, SLUICE_ERROR_BACKEND, b, "script", "reply is not integers");
                freeReplyObject(reply);
                return NULL;
            }
        }
        return reply;
    }
    g_assert_not_reached();
}

/* One script call with the breaker around it; fills v when it succeeded. */
static gboolean call(redis_backend *b, sluice__limiter *limiter, const sluice__rule *rule,
                     const char *key, const char *op, gint64 permits, gint64 reserve_us,
                     sluice__verdict *v, GError **error)
{
    GError *failure = NULL;
    if (!sluice__breaker_allow(&b->breaker)) {
        g_set_error(error, SLUICE_ERROR_DOMAIN, SLUICE_ERROR_BACKEND,
                    "%s: not answering; next try in %" G_GINT64_FORMAT " ms", b->what,
                    sluice__breaker_retry_ms(&b->breaker));
        return FALSE;
    }
    connection *c = connection_for(b, FALSE, &failure);
    redisReply *reply = NULL;
    if (c) {
        g_auto(sluice__redis_keys) keys = {NULL, NULL};
        sluice__redis_keys_build(&keys, b->prefix, limiter->name, key);
        reply = run_script(b, c, rule, keys.state, keys.seq, op, permits, reserve_us, &failure);
    }
    if (!reply) {
        sluice__breaker_failure(&b->breaker, failure->message);
        g_propagate_error(error, failure);
        return FALSE;
    }
    sluice__breaker_success(&b->breaker);
    if (v) {
        v->allowed = reply->element[0]->integer != 0;
        v->limit = reply->element[1]->integer;
        v->remaining = reply->element[2]->integer;
        v->retry_after_us = reply->element[3]->integer;
        v->reset_after_us = reply->element[4]->integer;
        v->wait_us = reply->element[5]->integer;
        v->leased = reply->element[6]->integer;
    }
    freeReplyObject(reply);
    return TRUE;
}

static gboolean redis_decide(sluice__backend *backend, sluice__limiter *limiter,
                             const sluice__rule *rule, const char *key, gint64 permits,
                             gint64 reserve_us, sluice__verdict *verdict, GError **error)
{
    return call((redis_backend *)backend, limiter, rule, key, "acquire", permits, reserve_us,
                verdict, error);
}

static void redis_give_back(sluice__backend *backend, sluice__limiter *limiter,
                            const sluice__rule *rule, const char *key, gint64 permits)
{
    g_autoptr(GError) error = NULL;
    if (!call((redis_backend *)backend, limiter, rule, key, "release", permits, 0, NULL, &error))
        g_debug("%s: giving back %" G_GINT64_FORMAT " permits failed (the leases expire by "
                "themselves): %s",
                limiter->name, permits, error->message);
}

/* DEL of the state key and its :seq key; the breaker is not consulted, so an
 * operator's reset reaches a server that has just come back. */
static gboolean redis_reset(sluice__backend *backend, sluice__limiter *limiter, const char *key,
                            GError **error)
{
    redis_backend *b = (redis_backend *)backend;
    GError *failure = NULL;
    connection *c = connection_for(b, FALSE, &failure);
    if (c) {
        g_auto(sluice__redis_keys) keys = {NULL, NULL};
        sluice__redis_keys_build(&keys, b->prefix, limiter->name, key);
        const char *del[] = {"DEL", keys.state, keys.seq};
        if (command(b, c->ctx, SLUICE_ERROR_BACKEND, &failure, 3, del))
            return TRUE;
        if (c->ctx->err)
            drop_connection(c);
    }
    g_propagate_error(error, failure);
    return FALSE;
}

static void redis_free(sluice__backend *backend)
{
    redis_backend *b = (redis_backend *)backend;
    connection *c = g_private_get(&thread_connection);
    if (c && c->ctx && c->generation == b->generation)
        drop_connection(c);
    sluice__redis_url_clear(&b->url);
    sluice__breaker_clear(&b->breaker);
    for (int i = 0; i < ALGORITHMS; i++)
        g_free(b->sha[i]);
    g_free(b->prefix);
    g_free(b->what);
    g_free(b);
}

static const sluice__backend_funcs redis_funcs = {
    .name = "redis",
    .decide = redis_decide,
    .give_back = redis_give_back,
    .reset = redis_reset,
    .free = redis_free,
};

sluice__backend *sluice__backend_redis_new(const sluice__config *config, GError **error)
{
    redis_backend *b = g_new0(redis_backend, 1);
    char *why = NULL;

    b->base.funcs = &redis_funcs;
    if (!sluice__redis_url_parse(config->redis_url, &b->url, &why)) {
        g_set_error(error, SLUICE_ERROR_DOMAIN, SLUICE_ERROR_CONFIG, "%s: [sluice] redis: %s",
                    config->path ? config->path : "defaults", why);
        g_free(why);
        g_free(b);
        return NULL;
    }
    b->prefix = g_strdup(config->key_prefix);
    b->timeout_us = config->timeout_us;
    b->what = b->url.socket ? g_strdup_printf("redis %s", b->url.socket)
                            : g_strdup_printf("redis %s:%d", b->url.host, b->url.port);
    for (int i = 0; i < ALGORITHMS; i++)
        b->sha[i] = g_compute_checksum_for_string(G_CHECKSUM_SHA1, sluice__lua_scripts[i], -1);
    sluice__breaker_init(&b->breaker, b->what);
    b->generation = (guint)g_atomic_int_add(&generations, 1) + 1;

    /* connect now: bad credentials stop init, an absent server does not */
    GError *failure = NULL;
    if (!connection_for(b, TRUE, &failure)) {
        if (g_error_matches(failure, SLUICE_ERROR_DOMAIN, SLUICE_ERROR_AUTH)) {
            g_propagate_error(error, failure);
            redis_free(&b->base);
            return NULL;
        }
        g_message("%s; on_error decides until it answers", failure->message);
        g_error_free(failure);
    }
    return &b->base;
}
