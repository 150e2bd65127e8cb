/* The redis backend: the algorithms of lua/ run in Redis, shared by every process.
 *
 * A decision is one EVALSHA of the rule's script on the shared, pipelined link of
 * the node that holds its keys (link.c: threads deciding at once share round trips
 * instead of queueing behind each other's); NOSCRIPT runs it once more with EVAL,
 * which caches it again. A call, with the connect, AUTH and SELECT it may need,
 * ends by one deadline. Times come from Redis TIME inside the script, except under
 * the virtual clock (sluice_clock_set), whose time is passed as the scripts'
 * override. Each node's breaker stops calling it while it is dead, for a growing
 * pause, so that on_error answers at once meanwhile. */
#include "redis/redis.h"

#include <hiredis/hiredis.h>
#include <sluice/error.h>

#include "lua_scripts.h"
#include "redis/async_client.h"
#include "redis/internal.h"
#include "redis/link.h"
#include "redis/script.h"

#define ALGORITHMS SLUICE__ALGORITHMS

typedef sluice__redis_backend redis_backend;

/* Runs the script of rule on node before deadline and reads its verdict into *v
 * (NULL: only checked); FALSE and *error otherwise, with *stale TRUE when the
 * server closed a connection older than the call (worth one more try). */
static gboolean run_script(redis_backend *b, sluice__redis_node *node, gint64 deadline,
                           const sluice__rule *rule, const sluice__redis_keys *keys, const char *op,
                           gint64 permits, gint64 reserve_us, sluice__verdict *v, gboolean *stale,
                           GError **error)
{
    sluice__redis_script script;
    sluice__redis_script_init(&script, b->sha[rule->algorithm], rule, keys->state, keys->seq, op,
                              permits, reserve_us);
    for (int attempt = 0; attempt < 2; attempt++) {
        redisReply *reply = sluice__redis_link_command(
            node->link, deadline, SLUICE__REDIS_SCRIPT_ARGC, script.argv, stale, error);
        if (!reply)
            return FALSE;
        if (sluice__redis_is_noscript(reply) && attempt == 0) {
            /* a flushed script cache or a new server: EVAL runs the script and
             * caches it again, in one round trip */
            freeReplyObject(reply);
            sluice__redis_script_use_eval(&script, rule->algorithm);
            continue;
        }
        const char *why;
        gboolean ok = sluice__redis_script_verdict(reply, v, &why);
        if (!ok)
            sluice__redis_fail(error, SLUICE_ERROR_BACKEND, &node->endpoint, "script", why);
        freeReplyObject(reply);
        return ok;
    }
    g_assert_not_reached();
}

/* One script call with the node's breaker around it, within the backend's timeout
 * in all (connect, AUTH, SELECT, EVALSHA, EVAL after NOSCRIPT); fills v when it
 * succeeded. A connection made before this call that the server has closed
 * (restarted, CLIENT KILL, idle timeout) is replaced once, within the same time. */
static gboolean call(redis_backend *b, sluice__limiter *limiter, const sluice__rule *rule,
                     const char *key, const char *op, gint64 permits, gint64 reserve_us,
                     sluice__verdict *v, GError **error)
{
    g_auto(sluice__redis_keys) keys = {NULL, NULL};
    sluice__redis_keys_build(&keys, b->prefixes[rule->algorithm], limiter->name, key);
    sluice__redis_node *node = sluice__redis_route(b, &keys);
    gboolean trial;
    if (!sluice__breaker_allow(&node->breaker, &trial)) {
        sluice__breaker_refuse(&node->breaker, error);
        return FALSE;
    }
    gint64 deadline = g_get_monotonic_time() + b->timeout_us;
    GError *failure = NULL;
    gboolean ok = FALSE;
    for (int attempt = 0; !ok && attempt < 2; attempt++) {
        gboolean stale = FALSE;
        g_clear_error(&failure);
        ok = run_script(b, node, deadline, rule, &keys, op, permits, reserve_us, v, &stale,
                        &failure);
        if (!stale)
            break;
    }
    if (!ok) {
        sluice__breaker_failure(&node->breaker, trial, failure->message);
        g_propagate_error(error, failure);
        return FALSE;
    }
    sluice__breaker_success(&node->breaker);
    return TRUE;
}

static gboolean redis_decide(sluice__backend *backend, sluice__limiter *limiter,
                             const sluice__rule *rule, const char *key, gint64 permits,
                             gint64 reserve_us, sluice__verdict *verdict, GError **error)
{
    return call((redis_backend *)backend, limiter, rule, key, "acquire", permits, reserve_us,
                verdict, error);
}

static void redis_decide_async(sluice__backend *backend, sluice__limiter *limiter,
                               const sluice__rule *rule, const char *key, gint64 permits,
                               gint64 reserve_us, GMainContext *context, sluice__decided_func done,
                               gpointer data)
{
    redis_backend *b = (redis_backend *)backend;
    sluice__redis_keys keys;
    sluice__redis_keys_build(&keys, b->prefixes[rule->algorithm], limiter->name, key);
    sluice__redis_async_decide(b, sluice__redis_route(b, &keys), rule, &keys, permits, reserve_us,
                               context, done, data);
}

static void redis_release(sluice__backend *backend, sluice__limiter *limiter,
                          const sluice__rule *rule, const char *key, gint64 permits)
{
    g_autoptr(GError) error = NULL;
    if (!call((redis_backend *)backend, limiter, rule, key, "release", permits, 0, NULL, &error))
        g_debug("%s: releasing %" G_GINT64_FORMAT " permits failed (the leases expire by "
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
    /* every key has the same hash tag: one node holds them all */
    sluice__redis_node *node = sluice__redis_route(b, &keys[0]);
    gboolean stale;
    redisReply *reply =
        sluice__redis_link_command(node->link, deadline, G_N_ELEMENTS(del), del, &stale, error);
    for (int i = 0; i < ALGORITHMS; i++)
        sluice__redis_keys_clear(&keys[i]);
    if (reply && reply->type == REDIS_REPLY_ERROR)
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, &node->endpoint, "DEL", reply->str);
    gboolean ok = reply && reply->type != REDIS_REPLY_ERROR;
    if (reply)
        freeReplyObject(reply);
    return ok;
}

/* A reload replaced this backend: its connections close (calls still on them
 * finish first); the asynchronous client's go with their main contexts. */
static void redis_retire(sluice__backend *backend)
{
    sluice__redis_node_retire(((redis_backend *)backend)->node);
}

static void redis_free(sluice__backend *backend)
{
    redis_backend *b = (redis_backend *)backend;
    sluice__redis_node_free(b->node);
    sluice__redis_url_clear(&b->url);
    for (int i = 0; i < ALGORITHMS; i++)
        g_free(b->sha[i]);
    g_free(b->prefix);
    for (int i = 0; i < ALGORITHMS; i++)
        g_free(b->prefixes[i]);
    g_free(b);
}

static const sluice__backend_funcs redis_funcs = {
    .name = "redis",
    .decide = redis_decide,
    .decide_async = redis_decide_async,
    .release = redis_release,
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
    if (b->url.topology != SLUICE__REDIS_SINGLE || b->url.tls) {
        g_set_error(error, SLUICE_ERROR_DOMAIN, SLUICE_ERROR_CONFIG,
                    "%s: [sluice] redis: %s:// is not supported yet; expected redis:// or unix://",
                    config->path ? config->path : "defaults", sluice__redis_url_scheme(&b->url));
        sluice__redis_url_clear(&b->url);
        g_free(b);
        return NULL;
    }
    b->prefix = g_strdup(config->key_prefix);
    static const char *const tags[ALGORITHMS] = {"fw", "sl", "sw", "tb", "gc", "cc"};
    for (int i = 0; i < ALGORITHMS; i++)
        b->prefixes[i] = g_strconcat(config->key_prefix, tags[i], ":", NULL);
    b->timeout_us = config->timeout_us;
    for (int i = 0; i < ALGORITHMS; i++)
        b->sha[i] = g_compute_checksum_for_string(G_CHECKSUM_SHA1, sluice__lua_scripts[i], -1);
    sluice__redis_endpoint endpoint;
    sluice__redis_endpoint_init(&endpoint, b->url.host, b->url.port, b->url.socket, b->url.user,
                                /* else password_file, $SLUICE_REDIS_PASSWORD */
                                b->url.password ? b->url.password : config->redis_password,
                                b->url.db);
    b->node = sluice__redis_node_new(&endpoint);

    /* connect now: bad credentials stop init, an absent server does not */
    GError *failure = NULL;
    if (!sluice__redis_link_connect(b->node->link, g_get_monotonic_time() + b->timeout_us,
                                    &failure)) {
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
