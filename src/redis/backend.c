/* The redis backend: the algorithms of lua/ run in Redis, shared by every process.
 *
 * A decision is one EVALSHA of the rule's script on the process's shared,
 * pipelined connection (redis_link.c: threads deciding at once share round trips
 * instead of queueing behind each other's); NOSCRIPT runs it once more with EVAL,
 * which caches it again. A call, with the connect, AUTH and SELECT it may need,
 * ends by one deadline. Times come from Redis TIME inside the script, except under
 * the test clock (sluice_testing_set_clock), whose time is passed as the scripts'
 * override. A breaker stops calling a dead server for a growing pause so that
 * on_error answers at once meanwhile. */
#include "redis/redis.h"

#include <hiredis/hiredis.h>
#include <sluice/error.h>

#include "redis/async_client.h"
#include "redis/breaker.h"
#include "clock.h"
#include "lua_scripts.h"
#include "redis/conn.h"
#include "redis/key.h"
#include "redis/link.h"
#include "redis/script.h"
#include "redis/url.h"

#define ALGORITHMS SLUICE__ALGORITHMS

typedef sluice__redis_backend redis_backend;

/* Runs the script of rule before deadline; the reply array on success, else NULL
 * and *error, with *stale TRUE when the server closed a connection older than the
 * call (worth one more try). */
static redisReply *run_script(redis_backend *b, gint64 deadline, const sluice__rule *rule,
                              const char *k1, const char *k2, const char *op, gint64 permits,
                              gint64 reserve_us, gboolean *stale, GError **error)
{
    sluice__redis_script script;
    sluice__redis_script_init(&script, b->sha[rule->algorithm], rule, k1, k2, op, permits,
                              reserve_us);
    for (int attempt = 0; attempt < 2; attempt++) {
        redisReply *reply = sluice__redis_link_command(b->link, deadline, SLUICE__REDIS_SCRIPT_ARGC,
                                                       script.argv, stale, error);
        if (!reply)
            return NULL;
        if (sluice__redis_is_noscript(reply) && attempt == 0) {
            /* a flushed script cache or a new server: EVAL runs the script and
             * caches it again, in one round trip */
            freeReplyObject(reply);
            sluice__redis_script_use_eval(&script, rule->algorithm);
            continue;
        }
        const char *why;
        if (!sluice__redis_script_verdict(reply, NULL, &why)) {
            sluice__redis_fail(error, SLUICE_ERROR_BACKEND, b, "script", why);
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
        gboolean stale = FALSE;
        g_clear_error(&failure);
        reply = run_script(b, deadline, rule, keys.state, keys.seq, op, permits, reserve_us, &stale,
                           &failure);
        if (!stale)
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
    gint64 deadline = g_get_monotonic_time() + b->timeout_us;
    sluice__redis_keys keys[ALGORITHMS];
    const char *del[1 + 2 * ALGORITHMS] = {"DEL"};
    for (int i = 0; i < ALGORITHMS; i++) {
        sluice__redis_keys_build(&keys[i], b->prefixes[i], limiter->name, key);
        del[1 + 2 * i] = keys[i].state;
        del[2 + 2 * i] = keys[i].seq;
    }
    gboolean stale;
    redisReply *reply =
        sluice__redis_link_command(b->link, deadline, G_N_ELEMENTS(del), del, &stale, error);
    for (int i = 0; i < ALGORITHMS; i++)
        sluice__redis_keys_clear(&keys[i]);
    if (reply && reply->type == REDIS_REPLY_ERROR)
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, b, "DEL", reply->str);
    gboolean ok = reply && reply->type != REDIS_REPLY_ERROR;
    if (reply)
        freeReplyObject(reply);
    return ok;
}

/* A reload replaced this backend: its connection closes (calls still on it
 * finish first); the asynchronous client's go with their main contexts. */
static void redis_retire(sluice__backend *backend)
{
    sluice__redis_link_close(((redis_backend *)backend)->link);
}

static void redis_free(sluice__backend *backend)
{
    redis_backend *b = (redis_backend *)backend;
    sluice__redis_link_free(b->link);
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
    .retire = redis_retire,
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
    b->link = sluice__redis_link_new(b);
    b->async = sluice__redis_async_new();

    /* connect now: bad credentials stop init, an absent server does not */
    GError *failure = NULL;
    if (!sluice__redis_link_connect(b->link, g_get_monotonic_time() + b->timeout_us, &failure)) {
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
