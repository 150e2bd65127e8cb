/* SPDX-License-Identifier: MIT */
/* One pipelined connection to a Redis server that every thread of the process shares.
 *
 * Threads deciding at once do not each wait a round trip on a connection of their
 * own. A caller appends its command to the connection's output and its request to
 * the queue of replies awaited; if no thread is sending, it sends everything appended
 * so far in one write, and if no thread is reading, it reads replies and hands each
 * to the request at the head of the queue (Redis answers one connection's commands
 * in order). When its own reply is in, a reader hands reading to the youngest
 * request still waiting. A command that finds AHEAD commands awaited is left for
 * the reader to send when their replies come. So a burst of callers costs Redis
 * one read and one write, as `redis-benchmark -P` does, while one caller alone
 * sends and reads itself with no other thread involved. Waiting callers sleep on
 * a futex in their request, woken outside the lock.
 *
 * Every caller keeps its own deadline: a waiter whose deadline passes leaves its
 * place in the queue (its reply will be read and dropped); a reader whose deadline
 * passes with no reply from the server drops the connection and fails every request
 * on it; the next caller connects again. Connecting happens outside the lock, by
 * one thread, while others wait for it, each until its own deadline, and share its
 * failure. After fork() the child starts without a connection (pthread_atfork). */
#define _GNU_SOURCE
#include "redis/link.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <sluice/error.h>

#include "redis/conn.h"
#include "redis/resp.h"

#define BATCH 64 /* replies handed out per taking of the lock */
#define WAKES 64 /* wake-ups put off until the lock is let go */
/* A caller whose command finds this many awaited on the connection leaves it to
 * the reader, who sends it with what else was appended when their replies come:
 * the server has work meanwhile, and a burst costs one write instead of many. */
#define AHEAD 4

/* The state of a request: the word its caller sleeps on. */
enum { WAITING, DONE, READ /* its caller is to read replies now */ };

typedef struct {
    gint state; /* atomic; changed under the link's lock */
    gint64 deadline;
    redisReply *reply;             /* DONE: the reply, or NULL and why not:   */
    sluice__redis_outcome outcome; /*   how the exchange ended               */
    int saved_errno;               /*   for BROKEN                           */
    gboolean stale;                /* it went out on a connection made before it began */
    guint due;                     /* replies still to come: 2 after ASKING, whose is dropped */
} request;

/* A connection and the requests on it. Freed when its last user lets go. */
typedef struct {
    gint users;                 /* atomic: the link (while current), and each call that uses it */
    sluice__redis_transport *t; /* plaintext or TLS */
    gint64 made_at;
    gboolean dead;           /* failed: its requests have been answered with the failure */
    GByteArray *out, *spare; /* appended, not yet sent; the sender's buffer while not sending */
    guint unsent;            /* commands in out */
    gboolean sending;        /* a thread is writing out */
    gboolean reading;        /* a thread reads replies, or a READ request is about to */
    request **queue;         /* awaiting a reply, in the order sent; NULL: its caller left */
    guint head, len, size;   /* ring buffer */
} conn;

struct sluice__redis_link {
    GMutex lock;
    const sluice__redis_endpoint *e;
    conn *current;       /* NULL: none yet, or the last one failed */
    gboolean connecting; /* a thread is connecting, without the lock */
    guint connects;      /* connects that have ended */
    GError *failure;     /* the last connect's failure, if it failed */
    GCond connected;     /* broadcast when a connect ends */
};

/* ---- futex: a waiter sleeps on its request's state -------------------------------------- */

static void sleep_while_waiting(gint *state, gint64 deadline)
{
    struct timespec ts = {.tv_sec = deadline / G_USEC_PER_SEC,
                          .tv_nsec = deadline % G_USEC_PER_SEC * 1000};
    /* absolute CLOCK_MONOTONIC, the clock of g_get_monotonic_time(); a change of
     * state before it sleeps makes it return at once (EAGAIN) */
    syscall(SYS_futex, state, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, WAITING, &ts, NULL,
            FUTEX_BITSET_MATCH_ANY);
}

/* The caller may have seen the new state and left already: then this wakes no one
 * (or, on a reused stack address, someone who sleeps in a loop and rechecks). */
static void wake(gint *state)
{
    syscall(SYS_futex, state, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}

/* Requests to wake once the lock is let go. */
typedef struct {
    gint *states[WAKES];
    guint n;
} wakes;

static void wake_later(wakes *w, gint *state)
{
    if (w->n == WAKES) /* more requests than this holds: wake this one now */
        wake(state);
    else
        w->states[w->n++] = state;
}

static void wake_all(wakes *w)
{
    for (guint i = 0; i < w->n; i++)
        wake(w->states[i]);
    w->n = 0;
}

/* ---- connections ------------------------------------------------------------------------ */

static conn *conn_new(sluice__redis_transport *t)
{
    conn *c = g_new0(conn, 1);
    c->users = 1;
    c->t = t;
    c->made_at = g_get_monotonic_time();
    c->out = g_byte_array_new();
    c->spare = g_byte_array_new();
    c->size = 16;
    c->queue = g_new(request *, c->size);
    return c;
}

/* Lets go of c (with or without the lock); the last user frees it. */
static void conn_release(conn *c)
{
    if (!g_atomic_int_dec_and_test(&c->users))
        return;
    sluice__redis_transport_free(c->t);
    g_byte_array_unref(c->out);
    if (c->spare)
        g_byte_array_unref(c->spare);
    g_free(c->queue);
    g_free(c);
}

static void queue_push(conn *c, request *r)
{
    if (c->len == c->size) {
        request **bigger = g_new(request *, c->size * 2);
        for (guint i = 0; i < c->len; i++)
            bigger[i] = c->queue[(c->head + i) % c->size];
        g_free(c->queue);
        c->queue = bigger;
        c->head = 0;
        c->size *= 2;
    }
    c->queue[(c->head + c->len++) % c->size] = r;
}

static request *queue_pop(conn *c)
{
    request *r = c->queue[c->head];
    c->head = (c->head + 1) % c->size;
    c->len--;
    return r;
}

/* r's caller leaves: its reply, when it comes, is dropped. */
static void queue_leave(conn *c, request *r)
{
    for (guint i = 0; i < c->len; i++)
        if (c->queue[(c->head + i) % c->size] == r)
            c->queue[(c->head + i) % c->size] = NULL;
}

/* Ends r (lock held); its caller is woken through w (NULL: r is the caller's own). */
static void finish(request *r, redisReply *reply, sluice__redis_outcome o, int saved_errno,
                   wakes *w)
{
    r->reply = reply;
    r->outcome = o;
    r->saved_errno = saved_errno;
    g_atomic_int_set(&r->state, DONE);
    if (w)
        wake_later(w, &r->state);
}

/* c failed (lock held): every request on it ends with o (woken through w), it is
 * no longer current, and a thread waiting on its socket wakes up. */
static void conn_fail(sluice__redis_link *l, conn *c, sluice__redis_outcome o, int saved_errno,
                      wakes *w)
{
    if (c->dead)
        return;
    c->dead = TRUE;
    while (c->len > 0) {
        request *r = queue_pop(c);
        if (r && --r->due == 0) /* once: its caller may be gone right after */
            finish(r, NULL, o, saved_errno, w);
    }
    shutdown(c->t->fd, SHUT_RDWR);
    if (l->current == c) {
        l->current = NULL;
        conn_release(c);
    }
}

/* The reader is done (lock held): reading passes to the youngest request still
 * waiting, which hands out every reply before its own, so that reading changes
 * hands (one more wake-up) once per round of the pipeline, not once per reply. */
static void pass_reading(conn *c, wakes *w)
{
    for (guint i = c->len; i-- > 0;) {
        request *r = c->queue[(c->head + i) % c->size];
        if (r && g_atomic_int_get(&r->state) == WAITING) {
            g_atomic_int_set(&r->state, READ);
            wake_later(w, &r->state);
            return;
        }
    }
    c->reading = FALSE;
}

/* ---- sending and reading ---------------------------------------------------------------- */

/* Writes out c's appended commands, and what others append meanwhile, within me's
 * deadline (lock held, let go while writing); a failure wakes through w. */
static void send_out(sluice__redis_link *l, conn *c, request *me, wakes *w)
{
    c->sending = TRUE;
    while (c->out->len > 0 && !c->dead) {
        GByteArray *batch = c->out;
        c->out = c->spare;
        c->spare = NULL;
        c->unsent = 0;
        g_mutex_unlock(&l->lock);
        int saved_errno = 0;
        sluice__redis_outcome o = sluice__redis_send(c->t, me->deadline, (const char *)batch->data,
                                                     batch->len, &saved_errno);
        g_mutex_lock(&l->lock);
        g_byte_array_set_size(batch, 0);
        c->spare = batch;
        if (o != SLUICE__REDIS_SENT)
            conn_fail(l, c, o, saved_errno, w); /* a command may be half sent: unusable */
    }
    c->sending = FALSE;
}

/* Reads replies on c and hands them out until me's has come, sending what others
 * append meanwhile. A silent server past me's deadline fails c. Entered with the
 * lock held, returns without it. */
static void read_replies(sluice__redis_link *l, conn *c, request *me)
{
    wakes w = {.n = 0};
    redisReply *batch[BATCH];

    for (;;) {
        if (!c->dead && c->out->len > 0 && !c->sending)
            send_out(l, c, me, &w);
        /* DONE: its reply came, or c failed (which ended every request on it) */
        gboolean mine = g_atomic_int_get(&me->state) == DONE;
        if (mine && !c->dead)
            pass_reading(c, &w);
        g_mutex_unlock(&l->lock);
        wake_all(&w);
        if (mine)
            return;

        guint n = 0;
        sluice__redis_outcome o = SLUICE__REDIS_SENT;
        int saved_errno = 0;
        while (n == 0 && o == SLUICE__REDIS_SENT) {
            void *reply = NULL;
            int rc = REDIS_OK;
            while (n < BATCH && (rc = redisReaderGetReply(c->t->reader, &reply)) == REDIS_OK &&
                   reply) {
                batch[n++] = reply;
                reply = NULL;
            }
            if (rc != REDIS_OK) {
                o = SLUICE__REDIS_BROKEN;
                saved_errno = EPROTO;
            } else if (n == 0) {
                o = sluice__redis_receive(c->t, me->deadline, &saved_errno);
            }
        }

        g_mutex_lock(&l->lock);
        for (guint i = 0; i < n; i++) {
            request *r = c->len > 0 ? queue_pop(c) : NULL;
            if (r && --r->due == 0)
                finish(r, batch[i], SLUICE__REDIS_SENT, 0, r == me ? NULL : &w);
            else /* ASKING's (the command's says what matters), its caller left, or a
                  * reply nobody asked for */
                freeReplyObject(batch[i]);
        }
        if (o != SLUICE__REDIS_SENT)
            conn_fail(l, c, o, saved_errno, &w);
    }
}

/* Waits for me's reply, or to be told to read. Entered with the lock held,
 * returns without it. */
static void await_reply(sluice__redis_link *l, conn *c, request *me)
{
    for (;;) {
        gint state = g_atomic_int_get(&me->state);
        if (state == DONE)
            break;
        gboolean late = g_get_monotonic_time() >= me->deadline;
        if (state == READ && !late) {
            read_replies(l, c, me);
            return;
        }
        if (late) {
            wakes w = {.n = 0};
            queue_leave(c, me);
            if (state == READ)
                pass_reading(c, &w);
            me->outcome = SLUICE__REDIS_TIMED_OUT;
            g_atomic_int_set(&me->state, DONE);
            g_mutex_unlock(&l->lock);
            wake_all(&w);
            return;
        }
        g_mutex_unlock(&l->lock);
        sleep_while_waiting(&me->state, me->deadline);
        if (g_atomic_int_get(&me->state) == DONE)
            return; /* the common case: the reply, taken without the lock */
        g_mutex_lock(&l->lock);
    }
    g_mutex_unlock(&l->lock);
}

/* ---- connecting ------------------------------------------------------------------------- */

/* The current connection, connecting before deadline if there is none (lock held,
 * let go while connecting); NULL and *error when there is none by then. */
static conn *current(sluice__redis_link *l, gint64 deadline, gboolean probe, GError **error)
{
    while (!l->current && l->connecting) {
        guint ended = l->connects;
        while (l->connecting && l->connects == ended)
            if (!g_cond_wait_until(&l->connected, &l->lock, deadline)) {
                sluice__redis_fail(error, SLUICE_ERROR_BACKEND, l->e, "connect", "timed out");
                return NULL;
            }
        if (!l->current && l->failure) { /* the connect this caller waited for failed */
            g_propagate_error(error, g_error_copy(l->failure));
            return NULL;
        }
    }
    if (l->current)
        return l->current;
    l->connecting = TRUE;
    g_mutex_unlock(&l->lock);
    GError *failure = NULL;
    sluice__redis_transport *t = sluice__redis_connect(l->e, deadline, probe, &failure);
    g_mutex_lock(&l->lock);
    l->connecting = FALSE;
    l->connects++;
    g_clear_error(&l->failure);
    if (t)
        l->current = conn_new(t);
    else
        l->failure = g_error_copy(failure);
    g_cond_broadcast(&l->connected);
    if (failure)
        g_propagate_error(error, failure);
    return l->current;
}

gboolean sluice__redis_link_connect(sluice__redis_link *l, gint64 deadline, GError **error)
{
    g_mutex_lock(&l->lock);
    gboolean ok = current(l, deadline, TRUE, error) != NULL;
    g_mutex_unlock(&l->lock);
    return ok;
}

void sluice__redis_link_close(sluice__redis_link *l)
{
    g_mutex_lock(&l->lock);
    conn *c = g_steal_pointer(&l->current);
    g_mutex_unlock(&l->lock);
    if (c)
        conn_release(c); /* freed now, or by the last call still on it */
}

/* The command cmd (len bytes of RESP; what: its name for messages) on l, after ASKING
 * when asking (both appended at once: nothing comes between). */
static redisReply *exchange(sluice__redis_link *l, gint64 deadline, gboolean asking,
                            const char *cmd, gsize len, const char *what, gboolean *stale,
                            GError **error)
{
    static const char asking_cmd[] = "*1\r\n$6\r\nASKING\r\n";
    request me = {.state = WAITING, .deadline = deadline, .due = asking ? 2 : 1};
    gint64 started = g_get_monotonic_time();

    *stale = FALSE;
    g_mutex_lock(&l->lock);
    conn *c = current(l, deadline, FALSE, error);
    if (c) {
        g_atomic_int_inc(&c->users);
        me.stale = c->made_at < started;
        if (asking) {
            g_byte_array_append(c->out, (const guint8 *)asking_cmd, sizeof asking_cmd - 1);
            c->unsent++;
            queue_push(c, &me);
        }
        g_byte_array_append(c->out, (const guint8 *)cmd, (guint)len);
        c->unsent++;
        queue_push(c, &me);
        gboolean awaited = c->reading && c->len - c->unsent >= AHEAD;
        wakes failed = {.n = 0}; /* by a failed send: then me is one of them */
        if (!c->sending && !awaited)
            send_out(l, c, &me, &failed);
        if (!c->reading && !c->dead) {
            c->reading = TRUE;
            read_replies(l, c, &me);
        } else {
            await_reply(l, c, &me);
        }
        wake_all(&failed);
        conn_release(c);
    } else {
        g_mutex_unlock(&l->lock);
    }
    if (!c)
        return NULL;
    if (me.reply)
        return me.reply;
    *stale = me.stale && me.outcome == SLUICE__REDIS_LOST;
    sluice__redis_fail(error, SLUICE_ERROR_BACKEND, l->e, what,
                       sluice__redis_outcome_reason(me.outcome, me.saved_errno));
    return NULL;
}

/* argv on l, after ASKING when asking. */
static redisReply *command(sluice__redis_link *l, gint64 deadline, gboolean asking, int argc,
                           const char **argv, gboolean *stale, GError **error)
{
    char small[1024];
    gsize len;
    char *cmd = sluice__redis_format_in(small, sizeof small, argc, argv, &len);
    redisReply *reply = exchange(l, deadline, asking, cmd, len, argv[0], stale, error);
    if (cmd != small)
        g_free(cmd);
    return reply;
}

redisReply *sluice__redis_link_send(sluice__redis_link *l, gint64 deadline, gboolean asking,
                                    const char *cmd, gsize len, const char *what, gboolean *stale,
                                    GError **error)
{
    return exchange(l, deadline, asking, cmd, len, what, stale, error);
}

redisReply *sluice__redis_link_command(sluice__redis_link *l, gint64 deadline, int argc,
                                       const char **argv, gboolean *stale, GError **error)
{
    return command(l, deadline, FALSE, argc, argv, stale, error);
}

redisReply *sluice__redis_link_asking(sluice__redis_link *l, gint64 deadline, int argc,
                                      const char **argv, gboolean *stale, GError **error)
{
    return command(l, deadline, TRUE, argc, argv, stale, error);
}

/* ---- fork ------------------------------------------------------------------------------- */

static GMutex links_lock;
static GList *links; /* every link, for the fork handlers */

static void before_fork(void)
{
    g_mutex_lock(&links_lock);
    for (GList *i = links; i; i = i->next)
        g_mutex_lock(&((sluice__redis_link *)i->data)->lock);
}

static void after_fork_parent(void)
{
    for (GList *i = links; i; i = i->next)
        g_mutex_unlock(&((sluice__redis_link *)i->data)->lock);
    g_mutex_unlock(&links_lock);
}

/* The child has one thread: the parent's requests and readers are gone, and its
 * socket must not be shared. Connections other threads were still using leak. */
static void after_fork_child(void)
{
    for (GList *i = links; i; i = i->next) {
        sluice__redis_link *l = i->data;
        conn *c = g_steal_pointer(&l->current);
        if (c && g_atomic_int_get(&c->users) == 1) {
            conn_release(c);
        } else if (c) {
            /* the child's copy of the socket, which must not say a word on the
             * parent's connection (nor its TLS session); the rest leaks */
            sluice__redis_transport_abandon(c->t);
            c->t = NULL;
        }
        l->connecting = FALSE;
        g_clear_error(&l->failure);
        g_mutex_unlock(&l->lock);
    }
    g_mutex_unlock(&links_lock);
}

sluice__redis_link *sluice__redis_link_new(const sluice__redis_endpoint *e)
{
    static gsize hooked;
    if (g_once_init_enter(&hooked)) {
        pthread_atfork(before_fork, after_fork_parent, after_fork_child);
        g_once_init_leave(&hooked, 1);
    }
    sluice__redis_link *l = g_new0(sluice__redis_link, 1);
    g_mutex_init(&l->lock);
    g_cond_init(&l->connected);
    l->e = e;
    g_mutex_lock(&links_lock);
    links = g_list_prepend(links, l);
    g_mutex_unlock(&links_lock);
    return l;
}

void sluice__redis_link_free(sluice__redis_link *l)
{
    if (!l)
        return;
    g_mutex_lock(&links_lock);
    links = g_list_remove(links, l);
    g_mutex_unlock(&links_lock);
    if (l->current)
        conn_release(l->current);
    g_clear_error(&l->failure);
    g_cond_clear(&l->connected);
    g_mutex_clear(&l->lock);
    g_free(l);
}
