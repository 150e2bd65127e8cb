/* SPDX-License-Identifier: MIT */
/* The redis backend without blocking: sluice's own connections on GLib main contexts.
 *
 * One connection per node and GMainContext that asks, so every decision of a main
 * loop is pipelined on one socket per node and none blocks the loop. Everything a
 * connection does is a step taken when its socket is ready, in a source of that
 * context: the name resolved by GResolver, a non-blocking connect, the TLS handshake
 * (redis/tls.c), then commands written and replies read through the transport
 * (redis/conn.c) and parsed by hiredis' reader. AUTH and SELECT are queued ahead of
 * the first command (a refusal fails the connection's calls with its reason; the
 * password's bytes are wiped once sent, or when the connection goes unsent);
 * NOSCRIPT sends the script again with EVAL, which runs it and caches it. Each call
 * has a deadline from when it began, so resolving, connecting and the handshake are
 * inside it: when it passes the call fails and the connection is dropped (a server
 * that does not answer one command will not answer the next), to be made again by
 * the next call. The node's breaker is the blocking client's too, so a dead server
 * costs the loop nothing while it is open.
 *
 * A call costs the loop no source and no system call of its own: the connection's
 * one source watches the socket, wakes at the earliest deadline of its calls (its
 * ready time, moved only when a call due sooner comes, or when it passes), and
 * writes what was queued in one send, when the replies read in one wake-up are
 * handed out, or, for calls made elsewhere, at the loop's next iteration (the
 * source's prepare). */
#include "redis/async_client.h"

#include <errno.h>
#include <gio/gio.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include <sluice/error.h>

#include "redis/cluster.h"
#include "redis/conn.h"
#include "redis/key.h"
#include "redis/library.h"
#include "redis/redirect.h"
#include "redis/resp.h"
#include "redis/script.h"
#include "redis/tls.h"
#include "secret.h"

typedef struct connection connection;

/* One decision in flight: in the queue of its connection, or in a TRYAGAIN pause. */
typedef struct {
    sluice__redis_backend *b;
    connection *conn;
    sluice__redis_node *node;
    guint slot;              /* on a Cluster: the keys' */
    sluice__redirect course; /* on a Cluster: MOVED, ASK and TRYAGAIN followed */
    gboolean retried;        /* NOSCRIPT, or no such function, was seen once */
    gboolean trial;          /* the breaker's trial call */
    gboolean over;           /* done was called (reply, failure or timeout) */
    gint64 deadline;         /* monotonic µs: when the call times out */
    GSource *timer;          /* its deadline while in a pause (in a queue, its connection's) */
    GSource *pause;          /* after TRYAGAIN or the hop limit, until send_again; listed in its
                              * owner's paused */
    sluice__decided_func done;
    gpointer data;
    gpointer next_free;      /* in its thread's pool, once ended */
    sluice__redis_call call; /* written once, sent again as it is (only named anew) */
} request;

/* What a reply in the queue answers when it is not a request: a setup command, a
 * step of the library's (redis/library.h), or ASKING (whose reply says nothing: the
 * command's after it does). */
static char auth_step[] = "AUTH", select_step[] = "SELECT", asking_step[] = "ASKING";
static char ask_step[] = "FCALL_RO", load_step[] = "FUNCTION LOAD",
            replace_step[] = "FUNCTION LOAD REPLACE";

static gboolean is_step(gconstpointer p)
{
    return p == auth_step || p == select_step || p == asking_step || p == ask_step ||
           p == load_step || p == replace_step;
}

typedef enum { RESOLVING, CONNECTING, HANDSHAKE, READY, CLOSED } stage;

/* What a connection awaits replies for, in the order sent: a ring that grows, so that
 * a call takes no link of a list. */
typedef struct {
    gpointer *at;
    guint head, len, size; /* size: 0, or a power of 2 */
} ring;

static void ring_push(ring *q, gpointer p)
{
    if (q->len == q->size) {
        guint size = q->size ? 2 * q->size : 64;
        gpointer *at = g_new(gpointer, size);
        for (guint i = 0; i < q->len; i++)
            at[i] = q->at[(q->head + i) & (q->size - 1)];
        g_free(q->at);
        q->at = at;
        q->head = 0;
        q->size = size;
    }
    q->at[(q->head + q->len++) & (q->size - 1)] = p;
}

/* The oldest, taken out; NULL when there is none. */
static gpointer ring_pop(ring *q)
{
    if (q->len == 0)
        return NULL;
    gpointer p = q->at[q->head];
    q->head = (q->head + 1) & (q->size - 1);
    q->len--;
    return p;
}

static gpointer ring_nth(const ring *q, guint i)
{
    return q->at[(q->head + i) & (q->size - 1)];
}

/* Freed when closed and no step of its own is running (refs). */
struct connection {
    gint refs; /* the owner's table while listed, and each step running */
    sluice__redis_async *owner;
    sluice__redis_node *node;
    GMainContext *context;
    pid_t pid;
    stage stage;
    GCancellable *resolving;
    int fd;
    sluice__tls *tls;           /* during the handshake */
    sluice__redis_transport *t; /* once READY */
    GSource *source;            /* on context: fd's readiness, the deadlines, the output */
    gpointer tag;               /* fd's in source, once connecting */
    GIOCondition events;        /* what source watches fd for */
    gint64 armed;               /* source's ready time: a deadline of a call, or -1 */
    gboolean dispatching;       /* replies are handed out: output is sent after them */
    short wait;                 /* what the handshake or receiving waits for */
    short send_wait;            /* what sending the rest of out waits for */
    GByteArray *out;            /* written, not sent */
    guint out_room;             /* out's size at least, while secret > 0 */
    guint secret;               /* out's first bytes that hold the password, not yet sent */
    ring awaited;               /* request *, or a setup step, in the order sent */
    guint asked;                /* the library's asks on it (redis/library.h) */
};

struct sluice__redis_async {
    GMutex lock;             /* guards connections and paused */
    GHashTable *connections; /* GMainContext * -> connection * */
    GQueue paused;           /* request * in a TRYAGAIN pause: in no connection's queue */
};

static void async_free(gpointer p);

/* getpid(), kept by a fork handler: a call tells its process's connections from a
 * parent's without a system call. */
static gint self_pid;

static void forked_child(void)
{
    g_atomic_int_set(&self_pid, (gint)getpid());
}

static pid_t pid_now(void)
{
    static gsize installed;
    if (g_once_init_enter(&installed)) {
        g_atomic_int_set(&self_pid, (gint)getpid());
        pthread_atfork(NULL, NULL, forked_child);
        g_once_init_leave(&installed, 1);
    }
    return (pid_t)g_atomic_int_get(&self_pid);
}

/* node's part of the client, made at its first call there; freed with the node. */
static sluice__redis_async *async_of(sluice__redis_node *node)
{
    sluice__redis_async *a = g_atomic_pointer_get(&node->async);
    if (a)
        return a;
    a = g_new0(sluice__redis_async, 1);
    g_mutex_init(&a->lock);
    a->connections = g_hash_table_new(g_direct_hash, g_direct_equal);
    if (g_atomic_pointer_compare_and_exchange(&node->async, NULL, a)) {
        node->async_free = async_free; /* read only by sluice__redis_node_free */
        return a;
    }
    g_hash_table_unref(a->connections); /* another thread made it first */
    g_mutex_clear(&a->lock);
    g_free(a);
    return g_atomic_pointer_get(&node->async);
}

/* ---- one decision ------------------------------------------------------------------- */

/* The requests of this thread that ended, for its next calls (a call allocates nothing
 * once as many are out as will be): at most POOL_MAX, freed with the thread. */
#define POOL_MAX 1024

typedef struct {
    request *free;
    guint n;
} pool;

static void pool_free(gpointer p)
{
    pool *pl = p;
    while (pl->free) {
        request *r = pl->free;
        pl->free = r->next_free;
        g_free(r);
    }
    g_free(pl);
}

static GPrivate pool_key = G_PRIVATE_INIT(pool_free);

static pool *pool_of_thread(void)
{
    pool *pl = g_private_get(&pool_key);
    if (!pl) {
        pl = g_new0(pool, 1);
        g_private_set(&pool_key, pl);
    }
    return pl;
}

static request *request_new(void)
{
    pool *pl = pool_of_thread();
    request *r = pl->free;
    if (!r)
        return g_new0(request, 1);
    pl->free = r->next_free;
    pl->n--;
    memset(r, 0, sizeof *r);
    return r;
}

static void request_free(request *r)
{
    if (r->timer) {
        g_source_destroy(r->timer);
        g_source_unref(r->timer);
    }
    sluice__redis_call_clear(&r->call);
    pool *pl = pool_of_thread();
    if (pl->n >= POOL_MAX) {
        g_free(r);
        return;
    }
    r->next_free = pl->free;
    pl->free = r;
    pl->n++;
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
    } else {
        sluice__breaker_success(&r->node->breaker);
    }
    if (failure && r->b->cluster) /* a new master may serve the slot */
        sluice__redis_cluster_name_slot(failure, r->node, r->slot);
    if ((failure || r->course.refresh) && r->b->cluster) /* read the map (redis/redirect.h) */
        sluice__redis_cluster_refresh_soon(r->b->cluster, r->b->timeout_us);
    r->done(v, failure, r->data);
}

static GError *failed(const request *r, const char *why)
{
    GError *failure = NULL;
    sluice__redis_fail(&failure, SLUICE_ERROR_BACKEND, &r->node->endpoint, "script", why);
    return failure;
}

/* ---- connections -------------------------------------------------------------------- */

#define OUT_ROOM 4096 /* a connection's output, at first: AUTH, SELECT and a burst of calls */

static void connection_unref(connection *c)
{
    if (!g_atomic_int_dec_and_test(&c->refs))
        return;
    g_main_context_unref(c->context);
    if (c->secret > 0) /* never sent */
        sluice__secret_wipe(c->out->data, c->out->len);
    g_byte_array_unref(c->out);
    g_free(c->awaited.at);
    g_free(c);
}

/* Detaches c from its owner, so that the next call makes a new connection. */
static void unlist(connection *c)
{
    sluice__redis_async *a = c->owner;
    gboolean listed = FALSE;
    g_mutex_lock(&a->lock);
    if (g_hash_table_lookup(a->connections, c->context) == c)
        listed = g_hash_table_remove(a->connections, c->context);
    g_mutex_unlock(&a->lock);
    if (listed)
        connection_unref(c);
}

/* Closes c (once): every call awaiting a reply on it fails with why (taken). */
static void connection_close(connection *c, GError *why)
{
    if (c->stage == CLOSED) {
        g_error_free(why);
        return;
    }
    c->stage = CLOSED;
    unlist(c);
    if (c->resolving)
        g_cancellable_cancel(c->resolving);
    g_clear_object(&c->resolving);
    if (c->source) {
        g_source_destroy(c->source);
        g_clear_pointer(&c->source, g_source_unref);
    }
    if (c->t) {
        sluice__redis_transport_free(c->t); /* its socket and TLS session too */
    } else {
        sluice__tls_free(c->tls);
        if (c->fd >= 0)
            close(c->fd);
    }
    c->t = NULL;
    c->tls = NULL;
    c->fd = -1;
    gpointer p;
    while ((p = ring_pop(&c->awaited))) {
        if (is_step(p))
            continue;
        conclude(p, NULL, g_error_copy(why));
        request_free(p);
    }
    g_error_free(why);
}

/* Closes c with "WHAT: STEP: DETAIL". */
static void connection_fail(connection *c, int code, const char *step, const char *detail)
{
    GError *why = NULL;
    sluice__redis_fail(&why, code, &c->node->endpoint, step, detail);
    connection_close(c, why);
}

/* Closes c after sending or reading failed (o, saved_errno) at step. A server that
 * wants a client certificate sluice has not says so (TLS 1.3) after the handshake,
 * in an alert that the reset connection may lose: that is said instead. */
static void connection_broke(connection *c, const char *step, sluice__redis_outcome o,
                             int saved_errno)
{
    if (o == SLUICE__REDIS_LOST && c->t->tls && sluice__tls_asked_for_certificate(c->t->tls))
        connection_fail(c, SLUICE_ERROR_TLS, step, SLUICE__TLS_NEEDS_CERTIFICATE);
    else
        connection_fail(c, saved_errno < 0 ? SLUICE_ERROR_TLS : SLUICE_ERROR_BACKEND, step,
                        sluice__redis_outcome_reason(o, saved_errno));
}

/* What c's socket is watched for now (changed only when it changes: each change
 * wakes the loop). Output not sent for want of room waits for G_IO_OUT. */
static void watch(connection *c)
{
    if (c->stage == CLOSED || !c->tag)
        return;
    GIOCondition events = c->stage == CONNECTING ? G_IO_OUT : c->stage == HANDSHAKE ? 0 : G_IO_IN;
    short wait = c->wait | (c->stage == READY && c->out->len > 0 ? c->send_wait : 0);
    if (wait & POLLIN)
        events |= G_IO_IN;
    if (wait & POLLOUT)
        events |= G_IO_OUT;
    if (events != c->events)
        g_source_modify_unix_fd(c->source, c->tag, events);
    c->events = events;
}

/* Writes out what it can of c's output. */
static void flush(connection *c)
{
    if (c->stage != READY || c->out->len == 0)
        return;
    gsize sent = 0;
    int saved_errno = 0;
    c->send_wait = 0;
    sluice__redis_outcome o = sluice__redis_send_some(c->t, (const char *)c->out->data, c->out->len,
                                                      &sent, &c->send_wait, &saved_errno);
    g_byte_array_remove_range(c->out, 0, (guint)sent);
    if (c->secret > 0) { /* what moved down is still behind the end, AUTH's bytes among it */
        sluice__secret_wipe(c->out->data + c->out->len, sent);
        c->secret -= MIN(c->secret, (guint)sent);
    }
    if (o != SLUICE__REDIS_SENT)
        connection_broke(c, "send", o, saved_errno);
}

/* Appends len bytes to c's output. While the password is in it, unsent, the array
 * is not grown by realloc, which would leave a copy of it in freed memory: it is
 * copied to a larger one by hand, and the old one wiped. */
static void out_append(connection *c, const void *data, gsize len)
{
    if (c->secret > 0 && c->out->len + len > c->out_room) {
        guint room = (guint)MAX(2 * (gsize)c->out_room, c->out->len + len);
        GByteArray *larger = g_byte_array_sized_new(room);
        g_byte_array_append(larger, c->out->data, c->out->len);
        sluice__secret_wipe(c->out->data, c->out->len);
        g_byte_array_unref(c->out);
        c->out = larger;
        c->out_room = room;
    }
    g_byte_array_append(c->out, data, (guint)len);
}

/* Appends the call r as it is named now (how). */
static void append_call(connection *c, request *r, sluice__redis_how how)
{
    sluice__redis_call_use(&r->call, how);
    out_append(c, r->call.data, r->call.len);
    ring_push(&c->awaited, r);
}

static void append(connection *c, int argc, const char *const *argv, gpointer awaiting)
{
    char small[1024];
    gsize len;
    char *cmd = sluice__redis_format_in(small, sizeof small, argc, argv, &len);
    out_append(c, cmd, len);
    if (awaiting == auth_step) { /* the password: first in out (connection_for) */
        c->secret = c->out->len;
        sluice__secret_wipe(cmd, len);
    }
    if (cmd != small)
        g_free(cmd);
    ring_push(&c->awaited, awaiting);
}

static connection *connection_for(sluice__redis_node *node, GMainContext *context);

/* c's source wakes by deadline (monotonic µs) at the latest. */
static void arm(connection *c, gint64 deadline)
{
    if (c->armed >= 0 && c->armed <= deadline)
        return;
    c->armed = deadline;
    g_source_set_ready_time(c->source, deadline);
}

/* Queues r's script on c (referenced by the caller), after ASKING when asking; it is
 * sent after the replies being handed out, or at the next iteration of c's loop. */
static void send_on(request *r, connection *c, gboolean asking)
{
    r->conn = c;
    if (c->stage == CLOSED) { /* it could not even start */
        conclude(r, NULL, failed(r, "cannot connect"));
        request_free(r);
        return;
    }
    if (asking)
        append(c, 1, (const char *[]){"ASKING"}, asking_step);
    append_call(c, r,
                g_atomic_int_get(&c->node->library) == SLUICE__LIBRARY_FUNCTIONS
                    ? SLUICE__REDIS_FCALL
                    : SLUICE__REDIS_EVALSHA);
    arm(c, r->deadline);
    /* a loop another thread runs may be waiting in poll() */
    if (!c->dispatching && !g_main_context_is_owner(c->context))
        g_main_context_wakeup(c->context);
}

/* The script to next (after ASKING when asking), which becomes the request's node;
 * the call ends (and r is freed) when next's breaker is open or it cannot be
 * reached. */
static void send_to(request *r, sluice__redis_node *next, gboolean asking)
{
    if (next != r->node) {
        sluice__breaker_success(&r->node->breaker); /* it answered */
        r->node = next;
        GError *failure = NULL;
        if (!sluice__breaker_allow(&next->breaker, &r->trial)) {
            sluice__breaker_refuse(&next->breaker, &failure);
            r->trial = FALSE; /* nothing to report to it */
            conclude(r, NULL, failure);
            request_free(r);
            return;
        }
    }
    connection *c = connection_for(next, r->conn->context);
    send_on(r, c, asking);
    connection_unref(c);
}

/* After TRYAGAIN's pause: the script once more, to the slot's master by the map
 * (which may ASK anew). The pause held a reference to r's connection. */
static gboolean send_again(gpointer p)
{
    request *r = p;
    connection *c = r->conn;
    g_mutex_lock(&c->owner->lock);
    g_queue_remove(&c->owner->paused, r);
    g_mutex_unlock(&c->owner->lock);
    g_clear_pointer(&r->pause, g_source_unref);
    if (r->over) {
        request_free(r); /* it timed out meanwhile */
    } else {
        if (r->timer) { /* its next connection keeps its deadline */
            g_source_destroy(r->timer);
            g_clear_pointer(&r->timer, g_source_unref);
        }
        sluice__redis_node *owner = sluice__redis_cluster_node(r->b->cluster, r->slot);
        send_to(r, owner ? owner : r->node, FALSE);
    }
    connection_unref(c);
    return G_SOURCE_REMOVE;
}

/* A call's deadline passed in a TRYAGAIN pause: it fails (send_again frees it). */
static gboolean paused_too_long(gpointer p)
{
    request *r = p;
    g_clear_pointer(&r->timer, g_source_unref);
    conclude(r, NULL, failed(r, "timed out"));
    return G_SOURCE_REMOVE;
}

/* On a Cluster, a node's refusal that the call follows as redis/redirect.h says:
 * MOVED (the map is updated) or ASK to another node, or a pause in a timeout source
 * of the call's context and then the slot's master by the map. FALSE when the
 * refusal fails the call (*why says why; NULL: the reply's text); TRUE when r was
 * sent again or ended (and freed), or is in a pause. */
static gboolean follow(request *r, const redisReply *reply, const char **why)
{
    sluice__redis_node *next;
    sluice__cluster_action action =
        sluice__redis_cluster_answered(r->b->cluster, r->node, r->slot, reply, &next);
    gint64 time_left = r->deadline - g_get_monotonic_time();
    switch (sluice__redirect_next(&r->course, action, time_left, why)) {
    case SLUICE__REDIRECT_SEND:
        send_to(r, next, r->course.asking);
        return TRUE;
    case SLUICE__REDIRECT_PAUSE:
        break;
    case SLUICE__REDIRECT_FAIL:
        return FALSE;
    }
    g_atomic_int_inc(&r->conn->refs); /* the pause's */
    r->timer = g_timeout_source_new((guint)MAX(1, (time_left + 999) / 1000));
    g_source_set_callback(r->timer, paused_too_long, r, NULL);
    g_source_attach(r->timer, r->conn->context);
    r->pause = g_timeout_source_new(SLUICE__REDIRECT_PAUSE_US / 1000);
    g_source_set_callback(r->pause, send_again, r, NULL);
    g_mutex_lock(&r->conn->owner->lock); /* listed: freeing the owner ends the pause */
    g_queue_push_tail(&r->conn->owner->paused, r);
    g_mutex_unlock(&r->conn->owner->lock);
    g_source_attach(r->pause, r->conn->context);
    return TRUE;
}

/* Asks c's node which library it has (redis/library.h), the answer read by
 * library_answered. */
static void library_ask(connection *c)
{
    const char *argv[4];
    int argc = sluice__redis_library_command(SLUICE__LIBRARY_ASK, argv);
    c->asked++;
    append(c, argc, argv, ask_step);
}

/* The reply to a step of the library's: the next step, or what the node does. */
static void library_answered(connection *c, gconstpointer step, const redisReply *reply)
{
    sluice__redis_library_step was = step == ask_step    ? SLUICE__LIBRARY_ASK
                                     : step == load_step ? SLUICE__LIBRARY_LOAD
                                                         : SLUICE__LIBRARY_REPLACE;
    sluice__redis_library library = SLUICE__LIBRARY_UNKNOWN;
    sluice__redis_library_step next = sluice__redis_library_next(was, reply, c->asked, &library);
    if (next == SLUICE__LIBRARY_DONE) {
        g_atomic_int_set(&c->node->library, (gint)library);
    } else if (next == SLUICE__LIBRARY_ASK) {
        library_ask(c);
    } else {
        const char *argv[4];
        int argc = sluice__redis_library_command(next, argv);
        append(c, argc, argv, next == SLUICE__LIBRARY_LOAD ? load_step : replace_step);
    }
}

/* The reply to what heads c's queue. */
static void answer(connection *c, redisReply *reply)
{
    gpointer p = ring_pop(&c->awaited);
    if (!p) {
        freeReplyObject(reply); /* nothing asked for it */
        return;
    }
    if (p == asking_step) {
        freeReplyObject(reply);
        return;
    }
    if (p == auth_step || p == select_step) {
        if (reply->type == REDIS_REPLY_ERROR) /* refused: every call on c says why */
            connection_fail(c, p == auth_step ? SLUICE_ERROR_AUTH : SLUICE_ERROR_CONFIG, p,
                            reply->str);
        freeReplyObject(reply);
        return;
    }
    if (p == ask_step || p == load_step || p == replace_step) {
        library_answered(c, p, reply);
        freeReplyObject(reply);
        return;
    }
    request *r = p;
    sluice__verdict v;
    const char *why;
    if (r->over) {
        /* timed out already: nothing to tell */
    } else if ((sluice__redis_is_noscript(reply) || sluice__redis_is_no_function(reply)) &&
               !r->retried) {
        /* a flushed script cache, a library gone, or a new server: EVAL runs it and
         * caches it; a library gone is asked for again */
        r->retried = TRUE;
        if (sluice__redis_is_no_function(reply) &&
            g_atomic_int_compare_and_exchange(&c->node->library, SLUICE__LIBRARY_FUNCTIONS,
                                              SLUICE__LIBRARY_UNKNOWN))
            library_ask(c);
        append_call(c, r, SLUICE__REDIS_EVAL);
        freeReplyObject(reply);
        return;
    } else if (reply->type == REDIS_REPLY_ERROR && r->b->cluster) {
        if (follow(r, reply, &why)) {
            freeReplyObject(reply); /* sent again, ended and freed, or in a pause */
            return;
        }
        conclude(r, NULL, failed(r, why ? why : reply->str));
    } else if (sluice__redis_call_verdict(&r->call, reply, &v, &why)) {
        conclude(r, &v, NULL);
    } else {
        conclude(r, NULL, failed(r, why));
    }
    freeReplyObject(reply);
    request_free(r);
}

/* Reads what has come and hands out the replies. */
static void receive(connection *c)
{
    for (;;) {
        gsize got = 0;
        int saved_errno = 0;
        c->wait = 0;
        sluice__redis_outcome o = sluice__redis_receive_some(c->t, &got, &c->wait, &saved_errno);
        if (o != SLUICE__REDIS_SENT) {
            connection_broke(c, "read", o, saved_errno);
            return;
        }
        void *reply = NULL;
        int rc;
        while (c->stage == READY && (rc = redisReaderGetReply(c->t->reader, &reply)) == REDIS_OK &&
               reply) {
            answer(c, reply); /* a `done` may close c, or queue more on it */
            reply = NULL;
        }
        if (c->stage != READY)
            return;
        if (rc != REDIS_OK) {
            connection_fail(c, SLUICE_ERROR_BACKEND, "read", "protocol error");
            return;
        }
        if (got == 0)
            return;
    }
}

static void ready(connection *c)
{
    c->t = sluice__redis_transport_new(c->fd, g_steal_pointer(&c->tls));
    c->stage = READY;
    c->wait = 0;
    flush(c);
}

static void handshake(connection *c)
{
    GError *why = NULL;
    c->wait = 0;
    int r = sluice__tls_handshake_step(c->tls, &c->wait, c->node->endpoint.what, &why);
    if (r < 0)
        connection_close(c, why);
    else if (r > 0)
        ready(c);
}

/* r's deadline passed while it awaited a reply on c: it fails, and c with it. */
static void time_out(connection *c, request *r)
{
    const sluice__redis_endpoint *e = &c->node->endpoint;
    /* what was under way says why, as the blocking client's messages do */
    GError *why = NULL;
    if (c->stage == HANDSHAKE) {
        sluice__tls_handshake_timed_out(c->tls, e->what, &why);
    } else if (c->stage == RESOLVING) {
        g_autofree char *step = g_strdup_printf("resolve %s", e->host);
        sluice__redis_fail(&why, SLUICE_ERROR_BACKEND, e, step, "timed out");
    } else {
        sluice__redis_fail(&why, SLUICE_ERROR_BACKEND, e,
                           c->stage == CONNECTING ? "connect" : "script", "timed out");
    }
    /* a server that did not answer this will not answer the next: the calls on
     * the connection fail with it, later ones (even those `done` makes) get a new
     * connection */
    g_atomic_int_inc(&c->refs);
    conclude(r, NULL, g_error_copy(why));
    connection_close(c, why);
    connection_unref(c);
}

/* c's source woke at a deadline: the call whose deadline passed first times out;
 * if none has (the call it was set for was answered), it wakes at the earliest
 * deadline left. One look at the queue per deadline passed, not a source per call. */
static void check_deadlines(connection *c)
{
    gint64 now = g_get_monotonic_time(), earliest = -1;
    request *late = NULL;
    for (guint i = 0; i < c->awaited.len; i++) {
        request *r = ring_nth(&c->awaited, i);
        if (is_step(r) || r->over)
            continue;
        if (r->deadline <= now && (!late || r->deadline < late->deadline))
            late = r;
        if (earliest < 0 || r->deadline < earliest)
            earliest = r->deadline;
    }
    if (late) {
        time_out(c, late);
        return;
    }
    c->armed = earliest;
    g_source_set_ready_time(c->source, earliest);
}

/* Ready before poll() when output waits to be sent and nothing keeps it. */
static gboolean on_prepare(GSource *source, gint *timeout)
{
    connection *c = *(connection **)(source + 1);
    *timeout = -1;
    return c->stage == READY && c->out->len > 0 && c->send_wait == 0;
}

/* The socket is ready for `cond`, output is queued, or a deadline came: the next
 * step of c. */
static gboolean on_ready(GSource *source, GSourceFunc callback, gpointer data)
{
    (void)callback;
    (void)data;
    connection *c = *(connection **)(source + 1);
    GIOCondition cond = c->tag ? g_source_query_unix_fd(source, c->tag) : 0;
    g_atomic_int_inc(&c->refs); /* a `done` may close it */
    if (cond == 0) {
        /* queued output, or a deadline: no step of the socket's */
    } else if (c->stage == CONNECTING) {
        int err = sluice__redis_connected(c->fd);
        if (err != 0) {
            connection_fail(c, SLUICE_ERROR_BACKEND, "connect", g_strerror(err));
        } else if (c->node->endpoint.tls) {
            c->tls = sluice__tls_new(c->node->endpoint.tls, c->node->endpoint.tls_name, c->fd);
            c->stage = HANDSHAKE;
            handshake(c);
        } else {
            ready(c);
        }
    } else if (c->stage == HANDSHAKE) {
        handshake(c);
    } else if (c->stage == READY && cond & (G_IO_IN | G_IO_HUP | G_IO_ERR)) {
        c->dispatching = TRUE; /* what `done` queues goes in the write below */
        receive(c);
        c->dispatching = FALSE;
    }
    flush(c); /* everything queued, in one send */
    if (c->stage != CLOSED && c->armed >= 0 && g_get_monotonic_time() >= c->armed)
        check_deadlines(c);
    watch(c);
    connection_unref(c);
    return G_SOURCE_CONTINUE;
}

static GSourceFuncs socket_funcs = {on_prepare, NULL, on_ready, NULL, NULL, NULL};

/* Starts connecting to addr. */
static void start_connect(connection *c, const struct sockaddr *addr, socklen_t len)
{
    c->fd = sluice__redis_connect_start(addr, len);
    if (c->fd < 0) {
        connection_fail(c, SLUICE_ERROR_BACKEND, "connect", g_strerror(errno));
        return;
    }
    c->stage = CONNECTING;
    c->events = G_IO_OUT;
    c->tag = g_source_add_unix_fd(c->source, c->fd, c->events);
}

static void start_connect_inet(connection *c, GInetAddress *address)
{
    g_autoptr(GSocketAddress) sa =
        g_inet_socket_address_new(address, (guint16)c->node->endpoint.port);
    struct sockaddr_storage native;
    gssize len = g_socket_address_get_native_size(sa);
    if (len <= 0 || !g_socket_address_to_native(sa, &native, sizeof native, NULL)) {
        connection_fail(c, SLUICE_ERROR_BACKEND, "connect", "not an address");
        return;
    }
    start_connect(c, (struct sockaddr *)&native, (socklen_t)len);
}

static void resolved(GObject *resolver, GAsyncResult *result, gpointer data)
{
    connection *c = data;
    g_autoptr(GError) error = NULL;
    GList *addresses = g_resolver_lookup_by_name_finish(G_RESOLVER(resolver), result, &error);
    if (c->stage == RESOLVING) {
        g_clear_object(&c->resolving);
        if (!addresses) {
            g_autofree char *step = g_strdup_printf("resolve %s", c->node->endpoint.host);
            connection_fail(c, SLUICE_ERROR_BACKEND, step, error->message);
        } else {
            start_connect_inet(c, addresses->data);
        }
    }
    g_resolver_free_addresses(addresses);
    connection_unref(c);
}

/* The connection of context, made (and AUTH and SELECT queued) when needed, with
 * a reference for the caller (it may have failed, CLOSED, already). */
static connection *connection_for(sluice__redis_node *node, GMainContext *context)
{
    const sluice__redis_endpoint *e = &node->endpoint;
    sluice__redis_async *a = async_of(node);
    pid_t pid = pid_now();
    g_mutex_lock(&a->lock);
    connection *c = g_hash_table_lookup(a->connections, context);
    if (c && c->pid != pid) { /* the parent's, after fork(): leave it alone */
        g_hash_table_remove(a->connections, context);
        c = NULL;
    }
    if (c)
        g_atomic_int_inc(&c->refs);
    g_mutex_unlock(&a->lock);
    if (c)
        return c;

    c = g_new0(connection, 1);
    c->refs = 2; /* the table's and the caller's */
    c->owner = a;
    c->node = node;
    c->context = g_main_context_ref(context);
    c->pid = pid;
    c->fd = -1;
    c->armed = -1;
    c->out = g_byte_array_sized_new(OUT_ROOM);
    c->out_room = OUT_ROOM;
    c->source = g_source_new(&socket_funcs, sizeof(GSource) + sizeof(connection *));
    *(connection **)(c->source + 1) = c;
    /* GLib blocks a source that cannot recurse while it runs, which takes its fd out
     * of the poll set and puts it back, waking the loop each time: on_ready is safe
     * to enter again from a loop a `done` runs */
    g_source_set_can_recurse(c->source, TRUE);
    g_source_attach(c->source, context);
    if (e->password && e->user)
        append(c, 3, (const char *[]){"AUTH", e->user, e->password}, auth_step);
    else if (e->password)
        append(c, 2, (const char *[]){"AUTH", e->password}, auth_step);
    if (e->db != 0) {
        char db[24];
        db[sluice__redis_decimal(db, e->db)] = '\0';
        append(c, 2, (const char *[]){"SELECT", db}, select_step);
    }
    if (g_atomic_int_get(&node->library) == SLUICE__LIBRARY_UNKNOWN)
        library_ask(c); /* EVALSHA meanwhile */
    g_mutex_lock(&a->lock);
    g_hash_table_replace(a->connections, context, c);
    g_mutex_unlock(&a->lock);

    g_autoptr(GInetAddress) address = e->host ? g_inet_address_new_from_string(e->host) : NULL;
    if (e->socket) {
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        g_strlcpy(un.sun_path, e->socket, sizeof un.sun_path);
        start_connect(c, (struct sockaddr *)&un, sizeof un);
    } else if (address) {
        start_connect_inet(c, address);
    } else { /* on a thread of GResolver's; the answer comes on context */
        c->stage = RESOLVING;
        c->resolving = g_cancellable_new();
        g_atomic_int_inc(&c->refs); /* resolved()'s */
        g_main_context_push_thread_default(context);
        g_autoptr(GResolver) resolver = g_resolver_get_default();
        g_resolver_lookup_by_name_async(resolver, e->host, c->resolving, resolved, c);
        g_main_context_pop_thread_default(context);
    }
    return c;
}

sluice__redis_call *sluice__redis_async_call_new(void)
{
    request *r = request_new();
    return &r->call;
}

static request *request_of(sluice__redis_call *call)
{
    return (request *)(gpointer)((char *)call - G_STRUCT_OFFSET(request, call));
}

void sluice__redis_async_call_free(sluice__redis_call *call)
{
    request_free(request_of(call));
}

void sluice__redis_async_decide(sluice__redis_backend *b, sluice__redis_node *node, guint slot,
                                sluice__redis_call *call, GMainContext *context,
                                sluice__decided_func done, gpointer data)
{
    GError *failure = NULL;
    gboolean trial;
    request *r = request_of(call);

    if (!sluice__breaker_allow(&node->breaker, &trial)) {
        request_free(r);
        sluice__breaker_refuse(&node->breaker, &failure);
        if (b->cluster) {
            sluice__redis_cluster_name_slot(failure, node, slot);
            sluice__redis_cluster_refresh_soon(b->cluster, b->timeout_us);
        }
        sluice__redis_failed(b, node);
        done(NULL, failure, data);
        return;
    }
    connection *c = connection_for(node, context);
    r->b = b;
    r->conn = c;
    r->node = node;
    r->slot = slot;
    r->trial = trial;
    r->done = done;
    r->data = data;
    r->deadline = g_get_monotonic_time() + b->timeout_us;
    send_on(r, c, FALSE);
    connection_unref(c);
}

/* Fails what is still in flight and closes every connection. No main context may
 * be dispatching one of them meanwhile. */
static void async_free(gpointer p)
{
    sluice__redis_async *a = p;
    g_mutex_lock(&a->lock);
    GList *all = g_hash_table_get_values(a->connections);
    g_mutex_unlock(&a->lock);
    for (GList *l = all; l; l = l->next) {
        connection *c = l->data;
        if (c->pid == pid_now()) {
            g_atomic_int_inc(&c->refs);
            connection_fail(c, SLUICE_ERROR_BACKEND, "close", "the backend was shut down");
            connection_unref(c);
        }
    }
    g_list_free(all);
    /* the calls in a TRYAGAIN pause fail as those awaiting a reply did: their pause
     * would otherwise send them through nodes and a map that are freed next */
    g_mutex_lock(&a->lock);
    GQueue paused = a->paused;
    g_queue_init(&a->paused);
    g_mutex_unlock(&a->lock);
    request *r;
    while ((r = g_queue_pop_head(&paused))) {
        connection *c = r->conn;
        if (c->pid != pid_now())
            continue; /* a forked child's copy of its parent's call: not its own */
        g_source_destroy(r->pause);
        g_clear_pointer(&r->pause, g_source_unref);
        GError *why = NULL;
        sluice__redis_fail(&why, SLUICE_ERROR_BACKEND, &r->node->endpoint, "close",
                           "the backend was shut down");
        conclude(r, NULL, why);
        request_free(r);
        connection_unref(c); /* the pause's */
    }
    g_hash_table_unref(a->connections);
    g_mutex_clear(&a->lock);
    g_free(a);
}
