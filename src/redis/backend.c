/* SPDX-License-Identifier: MIT */
/* The redis backend: the algorithms of lua/ run in Redis, shared by every process.
 *
 * A decision is one script call on the shared, pipelined link of the node that
 * holds its keys (link.c: threads deciding at once share round trips instead of
 * queueing behind each other's): FCALL of sluice's Function library where the
 * server has it (Redis 7: loaded at the first call, redis/library.c), EVALSHA
 * otherwise, whose NOSCRIPT runs it once more with EVAL, which caches it again
 * (script.c writes the command). A call, with the connect, AUTH and SELECT it may need,
 * ends by one deadline. Times come from Redis TIME inside the script, except under
 * the virtual clock (sluice_clock_set), whose time is passed as the scripts'
 * override. Each node's breaker stops calling it while it is dead, for a growing
 * pause, so that on_error answers at once meanwhile. */
#include "redis/redis.h"

#include <string.h>

#include <hiredis/hiredis.h>
#include <sluice/error.h>

#include "redis/async_client.h"
#include "redis/cluster.h"
#include "redis/internal.h"
#include "redis/library.h"
#include "redis/link.h"
#include "redis/redirect.h"
#include "redis/script.h"
#include "redis/tls.h"

#define ALGORITHMS SLUICE__ALGORITHMS

typedef sluice__redis_backend redis_backend;

/* Sends argv to node before deadline on its shared link, after ASKING when asking. */
static redisReply *send_to(sluice__redis_node *node, gboolean asking, gint64 deadline, int argc,
                           const char **argv, gboolean *stale, GError **error)
{
    if (asking)
        return sluice__redis_link_asking(node->link, deadline, argc, argv, stale, error);
    return sluice__redis_link_command(node->link, deadline, argc, argv, stale, error);
}

typedef struct {
    sluice__redis_node *node;
    gint64 deadline;
} library_call;

static redisReply *library_send(gpointer data, int argc, const char **argv)
{
    library_call *lc = data;
    gboolean stale;
    return sluice__redis_link_command(lc->node->link, lc->deadline, argc, argv, &stale, NULL);
}

/* How node runs sluice's scripts: asked (and the library loaded) at the first call,
 * before deadline; UNKNOWN while it does not answer. */
static sluice__redis_library library_of(sluice__redis_node *node, gint64 deadline)
{
    sluice__redis_library l = g_atomic_int_get(&node->library);
    if (G_LIKELY(l != SLUICE__LIBRARY_UNKNOWN))
        return l;
    library_call lc = {node, deadline};
    l = sluice__redis_library_settle(library_send, &lc, node->endpoint.what);
    if (l != SLUICE__LIBRARY_UNKNOWN)
        g_atomic_int_set(&node->library, l);
    return l;
}

/* Runs call on node before deadline and reads its verdict into *v (NULL: only
 * checked); FALSE and *error otherwise, with *stale TRUE when the server closed a
 * connection older than the call (worth one more try). With refused (a Cluster),
 * an error reply other than NOSCRIPT is handed over in *refused instead, for the
 * caller to follow. FCALL where the library is loaded, else EVALSHA; NOSCRIPT runs
 * it once more with EVAL, which caches it again; a library gone since (FUNCTION
 * FLUSH, a server restarted without it) is loaded again first. */
static gboolean run_script(sluice__redis_node *node, gboolean asking, gint64 deadline,
                           sluice__redis_call *call, sluice__verdict *v, redisReply **refused,
                           gboolean *stale, GError **error)
{
    sluice__redis_how how = library_of(node, deadline) == SLUICE__LIBRARY_FUNCTIONS
                                ? SLUICE__REDIS_FCALL
                                : SLUICE__REDIS_EVALSHA;
    for (int attempt = 0; attempt < 2; attempt++) {
        sluice__redis_call_use(call, how);
        redisReply *reply = sluice__redis_link_send(node->link, deadline, asking, call->data,
                                                    call->len, "script", stale, error);
        if (!reply)
            return FALSE;
        if (attempt == 0 && how == SLUICE__REDIS_FCALL && sluice__redis_is_no_function(reply)) {
            freeReplyObject(reply);
            g_atomic_int_set(&node->library, SLUICE__LIBRARY_UNKNOWN);
            how = library_of(node, deadline) == SLUICE__LIBRARY_FUNCTIONS ? SLUICE__REDIS_FCALL
                                                                          : SLUICE__REDIS_EVAL;
            continue;
        }
        if (attempt == 0 && sluice__redis_is_noscript(reply)) {
            /* a flushed script cache or a new server: EVAL runs the script and
             * caches it again, in one round trip */
            freeReplyObject(reply);
            how = SLUICE__REDIS_EVAL;
            continue;
        }
        if (refused && reply->type == REDIS_REPLY_ERROR) {
            *refused = reply;
            return FALSE;
        }
        const char *why;
        gboolean ok = sluice__redis_call_verdict(call, reply, v, &why);
        if (!ok)
            sluice__redis_fail(error, SLUICE_ERROR_BACKEND, &node->endpoint, "script", why);
        freeReplyObject(reply);
        return ok;
    }
    g_assert_not_reached();
}

/* ---- on a Cluster --------------------------------------------------------------- */

/* One exchange of a call with node: TRUE when it went through; else *refused (an
 * error reply, for the caller to follow) or *error (*stale: worth one more try). */
typedef gboolean (*attempt_func)(redis_backend *b, sluice__redis_node *node, gboolean asking,
                                 gint64 deadline, gpointer data, redisReply **refused,
                                 gboolean *stale, GError **error);

/* Runs attempt on the node that serves slot before deadline, following MOVED (the
 * map is updated), ASK and TRYAGAIN as redis/redirect.h says (pausing in g_usleep);
 * each node's breaker around it unless use_breaker is FALSE. A node that does not
 * answer, CLUSTERDOWN or no master known fail the call (on_error decides) and have the map read
 * again (at most every SLUICE__CLUSTER_REFRESH_US), so that a new master takes over its slots.
 * Errors name the node and the slot ("redis 127.0.0.1:7002 (cluster slot 6965): ..."). */
static gboolean on_cluster(redis_backend *b, guint slot, gint64 deadline, attempt_func attempt,
                           gpointer data, const char *step, gboolean use_breaker, GError **error)
{
    sluice__redis_cluster *c = b->cluster;
    sluice__redis_node *node = sluice__redis_cluster_node(c, slot);
    sluice__redirect course = {0};
    gboolean refresh = FALSE;
    GError *failure = NULL;
    while (!failure) {
        if (!node) {
            sluice__redis_cluster_refresh(c, deadline);
            node = sluice__redis_cluster_node(c, slot);
        }
        if (!node) {
            g_set_error(&failure, SLUICE_ERROR, SLUICE_ERROR_BACKEND,
                        "no master is known to serve the slot");
            break;
        }
        gboolean trial = FALSE, stale = FALSE, ok = FALSE;
        if (use_breaker && !sluice__breaker_allow(&node->breaker, &trial)) {
            sluice__breaker_refuse(&node->breaker, &failure);
            refresh = TRUE;
            break;
        }
        redisReply *refused = NULL;
        for (int again = 0; again < 2; again++) {
            g_clear_error(&failure);
            ok = attempt(b, node, course.asking, deadline, data, &refused, &stale, &failure);
            if (ok || refused || !stale)
                break;
        }
        if (!ok && !refused) { /* it did not answer */
            if (use_breaker)
                sluice__breaker_failure(&node->breaker, trial, failure->message);
            refresh = TRUE;
            break;
        }
        if (use_breaker)
            sluice__breaker_success(&node->breaker);
        if (ok)
            break;
        sluice__redis_node *next;
        const char *why;
        sluice__cluster_action action =
            sluice__redis_cluster_answered(c, node, slot, refused, &next);
        switch (sluice__redirect_next(&course, action, deadline - g_get_monotonic_time(), &why)) {
        case SLUICE__REDIRECT_SEND:
            node = next;
            break;
        case SLUICE__REDIRECT_PAUSE:
            g_usleep(SLUICE__REDIRECT_PAUSE_US);
            node = sluice__redis_cluster_node(c, slot);
            break;
        case SLUICE__REDIRECT_FAIL:
            sluice__redis_fail(&failure, SLUICE_ERROR_BACKEND, &node->endpoint, step,
                               why ? why : refused->str);
            refresh = g_str_has_prefix(refused->str, "CLUSTERDOWN");
            break;
        }
        freeReplyObject(refused);
    }
    if (refresh || course.refresh)
        sluice__redis_cluster_refresh(c, deadline);
    if (!failure)
        return TRUE;
    sluice__redis_cluster_name_slot(failure, node, slot);
    g_propagate_error(error, failure);
    return FALSE;
}

typedef struct {
    sluice__redis_call *call;
    sluice__verdict *v;
} script_call;

static gboolean attempt_script(redis_backend *b, sluice__redis_node *node, gboolean asking,
                               gint64 deadline, gpointer data, redisReply **refused,
                               gboolean *stale, GError **error)
{
    (void)b;
    script_call *s = data;
    return run_script(node, asking, deadline, s->call, s->v, refused, stale, error);
}

typedef struct {
    int argc;
    const char **argv;
} command_call;

static gboolean attempt_command(redis_backend *b, sluice__redis_node *node, gboolean asking,
                                gint64 deadline, gpointer data, redisReply **refused,
                                gboolean *stale, GError **error)
{
    (void)b;
    command_call *cmd = data;
    redisReply *reply = send_to(node, asking, deadline, cmd->argc, cmd->argv, stale, error);
    if (reply && reply->type == REDIS_REPLY_ERROR)
        *refused = reply;
    else if (reply)
        freeReplyObject(reply);
    return reply && !*refused;
}

/* The slot of a call's keys (both share one hash tag). */
static guint slot_of(const sluice__redis_keys *keys)
{
    return sluice__cluster_key_slot(keys->state, strlen(keys->state));
}

/* The slot of a call's keys (all share one hash tag). */
static guint call_slot(const sluice__redis_call *call)
{
    return sluice__cluster_key_slot(call->args + call->key_at, call->key_len);
}

static void call_init(redis_backend *b, sluice__redis_call *call, sluice__limiter *limiter,
                      const sluice__rule *rule, const char *key, const char *op, gint64 permits,
                      gint64 reserve_us)
{
    sluice__redis_call_init(call, rule, b->prefixes[rule->algorithm],
                            b->prefix_len[rule->algorithm], limiter, key, op, permits, reserve_us);
}

/* One script call with the node's breaker around it, within the backend's timeout
 * in all (connect, AUTH, SELECT, the library's first load, the script, EVAL after
 * NOSCRIPT); fills v when it succeeded. A connection made before this call that the
 * server has closed (restarted, CLIENT KILL, idle timeout) is replaced once, within
 * the same time. */
static gboolean call(redis_backend *b, sluice__limiter *limiter, const sluice__rule *rule,
                     const char *key, const char *op, gint64 permits, gint64 reserve_us,
                     sluice__verdict *v, GError **error)
{
    sluice__redis_call c;
    call_init(b, &c, limiter, rule, key, op, permits, reserve_us);
    if (b->cluster) {
        script_call sc = {&c, v};
        gboolean ok = on_cluster(b, call_slot(&c), g_get_monotonic_time() + b->timeout_us,
                                 attempt_script, &sc, "script", TRUE, error);
        sluice__redis_call_clear(&c);
        return ok;
    }
    sluice__redis_node *node = sluice__redis_route(b, NULL, error);
    gboolean trial;
    if (!node) {
        sluice__redis_call_clear(&c);
        return FALSE;
    }
    if (!sluice__breaker_allow(&node->breaker, &trial)) {
        sluice__breaker_refuse(&node->breaker, error);
        sluice__redis_call_clear(&c);
        return FALSE;
    }
    gint64 deadline = g_get_monotonic_time() + b->timeout_us;
    GError *failure = NULL;
    gboolean ok = FALSE;
    for (int attempt = 0; !ok && attempt < 2; attempt++) {
        gboolean stale = FALSE;
        g_clear_error(&failure);
        ok = run_script(node, FALSE, deadline, &c, v, NULL, &stale, &failure);
        if (!stale)
            break;
    }
    sluice__redis_call_clear(&c);
    if (!ok) {
        sluice__breaker_failure(&node->breaker, trial, failure->message);
        sluice__redis_failed(b, node);
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
    GError *failure = NULL;
    sluice__redis_node *node;
    guint slot = 0;
    sluice__redis_call *c = sluice__redis_async_call_new();
    call_init(b, c, limiter, rule, key, "acquire", permits, reserve_us);
    if (b->cluster) {
        slot = call_slot(c);
        node = sluice__redis_cluster_node(b->cluster, slot);
        if (!node) { /* a Cluster whose map names no master for the slot */
            g_set_error(&failure, SLUICE_ERROR, SLUICE_ERROR_BACKEND,
                        "no master is known to serve the slot");
            sluice__redis_cluster_name_slot(failure, NULL, slot);
            sluice__redis_cluster_refresh_soon(b->cluster, b->timeout_us);
        }
    } else {
        node = sluice__redis_route(b, NULL, &failure); /* NULL: no master found yet */
    }
    if (!node) {
        sluice__redis_async_call_free(c);
        done(NULL, failure, data);
        return;
    }
    sluice__redis_async_decide(b, node, slot, c, context, done, data);
}

static gboolean redis_penalize(sluice__backend *backend, sluice__limiter *limiter,
                               const sluice__rule *rule, const char *key, gint64 permits,
                               GError **error)
{
    sluice__verdict v;
    return call((redis_backend *)backend, limiter, rule, key, SLUICE__REDIS_OP_PENALIZE, permits, 0,
                &v, error);
}

static gboolean redis_block(sluice__backend *backend, sluice__limiter *limiter,
                            const sluice__rule *rule, const char *key, gint64 duration_us,
                            GError **error)
{
    sluice__verdict v;
    return call((redis_backend *)backend, limiter, rule, key, SLUICE__REDIS_OP_BLOCK, duration_us,
                0, &v, error);
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
    const char *del[1 + 2 * ALGORITHMS + 2 * SLUICE__MAX_BANDS] = {"DEL"};
    int n = 1;
    for (int i = 0; i < ALGORITHMS; i++) {
        sluice__redis_keys_build(&keys[i], b->prefixes[i], limiter->name, key);
        del[n++] = keys[i].state;
        del[n++] = keys[i].seq;
    }
    /* and the keys of the rule's bands (a band a reload removed expires by itself) */
    char *bands[2 * SLUICE__MAX_BANDS] = {NULL};
    const sluice__rule *rule = sluice__limiter_rule(limiter);
    for (guint i = 0; rule && i < rule->n_bands + rule->n_shadow; i++) {
        const sluice__band *band = &rule->bands[i];
        bands[2 * i] = sluice__redis_band_key(keys[rule->algorithm].state, band);
        bands[2 * i + 1] = g_strconcat(bands[2 * i], ":seq", NULL);
        del[n++] = bands[2 * i];
        del[n++] = bands[2 * i + 1];
    }
    if (b->cluster) { /* every key has the same hash tag: one node holds them all */
        command_call cmd = {n, del};
        gboolean ok =
            on_cluster(b, slot_of(&keys[0]), deadline, attempt_command, &cmd, "DEL", FALSE, error);
        for (int i = 0; i < ALGORITHMS; i++)
            sluice__redis_keys_clear(&keys[i]);
        for (guint i = 0; i < G_N_ELEMENTS(bands); i++)
            g_free(bands[i]);
        return ok;
    }
    /* every key has the same hash tag: one node holds them all */
    sluice__redis_node *node = sluice__redis_route(b, &keys[0], error);
    gboolean stale;
    redisReply *reply =
        node ? sluice__redis_link_command(node->link, deadline, n, del, &stale, error) : NULL;
    for (int i = 0; i < ALGORITHMS; i++)
        sluice__redis_keys_clear(&keys[i]);
    for (guint i = 0; i < G_N_ELEMENTS(bands); i++)
        g_free(bands[i]);
    if (reply && reply->type == REDIS_REPLY_ERROR)
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, &node->endpoint, "DEL", reply->str);
    gboolean ok = reply && reply->type != REDIS_REPLY_ERROR;
    if (node && !ok)
        sluice__redis_failed(b, node);
    if (reply)
        freeReplyObject(reply);
    return ok;
}

/* A reload replaced this backend: its connections close (calls still on them
 * finish first); the asynchronous client's go with their main contexts. */
static void redis_retire(sluice__backend *backend)
{
    redis_backend *b = (redis_backend *)backend;
    if (b->cluster)
        sluice__redis_cluster_retire(b->cluster);
    else if (b->master)
        sluice__redis_master_retire(b->master); /* and the thread that follows it stops */
    else
        sluice__redis_node_retire(b->node);
}

static void redis_free(sluice__backend *backend)
{
    redis_backend *b = (redis_backend *)backend;
    sluice__redis_node_free(b->node);
    sluice__redis_cluster_free(b->cluster);
    sluice__redis_master_free(b->master);
    sluice__tls_context_unref(b->tls);
    sluice__redis_url_clear(&b->url);
    g_free(b->prefix);
    for (int i = 0; i < ALGORITHMS; i++)
        g_free(b->prefixes[i]);
    g_free(b);
}

static void redis_breakers(sluice__backend *backend, sluice__breaker_func func, gpointer data)
{
    redis_backend *b = (redis_backend *)backend;
    sluice__redis_node *node;
    if (b->cluster) {
        for (guint i = 0; (node = sluice__redis_cluster_nth(b->cluster, i)) != NULL; i++)
            func(node->endpoint.what, sluice__breaker_is_open(&node->breaker), data);
        return;
    }
    /* Sentinel: the master now, if one is known */
    node = b->master ? sluice__redis_master_node(b->master, NULL) : b->node;
    if (node)
        func(node->endpoint.what, sluice__breaker_is_open(&node->breaker), data);
}

static const sluice__backend_funcs redis_funcs = {
    .name = "redis",
    .decide = redis_decide,
    .decide_async = redis_decide_async,
    .release = redis_release,
    .penalize = redis_penalize,
    .block = redis_block,
    .reset = redis_reset,
    .retire = redis_retire,
    .breakers = redis_breakers,
    .free = redis_free,
};

sluice__backend *sluice__backend_redis_new(const sluice__config *config, GError **error)
{
    redis_backend *b = g_new0(redis_backend, 1);
    char *why = NULL;

    b->base.funcs = &redis_funcs;
    if (!sluice__redis_url_parse(config->redis_url, &b->url, &why)) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG, "%s: [sluice] redis: %s",
                    config->path ? config->path : "defaults", why);
        g_free(why);
        g_free(b);
        return NULL;
    }
    GError *unusable = NULL; /* a tls_* file */
    if (b->url.tls && !(b->tls = sluice__tls_context_new(&config->tls, &unusable))) {
        g_set_error(error, SLUICE_ERROR, unusable->code, "%s: [sluice] %s",
                    config->path ? config->path : "defaults", unusable->message);
        g_error_free(unusable);
        redis_free(&b->base);
        return NULL;
    }
    b->prefix = g_strdup(config->key_prefix);
    static const char *const tags[ALGORITHMS] = {
#define ALGORITHM_TAG(code, name, tag, script) [code] = tag,
        SLUICE__ALGORITHM_TABLE(ALGORITHM_TAG)
#undef ALGORITHM_TAG
    };
    for (int i = 0; i < ALGORITHMS; i++) {
        b->prefixes[i] = g_strconcat(config->key_prefix, tags[i], ":", NULL);
        b->prefix_len[i] = strlen(b->prefixes[i]);
    }
    b->timeout_us = config->timeout_us;
    if (b->url.topology == SLUICE__REDIS_CLUSTER) {
        b->cluster = sluice__redis_cluster_new(&b->url, config->redis_password, b->tls,
                                               config->tls.server_name);
        /* read the map now: bad credentials or a certificate TLS refuses stop init,
         * absent nodes do not */
        GError *failure = NULL;
        if (!sluice__redis_cluster_start(b->cluster, g_get_monotonic_time() + b->timeout_us,
                                         &failure)) {
            if (g_error_matches(failure, SLUICE_ERROR, SLUICE_ERROR_AUTH) ||
                g_error_matches(failure, SLUICE_ERROR, SLUICE_ERROR_TLS)) {
                g_propagate_error(error, failure);
                redis_free(&b->base);
                return NULL;
            }
            g_message("%s; on_error decides until a node of the cluster answers", failure->message);
            g_error_free(failure);
        }
        return &b->base;
    }
    if (b->url.topology == SLUICE__REDIS_SENTINEL) {
        /* found now, then followed: bad credentials or a certificate TLS refuses stop
         * init, no master found does not */
        b->master =
            sluice__redis_master_new(&b->url, config->redis_password, config->sentinel_password,
                                     b->tls, config->tls.server_name, b->timeout_us, error);
        if (!b->master) {
            redis_free(&b->base);
            return NULL;
        }
        sluice__redis_node *master = sluice__redis_master_node(b->master, NULL);
        if (master) /* the library now, not in the first decision's time */
            library_of(master, g_get_monotonic_time() + b->timeout_us);
        return &b->base;
    }
    sluice__redis_endpoint endpoint;
    sluice__redis_endpoint_init(&endpoint, b->url.host, b->url.port, b->url.socket, b->url.user,
                                /* else password_file, $SLUICE_REDIS_PASSWORD */
                                b->url.password ? b->url.password : config->redis_password,
                                b->url.db);
    if (b->tls)
        sluice__redis_endpoint_use_tls(&endpoint, b->tls, config->tls.server_name);
    b->node = sluice__redis_node_new(&endpoint);

    /* connect now: bad credentials, a certificate TLS refuses or a database the
     * server has not stop init, an absent server does not */
    GError *failure = NULL;
    if (!sluice__redis_link_connect(b->node->link, g_get_monotonic_time() + b->timeout_us,
                                    &failure)) {
        if (g_error_matches(failure, SLUICE_ERROR, SLUICE_ERROR_AUTH) ||
            g_error_matches(failure, SLUICE_ERROR, SLUICE_ERROR_TLS) ||
            g_error_matches(failure, SLUICE_ERROR, SLUICE_ERROR_CONFIG)) {
            g_propagate_error(error, failure);
            redis_free(&b->base);
            return NULL;
        }
        g_message("%s; on_error decides until it answers", failure->message);
        g_error_free(failure);
    } else { /* the library now, not in the first decision's time */
        library_of(b->node, g_get_monotonic_time() + b->timeout_us);
    }
    return &b->base;
}
