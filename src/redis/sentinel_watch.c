/* SPDX-License-Identifier: MIT */
/* Following the master through a failover: a thread subscribed to every Sentinel.
 *
 * The thread holds a connection to each Sentinel subscribed to +switch-master (the
 * Sentinel that leads a failover says it first; the others repeat it as they learn
 * it), so a failover is seen as it ends rather than at the next failed call. The
 * master a message names is taken once its ROLE says master. The thread also finds
 * the master again (sentinel.c) when a caller asks, after a failed call, and keeps
 * trying, 100 ms apart and then slower, until a master answers; a lost
 * subscription is made again a second later, and since a failover may have ended
 * meanwhile, the master is looked for again then.
 *
 * Callers only set a flag and write to an eventfd. After fork() the child has no
 * thread: its first ask starts one of its own (the subscriptions it inherited are
 * closed, never read). */
#include "redis/sentinel_watch.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "redis/conn.h"

#define RETRY_FIRST_US (G_GINT64_CONSTANT(100000))  /* the first pause between tries */
#define RETRY_MAX_US   (G_GINT64_CONSTANT(1000000)) /* the longest                   */
#define RESUBSCRIBE_US (G_GINT64_CONSTANT(1000000)) /* after a lost subscription     */

struct sluice__redis_watch {
    sluice__redis_sentinel *s;
    gint64 step_us;
    sluice__redis_found_func found;
    gpointer data;
    gint pid;     /* atomic: the process whose thread this is                      */
    gint wake;    /* atomic: the eventfd that wakes the thread                     */
    gint asked;   /* atomic: find the master again                                 */
    gint stop;    /* atomic: the thread is to end                                  */
    gint retired; /* atomic: for good (no child starts one either)                 */
    gint *fds;    /* atomic each: the subscriptions' sockets (-1: none), for fork  */
    GThread *thread;
};

/* One Sentinel's subscription, as the thread keeps it. */
typedef struct {
    sluice__redis_transport *t; /* NULL: none now */
    gint64 retry_at;            /* when to subscribe again */
} subscription;

static void subscribe(sluice__redis_watch *w, guint i, subscription *sub, gint64 now)
{
    const sluice__redis_endpoint *e = sluice__redis_sentinel_at(w->s, i);
    g_autoptr(GError) error = NULL;
    gint64 deadline = now + w->step_us;
    sluice__redis_transport *t = sluice__redis_connect(e, deadline, FALSE, &error);
    const char *argv[] = {"SUBSCRIBE", "+switch-master"};
    redisReply *r = t ? sluice__redis_conn_command(e, t, deadline, 2, argv, &error) : NULL;
    gboolean ok = r && r->type == REDIS_REPLY_ARRAY;
    if (r)
        freeReplyObject(r);
    if (!ok) {
        g_debug("%s: no subscription to +switch-master: %s", e->what,
                error ? error->message : "refused");
        sluice__redis_transport_free(t);
        sub->retry_at = now + RESUBSCRIBE_US;
        return;
    }
    sub->t = t;
    g_atomic_int_set(&w->fds[i], t->fd);
}

static void unsubscribe(sluice__redis_watch *w, guint i, subscription *sub, gint64 now)
{
    g_atomic_int_set(&w->fds[i], -1); /* before it closes: a child never closes a reused fd */
    sluice__redis_transport_free(sub->t);
    sub->t = NULL;
    sub->retry_at = now + RESUBSCRIBE_US;
}

/* "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT" of our master: TRUE and the new address. */
static gboolean switched_to(sluice__redis_watch *w, const redisReply *r, char **host, int *port)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[2]->type != REDIS_REPLY_STRING)
        return FALSE;
    g_auto(GStrv) words = g_strsplit(r->element[2]->str, " ", -1);
    gint64 p;
    if (g_strv_length(words) != 5 || strcmp(words[0], sluice__redis_sentinel_master(w->s)) != 0 ||
        !g_ascii_string_to_signed(words[4], 10, 1, 65535, &p, NULL))
        return FALSE;
    *host = g_strdup(words[3]);
    *port = (int)p;
    return TRUE;
}

/* Reads what Sentinel i sent; TRUE when the master was found through it. Sets
 * *again when it is to be looked for (a switch to a server that is not the
 * master yet). */
static gboolean read_messages(sluice__redis_watch *w, guint i, subscription *sub, gint64 now,
                              gboolean *again)
{
    gsize got;
    short wait;
    int saved_errno;
    if (sluice__redis_receive_some(sub->t, &got, &wait, &saved_errno) != SLUICE__REDIS_SENT) {
        g_debug("%s: the subscription to +switch-master is lost",
                sluice__redis_sentinel_at(w->s, i)->what);
        unsubscribe(w, i, sub, now);
        *again = TRUE; /* a switch may come while it is away */
        return FALSE;
    }
    gboolean found = FALSE;
    void *reply;
    while (redisReaderGetReply(sub->t->reader, &reply) == REDIS_OK && reply) {
        g_autofree char *host = NULL;
        int port;
        if (!found && switched_to(w, reply, &host, &port)) {
            g_autoptr(GError) error = NULL;
            if (sluice__redis_sentinel_is_master(w->s, host, port, now + w->step_us, &error)) {
                sluice__redis_sentinel_prefer(w->s, i);
                w->found(host, port, w->data);
                found = TRUE;
            } else {
                *again = TRUE;
            }
        }
        freeReplyObject(reply);
    }
    return found;
}

static gpointer watch(gpointer data)
{
    sluice__redis_watch *w = data;
    guint n = sluice__redis_sentinel_count(w->s);
    subscription *subs = g_new0(subscription, n);
    struct pollfd *polled = g_new(struct pollfd, n + 1);
    gboolean wanted = FALSE, complained = FALSE;
    gint64 retry_us = RETRY_FIRST_US, try_at = 0;
    while (!g_atomic_int_get(&w->stop)) {
        gint64 now = g_get_monotonic_time(), wake_at = now + RETRY_MAX_US;
        for (guint i = 0; i < n; i++) {
            if (!subs[i].t && now >= subs[i].retry_at) {
                subscribe(w, i, &subs[i], now);
                wanted |= subs[i].t != NULL; /* a switch may have ended unseen */
            }
            if (!subs[i].t)
                wake_at = MIN(wake_at, subs[i].retry_at);
        }
        if (g_atomic_int_and(&w->asked, 0))
            wanted = TRUE;
        now = g_get_monotonic_time();
        if (wanted && now >= try_at) {
            g_autoptr(GError) error = NULL;
            g_autofree char *host = NULL;
            int port;
            if (sluice__redis_sentinel_resolve(w->s, w->step_us, &host, &port, &error)) {
                w->found(host, port, w->data);
                wanted = complained = FALSE;
                retry_us = RETRY_FIRST_US;
            } else {
                if (!complained) /* once until a master is found */
                    g_warning("%s; on_error decides until one is found (asked again every "
                              "%d ms or less)",
                              error->message, (int)(RETRY_MAX_US / 1000));
                complained = TRUE;
                try_at = g_get_monotonic_time() + retry_us;
                retry_us = MIN(2 * retry_us, RETRY_MAX_US);
            }
        }
        if (wanted)
            wake_at = MIN(wake_at, try_at);

        guint k = 0;
        polled[k++] = (struct pollfd){.fd = g_atomic_int_get(&w->wake), .events = POLLIN};
        for (guint i = 0; i < n; i++)
            polled[k++] = (struct pollfd){.fd = subs[i].t ? subs[i].t->fd : -1, .events = POLLIN};
        gint64 wait_us = wake_at - g_get_monotonic_time();
        if (poll(polled, k, wait_us > 0 ? (int)((wait_us + 999) / 1000) : 0) <= 0)
            continue;
        if (polled[0].revents) {
            eventfd_t ignored;
            eventfd_read(polled[0].fd, &ignored);
        }
        now = g_get_monotonic_time();
        for (guint i = 0; i < n; i++) {
            gboolean again = FALSE;
            if (subs[i].t && polled[1 + i].revents && read_messages(w, i, &subs[i], now, &again)) {
                wanted = complained = FALSE;
                retry_us = RETRY_FIRST_US;
            }
            if (again) {
                wanted = TRUE;
                try_at = now;
            }
        }
    }
    for (guint i = 0; i < n; i++)
        if (subs[i].t)
            unsubscribe(w, i, &subs[i], 0);
    g_free(polled);
    g_free(subs);
    return NULL;
}

/* Starts the thread of this process (the watch's lock-free fields are set). */
static void start(sluice__redis_watch *w)
{
    g_atomic_int_set(&w->wake, eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    w->thread = g_thread_new("sluice-sentinel", watch, w);
}

sluice__redis_watch *sluice__redis_watch_new(sluice__redis_sentinel *s, gint64 step_us,
                                             sluice__redis_found_func found, gpointer data)
{
    sluice__redis_watch *w = g_new0(sluice__redis_watch, 1);
    w->s = s;
    w->step_us = step_us;
    w->found = found;
    w->data = data;
    w->pid = getpid();
    guint n = sluice__redis_sentinel_count(s);
    w->fds = g_new(gint, n);
    for (guint i = 0; i < n; i++)
        w->fds[i] = -1;
    start(w);
    return w;
}

void sluice__redis_watch_ask(sluice__redis_watch *w)
{
    if (g_atomic_int_get(&w->retired))
        return;
    gint pid = getpid(), was = g_atomic_int_get(&w->pid);
    if (was != pid && g_atomic_int_compare_and_exchange(&w->pid, was, pid)) {
        /* a child: the parent's thread is not here. Its subscriptions are closed;
         * its eventfd is left open, as a caller may still be writing to it (a
         * wake-up of the parent's thread costs it one look for the master) */
        for (guint i = 0; i < sluice__redis_sentinel_count(w->s); i++) {
            int fd = g_atomic_int_get(&w->fds[i]);
            if (fd >= 0 && g_atomic_int_compare_and_exchange(&w->fds[i], fd, -1))
                close(fd);
        }
        g_atomic_int_set(&w->stop, 0);
        start(w);
    }
    g_atomic_int_set(&w->asked, 1);
    eventfd_write(g_atomic_int_get(&w->wake), 1);
}

void sluice__redis_watch_stop(sluice__redis_watch *w)
{
    if (!g_atomic_int_compare_and_exchange(&w->retired, 0, 1))
        return;
    if (g_atomic_int_get(&w->pid) == getpid()) { /* else the thread is the parent's */
        g_atomic_int_set(&w->stop, 1);
        eventfd_write(g_atomic_int_get(&w->wake), 1);
        g_thread_join(w->thread);
    }
}

void sluice__redis_watch_free(sluice__redis_watch *w)
{
    if (!w)
        return;
    sluice__redis_watch_stop(w);
    if (g_atomic_int_get(&w->pid) == getpid())
        close(g_atomic_int_get(&w->wake));
    g_free(w->fds);
    g_free(w);
}
