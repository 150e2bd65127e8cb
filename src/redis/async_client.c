/* The redis backend without blocking: hiredis' asynchronous API on GLib main contexts.
 *
 * One connection per node and GMainContext that asks (hiredis' GLib adapter makes
 * it a source of that context), so every decision of a main loop is pipelined on
 * one socket per node and none blocks the loop. AUTH and SELECT are queued ahead
 * of the first command; NOSCRIPT sends the script again with EVAL, which runs it
 * and caches it. hiredis 0.14 has no
 * command timeout in its asynchronous API, so each command has a timeout source:
 * when it fires the call fails and the connection is dropped (a server that does
 * not answer one command will not answer the next), to be made again by the next
 * call. The node's breaker is the blocking client's too, so a dead server costs
 * the loop nothing while it is open. */
#include "redis/async_client.h"

#include <unistd.h>

#include <hiredis/adapters/glib.h>
#include <hiredis/async.h>
#include <sluice/error.h>

#include "redis/cluster.h"
#include "redis/key.h"
#include "redis/script.h"

/* Redirections (MOVED, ASK) a call follows on a Cluster before it pauses, as after
 * TRYAGAIN; the call's timer bounds them all. */
#define MAX_HOPS 5
/* How long a call waits after TRYAGAIN (a slot half migrated) before sending again. */
#define TRY_AGAIN_PAUSE_MS 2

typedef struct connection connection;

/* One decision in flight. */
typedef struct {
    sluice__redis_backend *b;
    connection *conn;
    sluice__redis_node *node;
    guint slot; /* on a Cluster: the keys' */
    int hops;   /* redirections followed */
    sluice__redis_script script;
    int algorithm;
    gboolean retried; /* NOSCRIPT was seen once */
    gboolean trial;   /* the breaker's trial call */
    sluice__redis_keys keys;
    gboolean over;    /* done was called (reply, failure or timeout) */
    gint replies_due; /* hiredis callbacks still to come for this request */
    GSource *timer;
    sluice__decided_func done;
    gpointer data;
} request;

/* Lives as long as its hiredis context: freed by cleanup(). */
struct connection {
    sluice__redis_async *owner;
    redisAsyncContext *ac;
    GSource *source; /* the adapter's source on context */
    GMainContext *context;
    pid_t pid;
};

struct sluice__redis_async {
    GMutex lock;             /* guards connections */
    GHashTable *connections; /* GMainContext * -> connection * */
};

sluice__redis_async *sluice__redis_async_new(void)
{
    sluice__redis_async *a = g_new0(sluice__redis_async, 1);
    g_mutex_init(&a->lock);
    a->connections = g_hash_table_new(g_direct_hash, g_direct_equal);
    return a;
}

/* ---- connections -------------------------------------------------------------------- */

/* Detaches c from its owner, so that the next call makes a new connection. */
static void unlist(connection *c)
{
    sluice__redis_async *a = c->owner;
    g_mutex_lock(&a->lock);
    if (g_hash_table_lookup(a->connections, c->context) == c)
        g_hash_table_remove(a->connections, c->context);
    g_mutex_unlock(&a->lock);
}

/* hiredis frees the context (a failed connect, a lost connection, a timeout, or
 * shutdown), after it has failed every pending command: the adapter's cleanup,
 * then the source goes, and c with it. Runs inside hiredis, maybe inside the
 * source's own dispatch. */
static void cleanup(gpointer source)
{
    RedisSource *rs = source;
    connection *c = rs->ac->data;
    redis_source_cleanup(source);
    /* the adapter's dispatch reads revents after a write that failed: clear it so
     * that it does not go on to read from the context being freed */
    rs->poll_fd.revents = 0;
    unlist(c);
    g_source_destroy(c->source);
    g_source_unref(c->source);
    g_main_context_unref(c->context);
    g_free(c);
}

/* Queues `argv` ahead of everything else on a new connection; no callback. */
static void queue(redisAsyncContext *ac, int argc, const char **argv)
{
    redisAsyncCommandArgv(ac, NULL, NULL, argc, argv, NULL);
}

/* The connection of context, made (and AUTH and SELECT queued) when needed; NULL
 * with *error when it cannot even start. */
static connection *connection_for(sluice__redis_node *node, GMainContext *context, GError **error)
{
    const sluice__redis_endpoint *e = &node->endpoint;
    sluice__redis_async *a = node->async;
    g_mutex_lock(&a->lock);
    connection *c = g_hash_table_lookup(a->connections, context);
    if (c && c->pid != getpid()) { /* the parent's, after fork(): leave it alone */
        g_hash_table_remove(a->connections, context);
        c = NULL;
    }
    g_mutex_unlock(&a->lock);
    if (c)
        return c;

    redisAsyncContext *ac =
        e->socket ? redisAsyncConnectUnix(e->socket) : redisAsyncConnect(e->host, e->port);
    if (!ac || ac->err) {
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, e, "connect",
                           ac ? ac->errstr : "out of memory");
        if (ac)
            redisAsyncFree(ac);
        return NULL;
    }
    c = g_new0(connection, 1);
    c->owner = a;
    c->ac = ac;
    c->context = g_main_context_ref(context);
    c->pid = getpid();
    ac->data = c;
    c->source = redis_source_new(ac);
    ac->ev.cleanup = cleanup; /* the adapter's, and ours after it */
    g_source_attach(c->source, context);
    if (e->password && e->user)
        queue(ac, 3, (const char *[]){"AUTH", e->user, e->password});
    else if (e->password)
        queue(ac, 2, (const char *[]){"AUTH", e->password});
    if (e->db != 0) {
        g_autofree char *db = g_strdup_printf("%d", e->db);
        queue(ac, 2, (const char *[]){"SELECT", db});
    }
    g_mutex_lock(&a->lock);
    g_hash_table_replace(a->connections, context, c);
    g_mutex_unlock(&a->lock);
    return c;
}

/* ---- one decision ------------------------------------------------------------------- */

static void request_release(request *r)
{
    if (--r->replies_due > 0 || !r->over)
        return;
    sluice__redis_keys_clear(&r->keys);
    sluice__redis_script_clear(&r->script);
    g_free(r);
}

/* Ends the request once, with a verdict or a failure (which done takes). */
static void conclude(request *r, const sluice__verdict *v, GError *failure)
{
    if (r->over) {
        g_clear_error(&failure);
        return;
    }
    r->over = TRUE;
    if (r->timer) {
        g_source_destroy(r->timer);
        g_clear_pointer(&r->timer, g_source_unref);
    }
    if (failure) {
        sluice__breaker_failure(&r->node->breaker, r->trial, failure->message);
        sluice__redis_failed(r->b, r->node);
    } else
        sluice__breaker_success(&r->node->breaker);
    if (failure && r->b->cluster) { /* a new master may serve the slot: read the map */
        sluice__redis_cluster_name_slot(failure, r->node, r->slot);
        sluice__redis_cluster_refresh_soon(r->b->cluster, r->b->timeout_us);
    }
    r->done(v, failure, r->data);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *p);

static gboolean send_script(request *r)
{
    r->replies_due++;
    if (redisAsyncCommandArgv(r->conn->ac, on_reply, r, r->script.argc, r->script.argv, NULL) ==
        REDIS_OK)
        return TRUE;
    r->replies_due--;
    return FALSE;
}

static GError *failed(const request *r, const char *why)
{
    GError *failure = NULL;
    sluice__redis_fail(&failure, SLUICE_ERROR_BACKEND, &r->node->endpoint, "EVALSHA", why);
    return failure;
}

/* The script to next (after ASKING when asking), which becomes the request's node;
 * the call ends when next's breaker is open or it cannot be reached. */
static void send_to(request *r, sluice__redis_node *next, gboolean asking)
{
    GError *failure = NULL;
    if (next != r->node) {
        sluice__breaker_success(&r->node->breaker); /* it answered */
        r->node = next;
        if (!sluice__breaker_allow(&next->breaker, &r->trial)) {
            sluice__breaker_refuse(&next->breaker, &failure);
            r->trial = FALSE; /* nothing to report to it */
            conclude(r, NULL, failure);
            return;
        }
    }
    connection *c = connection_for(next, r->conn->context, &failure);
    if (!c) {
        conclude(r, NULL, failure);
        return;
    }
    r->conn = c;
    if (asking)
        queue(c->ac, 1, (const char *[]){"ASKING"});
    if (!send_script(r))
        conclude(r, NULL, failed(r, "cannot send"));
}

/* After TRYAGAIN's pause: the script once more, to the slot's master by the map
 * (which may ASK anew). */
static gboolean send_again(gpointer p)
{
    request *r = p;
    if (!r->over) {
        sluice__redis_node *owner = sluice__redis_cluster_node(r->b->cluster, r->slot);
        send_to(r, owner ? owner : r->node, FALSE);
    }
    request_release(r);
    return G_SOURCE_REMOVE;
}

/* On a Cluster, a node's refusal that the call follows: MOVED (the map is updated)
 * or ASK to another node; after TRYAGAIN or MAX_HOPS redirections, a pause and the
 * slot's master by the map (the call's timer bounds it all).
 * FALSE when the refusal fails the call. */
static gboolean follow(request *r, const redisReply *rr)
{
    sluice__redis_node *next;
    sluice__cluster_action action =
        sluice__redis_cluster_answered(r->b->cluster, r->node, r->slot, rr, &next);
    if (action == SLUICE__CLUSTER_FAIL)
        return FALSE;
    if (action != SLUICE__CLUSTER_TRY_AGAIN && ++r->hops < MAX_HOPS) {
        send_to(r, next, action == SLUICE__CLUSTER_ASKING);
        return TRUE;
    }
    /* TRYAGAIN, or nodes that disagree for a moment: a pause, then the map */
    r->hops = 0;
    GSource *pause = g_timeout_source_new(TRY_AGAIN_PAUSE_MS);
    r->replies_due++; /* held until send_again */
    g_source_set_callback(pause, send_again, r, NULL);
    g_source_attach(pause, r->conn->context);
    g_source_unref(pause);
    return TRUE;
}

static void on_reply(redisAsyncContext *ac, void *reply, void *p)
{
    request *r = p;
    redisReply *rr = reply;
    sluice__verdict v;
    const char *why;

    if (r->over) {
        /* timed out, or cancelled: nothing to tell */
    } else if (!rr) {
        conclude(r, NULL, failed(r, ac->err ? ac->errstr : "connection lost"));
    } else if (sluice__redis_is_noscript(rr) && !r->retried) {
        /* a flushed script cache or a new server: EVAL runs it and caches it */
        r->retried = TRUE;
        sluice__redis_script_use_eval(&r->script, r->algorithm);
        if (!send_script(r))
            conclude(r, NULL, failed(r, "cannot send"));
    } else if (rr->type == REDIS_REPLY_ERROR && r->b->cluster && follow(r, rr)) {
        /* sent again, or ended */
    } else if (sluice__redis_script_verdict(rr, &v, &why)) {
        conclude(r, &v, NULL);
    } else {
        conclude(r, NULL, failed(r, why));
    }
    request_release(r);
}

static gboolean timed_out(gpointer p)
{
    request *r = p;
    connection *c = r->conn;
    g_clear_pointer(&r->timer, g_source_unref);
    /* a server that did not answer this will not answer the next: later calls
     * (even those `done` makes) get a new connection */
    unlist(c);
    r->replies_due++; /* keep r until the connection has failed its commands */
    conclude(r, NULL, failed(r, "timed out"));
    redisAsyncFree(c->ac); /* fails every pending command, then frees c */
    request_release(r);
    return G_SOURCE_REMOVE;
}

void sluice__redis_async_decide(sluice__redis_backend *b, sluice__redis_node *node, guint slot,
                                const sluice__rule *rule, sluice__redis_keys *keys, gint64 permits,
                                gint64 reserve_us, GMainContext *context, sluice__decided_func done,
                                gpointer data)
{
    GError *failure = NULL;
    gboolean trial;

    if (!sluice__breaker_allow(&node->breaker, &trial)) {
        sluice__redis_keys_clear(keys);
        sluice__breaker_refuse(&node->breaker, &failure);
        if (b->cluster) {
            sluice__redis_cluster_name_slot(failure, node, slot);
            sluice__redis_cluster_refresh_soon(b->cluster, b->timeout_us);
        }
        done(NULL, failure, data);
        return;
    }
    connection *c = connection_for(node, context, &failure);
    if (!c) {
        sluice__redis_keys_clear(keys);
        sluice__breaker_failure(&node->breaker, trial, failure->message);
        if (b->cluster) {
            sluice__redis_cluster_name_slot(failure, node, slot);
            sluice__redis_cluster_refresh_soon(b->cluster, b->timeout_us);
        }
        sluice__redis_failed(b, node);
        done(NULL, failure, data);
        return;
    }
    request *r = g_new0(request, 1);
    r->b = b;
    r->conn = c;
    r->node = node;
    r->slot = slot;
    r->algorithm = rule->algorithm;
    r->trial = trial;
    r->done = done;
    r->data = data;
    r->keys = *keys;
    *keys = (sluice__redis_keys){NULL, NULL};
    sluice__redis_script_init(&r->script, b->sha[rule->algorithm], rule, r->keys.state, r->keys.seq,
                              "acquire", permits, reserve_us);
    r->replies_due = 1; /* this function's own hold, released below */
    if (!send_script(r)) {
        conclude(r, NULL, failed(r, "cannot send"));
        request_release(r);
        return;
    }
    r->timer = g_timeout_source_new((guint)MAX(1, (b->timeout_us + 999) / 1000));
    g_source_set_callback(r->timer, timed_out, r, NULL);
    g_source_attach(r->timer, context);
    request_release(r);
}

void sluice__redis_async_free(sluice__redis_async *a)
{
    if (!a)
        return;
    g_mutex_lock(&a->lock);
    GList *all = g_hash_table_get_values(a->connections);
    g_mutex_unlock(&a->lock);
    for (GList *l = all; l; l = l->next) {
        connection *c = l->data;
        if (c->pid == getpid())
            redisAsyncFree(c->ac); /* fails what is still pending, then frees c */
    }
    g_list_free(all);
    g_hash_table_unref(a->connections);
    g_mutex_clear(&a->lock);
    g_free(a);
}
