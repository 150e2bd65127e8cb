/* The redis backend: the algorithms of lua/ run in Redis, shared by every process.
 *
 * Each thread has its own hiredis connection (so threads never queue behind each
 * other's round trips), made on first use and made again after an I/O error, in
 * a forked child, or for a new backend. A decision is one EVALSHA of the rule's
 * script; NOSCRIPT runs it once more with EVAL, which caches it again. A call,
 * with its connect, AUTH and SELECT, ends by one deadline: the socket is
 * non-blocking and every wait is a poll() of what is left. Times come from Redis TIME
 * inside the script, except under the test clock (sluice_testing_set_clock),
 * whose time is passed as the scripts' override. A breaker stops calling a dead
 * server for a growing pause so that on_error answers at once meanwhile. */
#define _GNU_SOURCE /* ppoll */
#include "backend_redis.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <sluice/error.h>

#include "backend_redis_async.h"
#include "breaker.h"
#include "clock.h"
#include "lua_scripts.h"
#include "redis_key.h"
#include "redis_script.h"
#include "redis_url.h"

#define ALGORITHMS SLUICE__ALGORITHMS

typedef sluice__redis_backend redis_backend;

/* One thread's connection. */
typedef struct {
    redisContext *ctx; /* its socket is non-blocking: every wait is a poll() */
    pid_t pid;
    guint generation;
    gboolean reused; /* ctx was made before the current call */
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

static void drop_connection(connection *c)
{
    redisFree(c->ctx);
    c->ctx = NULL;
}

/* How one exchange with Redis ended. */
typedef enum {
    SENT,      /* a reply came (maybe an error reply)                           */
    TIMED_OUT, /* the call's deadline passed                                    */
    LOST,      /* the server closed or reset the connection                    */
    BROKEN,    /* another I/O error                                             */
} outcome;

static const char *outcome_reason(outcome o, const redisContext *ctx)
{
    switch (o) {
    case TIMED_OUT:
        return "timed out";
    case LOST:
        return "connection closed by the server";
    default:
        return ctx && ctx->errstr[0] ? ctx->errstr : "I/O error";
    }
}

/* Waits until c's socket is ready for `events` or deadline (µs, monotonic) has
 * passed; FALSE when it has. poll() keeps to the microsecond, where socket
 * timeouts (SO_RCVTIMEO) round up to the kernel's tick. */
static gboolean ready(const connection *c, short events, gint64 deadline)
{
    for (;;) {
        gint64 left = deadline - g_get_monotonic_time();
        if (left <= 0)
            return FALSE;
        struct pollfd p = {.fd = c->ctx->fd, .events = events};
        struct timespec ts = {.tv_sec = left / 1000000, .tv_nsec = left % 1000000 * 1000};
        int n = ppoll(&p, 1, &ts, NULL);
        if (n > 0)
            return TRUE; /* ready, or an error or hang-up that the next I/O reports */
        if (n < 0 && errno != EINTR)
            return TRUE;
    }
}

/* The outcome of a failed read or write of c, errno saved right after it. */
static outcome io_failure(const connection *c, int saved_errno)
{
    if (c->ctx->err == REDIS_ERR_EOF || saved_errno == ECONNRESET || saved_errno == EPIPE)
        return LOST;
    return BROKEN;
}

/* Sends a command (send() with MSG_NOSIGNAL: a closed connection is an error,
 * never a SIGPIPE) before deadline. */
static outcome send_all(connection *c, gint64 deadline, const char *data, gsize len)
{
    while (len > 0) {
        ssize_t n = send(c->ctx->fd, data, len, MSG_NOSIGNAL);
        if (n > 0) {
            data += n;
            len -= (gsize)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (!ready(c, POLLOUT, deadline))
                return TIMED_OUT;
        } else {
            int saved = errno;
            g_strlcpy(c->ctx->errstr, g_strerror(saved), sizeof c->ctx->errstr);
            return io_failure(c, saved);
        }
    }
    return SENT;
}

/* Sends one command on c and reads its reply, waiting no later than deadline.
 * SENT with *reply, or why not: then the caller drops the connection (a reply
 * may still be on its way; the next command must not read it). */
static outcome exchange(connection *c, gint64 deadline, int argc, const char **argv,
                        redisReply **reply)
{
    char *cmd = NULL;
    void *r = NULL;

    *reply = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, NULL);
    if (len < 0)
        return BROKEN;
    outcome o = send_all(c, deadline, cmd, (gsize)len);
    redisFreeCommand(cmd);
    if (o != SENT)
        return o;
    for (;;) {
        if (redisGetReplyFromReader(c->ctx, &r) != REDIS_OK)
            return BROKEN;
        if (r) {
            *reply = r;
            return SENT;
        }
        if (!ready(c, POLLIN, deadline))
            return TIMED_OUT;
        if (redisBufferRead(c->ctx) != REDIS_OK) /* EAGAIN: nothing yet, not an error */
            return io_failure(c, errno);
    }
}

/* Runs one command on c; FALSE (and *error) when it failed or Redis answered with
 * an error (auth_code is the code for that case). The connection is dropped on an
 * I/O failure. */
static gboolean command(const redis_backend *b, connection *c, gint64 deadline, int auth_code,
                        GError **error, int argc, const char **argv)
{
    redisReply *reply;
    outcome o = exchange(c, deadline, argc, argv, &reply);
    if (o != SENT) {
        fail(error, SLUICE_ERROR_BACKEND, b, argv[0], outcome_reason(o, c->ctx));
        drop_connection(c);
        return FALSE;
    }
    gboolean ok = reply->type != REDIS_REPLY_ERROR;
    if (!ok)
        fail(error, auth_code, b, argv[0], reply->str);
    freeReplyObject(reply);
    return ok;
}

/* Makes c's connection, authenticated and on its database, before deadline; FALSE
 * and *error when not. probe: also PING, so that a server wanting a password it
 * was not given fails now with SLUICE_ERROR_AUTH (at init), not at the first
 * decision. */
static gboolean connect_to(const redis_backend *b, connection *c, gint64 deadline, gboolean probe,
                           GError **error)
{
    gint64 left = deadline - g_get_monotonic_time();
    if (left <= 0) {
        fail(error, SLUICE_ERROR_BACKEND, b, "connect", "timed out");
        return FALSE;
    }
    struct timeval tv = to_timeval(left);
    c->ctx = b->url.socket ? redisConnectUnixWithTimeout(b->url.socket, tv)
                           : redisConnectWithTimeout(b->url.host, b->url.port, tv);
    if (!c->ctx || c->ctx->err) {
        fail(error, SLUICE_ERROR_BACKEND, b, "connect",
             !c->ctx ? "out of memory"
             : c->ctx->err == REDIS_ERR_IO && (errno == EINPROGRESS || errno == ETIMEDOUT)
                 ? "timed out"
                 : c->ctx->errstr);
        if (c->ctx)
            drop_connection(c);
        return FALSE;
    }
    if (!b->url.socket)
        redisEnableKeepAlive(c->ctx);
    /* from now on hiredis only parses: sluice sends and polls itself */
    int flags = fcntl(c->ctx->fd, F_GETFL);
    if (flags < 0 || fcntl(c->ctx->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        fail(error, SLUICE_ERROR_BACKEND, b, "connect", g_strerror(errno));
        goto err;
    }
    c->ctx->flags &= ~REDIS_BLOCK;
    if (b->url.password) {
        const char *with_user[] = {"AUTH", b->url.user, b->url.password};
        const char *password_only[] = {"AUTH", b->url.password};
        gboolean ok = b->url.user
                          ? command(b, c, deadline, SLUICE_ERROR_AUTH, error, 3, with_user)
                          : command(b, c, deadline, SLUICE_ERROR_AUTH, error, 2, password_only);
        if (!ok)
            goto err;
    }
    const char *ping[] = {"PING"}; /* NOAUTH here: a password is needed and missing */
    if (probe && !command(b, c, deadline, SLUICE_ERROR_AUTH, error, 1, ping))
        goto err;
    if (b->url.db != 0) {
        g_autofree char *db = g_strdup_printf("%d", b->url.db);
        const char *select[] = {"SELECT", db};
        if (!command(b, c, deadline, SLUICE_ERROR_BACKEND, error, 2, select))
            goto err;
    }
    return TRUE;
err:
    if (c->ctx)
        drop_connection(c);
    return FALSE;
}

/* This thread's connection to b, connecting before deadline when needed; NULL and
 * *error when not. */
static connection *connection_for(const redis_backend *b, gint64 deadline, gboolean probe,
                                  GError **error)
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
    c->reused = c->ctx != NULL;
    if (!c->ctx) {
        if (!connect_to(b, c, deadline, probe, error))
            return NULL;
        c->pid = getpid();
        c->generation = b->generation;
    }
    return c;
}

/* Runs the script of rule before deadline; the reply array on success, else NULL
 * and *error, with *lost TRUE when the server closed the connection. */
static redisReply *run_script(redis_backend *b, connection *c, gint64 deadline,
                              const sluice__rule *rule, const char *k1, const char *k2,
                              const char *op, gint64 permits, gint64 reserve_us, gboolean *lost,
                              GError **error)
{
    sluice__redis_script script;
    sluice__redis_script_init(&script, b->sha[rule->algorithm], rule, k1, k2, op, permits,
                              reserve_us);
    *lost = FALSE;
    for (int attempt = 0; attempt < 2; attempt++) {
        redisReply *reply;
        outcome o = exchange(c, deadline, SLUICE__REDIS_SCRIPT_ARGC, script.argv, &reply);
        if (o != SENT) {
            fail(error, SLUICE_ERROR_BACKEND, b, script.argv[0], outcome_reason(o, c->ctx));
            *lost = o == LOST;
            drop_connection(c);
            return NULL;
        }
        if (sluice__redis_is_noscript(reply) && attempt == 0) {
            /* a flushed script cache or a new server: EVAL runs the script and
             * caches it again, in one round trip */
            freeReplyObject(reply);
            sluice__redis_script_use_eval(&script, rule->algorithm);
            continue;
        }
        const char *why;
        if (!sluice__redis_script_verdict(reply, NULL, &why)) {
            fail(error, SLUICE_ERROR_BACKEND, b, "script", why);
            freeReplyObject(reply);
            return NULL;
        }
        return reply;
    }
    g_assert_not_reached();
}

/* One script call with the breaker around it, within the backend's timeout in
 * all (connect, AUTH, SELECT, EVALSHA, EVAL after NOSCRIPT); fills v when it
 * succeeded. A connection made before this call that the server has closed
 * (restarted, CLIENT KILL, idle timeout) is replaced once, within the same time. */
static gboolean call(redis_backend *b, sluice__limiter *limiter, const sluice__rule *rule,
                     const char *key, const char *op, gint64 permits, gint64 reserve_us,
                     sluice__verdict *v, GError **error)
{
    GError *failure = NULL;
    gboolean trial;
    if (!sluice__breaker_allow(&b->breaker, &trial)) {
        sluice__breaker_refuse(&b->breaker, error);
        return FALSE;
    }
    gint64 deadline = g_get_monotonic_time() + b->timeout_us;
    g_auto(sluice__redis_keys) keys = {NULL, NULL};
    sluice__redis_keys_build(&keys, b->prefixes[rule->algorithm], limiter->name, key);
    redisReply *reply = NULL;
    for (int attempt = 0; !reply && attempt < 2; attempt++) {
        g_clear_error(&failure);
        connection *c = connection_for(b, deadline, FALSE, &failure);
        gboolean lost = FALSE, reused = c && c->reused;
        if (c)
            reply = run_script(b, c, deadline, rule, keys.state, keys.seq, op, permits, reserve_us,
                               &lost, &failure);
        if (!(lost && reused))
            break;
    }
    if (!reply) {
        sluice__breaker_failure(&b->breaker, trial, failure->message);
        g_propagate_error(error, failure);
        return FALSE;
    }
    sluice__breaker_success(&b->breaker);
    const char *why;
    sluice__redis_script_verdict(reply, v, &why); /* checked by run_script */
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

/* DEL of the state key and its :seq key under every algorithm's prefix (state an
 * earlier algorithm left goes too); the breaker is not consulted, so an
 * operator's reset reaches a server that has just come back. */
static gboolean redis_reset(sluice__backend *backend, sluice__limiter *limiter, const char *key,
                            GError **error)
{
    redis_backend *b = (redis_backend *)backend;
    GError *failure = NULL;
    gint64 deadline = g_get_monotonic_time() + b->timeout_us;
    connection *c = connection_for(b, deadline, FALSE, &failure);
    if (c) {
        sluice__redis_keys keys[ALGORITHMS];
        const char *del[1 + 2 * ALGORITHMS] = {"DEL"};
        for (int i = 0; i < ALGORITHMS; i++) {
            sluice__redis_keys_build(&keys[i], b->prefixes[i], limiter->name, key);
            del[1 + 2 * i] = keys[i].state;
            del[2 + 2 * i] = keys[i].seq;
        }
        gboolean ok =
            command(b, c, deadline, SLUICE_ERROR_BACKEND, &failure, G_N_ELEMENTS(del), del);
        for (int i = 0; i < ALGORITHMS; i++)
            sluice__redis_keys_clear(&keys[i]);
        if (ok)
            return TRUE;
        /* command() dropped the connection if it broke */
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
    sluice__redis_async_free(b->async);
    sluice__redis_url_clear(&b->url);
    sluice__breaker_clear(&b->breaker);
    for (int i = 0; i < ALGORITHMS; i++)
        g_free(b->sha[i]);
    g_free(b->prefix);
    for (int i = 0; i < ALGORITHMS; i++)
        g_free(b->prefixes[i]);
    g_free(b->what);
    g_free(b);
}

static const sluice__backend_funcs redis_funcs = {
    .name = "redis",
    .decide = redis_decide,
    .decide_async = sluice__redis_decide_async,
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
    if (!b->url.password && config->redis_password) /* password_file, $SLUICE_REDIS_PASSWORD */
        b->url.password = g_strdup(config->redis_password);
    b->prefix = g_strdup(config->key_prefix);
    static const char *const tags[ALGORITHMS] = {"fw", "sl", "sw", "tb", "gc", "cc"};
    for (int i = 0; i < ALGORITHMS; i++)
        b->prefixes[i] = g_strconcat(config->key_prefix, tags[i], ":", NULL);
    b->timeout_us = config->timeout_us;
    b->what = b->url.socket ? g_strdup_printf("redis %s", b->url.socket)
                            : g_strdup_printf("redis %s:%d", b->url.host, b->url.port);
    for (int i = 0; i < ALGORITHMS; i++)
        b->sha[i] = g_compute_checksum_for_string(G_CHECKSUM_SHA1, sluice__lua_scripts[i], -1);
    sluice__breaker_init(&b->breaker, b->what);
    b->generation = (guint)g_atomic_int_add(&generations, 1) + 1;
    b->async = sluice__redis_async_new();

    /* connect now: bad credentials stop init, an absent server does not */
    GError *failure = NULL;
    if (!connection_for(b, g_get_monotonic_time() + b->timeout_us, TRUE, &failure)) {
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
