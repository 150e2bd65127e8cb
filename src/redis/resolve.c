/* SPDX-License-Identifier: MIT */
/* Host names resolved within a deadline.
 *
 * getaddrinfo() has no timeout (glibc's resolver waits `timeout` × `attempts` of
 * resolv.conf, 10 s by default, longer with several servers), and getaddrinfo_a()
 * would bring a signal or a thread of glibc's per lookup. So a name is looked up
 * on a thread of sluice's: the caller waits on a condition until the deadline and
 * then leaves; the thread frees the lookup when it ends, whoever is left. An IP
 * address needs no thread (AI_NUMERICHOST). */
#include "redis/resolve.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

typedef struct {
    gint refs; /* atomic: the caller and the thread */
    char *host;
    char service[8];
    GMutex lock;
    GCond answered;
    gboolean done;
    int rc, saved_errno; /* getaddrinfo's, and errno for EAI_SYSTEM */
    struct addrinfo *result;
} lookup;

static void lookup_unref(lookup *l)
{
    if (!g_atomic_int_dec_and_test(&l->refs))
        return;
    if (l->result)
        freeaddrinfo(l->result);
    g_mutex_clear(&l->lock);
    g_cond_clear(&l->answered);
    g_free(l->host);
    g_free(l);
}

static int look_up(const char *host, const char *service, int flags, struct addrinfo **result)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = flags};
    return getaddrinfo(host, service, &hints, result);
}

static gpointer run(gpointer data)
{
    lookup *l = data;
    struct addrinfo *result = NULL;
    int rc = look_up(l->host, l->service, 0, &result);
    int saved_errno = errno;
    g_mutex_lock(&l->lock);
    l->rc = rc;
    l->saved_errno = saved_errno;
    l->result = result;
    l->done = TRUE;
    g_cond_signal(&l->answered);
    g_mutex_unlock(&l->lock);
    lookup_unref(l);
    return NULL;
}

struct addrinfo *sluice__redis_resolve(const char *host, int port, gint64 deadline,
                                       const char **why)
{
    char service[8];
    g_snprintf(service, sizeof service, "%d", port);
    struct addrinfo *result = NULL;
    if (look_up(host, service, AI_NUMERICHOST, &result) == 0)
        return result;

    lookup *l = g_new0(lookup, 1);
    l->refs = 2;
    l->host = g_strdup(host);
    memcpy(l->service, service, sizeof service);
    g_mutex_init(&l->lock);
    g_cond_init(&l->answered);
    GThread *thread = g_thread_try_new("sluice-resolve", run, l, NULL);
    if (!thread) {
        lookup_unref(l);
        lookup_unref(l);
        *why = "cannot start a thread to resolve the name";
        return NULL;
    }
    g_thread_unref(thread); /* it ends by itself */
    g_mutex_lock(&l->lock);
    while (!l->done && g_cond_wait_until(&l->answered, &l->lock, deadline))
        ;
    gboolean done = l->done;
    int rc = l->rc, saved_errno = l->saved_errno;
    result = g_steal_pointer(&l->result);
    g_mutex_unlock(&l->lock);
    lookup_unref(l);
    if (!done)
        *why = "timed out";
    else if (rc != 0)
        *why = rc == EAI_SYSTEM ? g_strerror(saved_errno) : gai_strerror(rc);
    return done && rc == 0 ? result : NULL;
}
