/* SPDX-License-Identifier: MIT */
/* A connection to Redis bounded by a deadline.
 *
 * sluice connects, sends and waits itself, on a non-blocking socket (redis/socket.c),
 * so that resolving the name, connect, the TLS handshake, AUTH, SELECT and a
 * command all end by one deadline (hiredis 0.14's socket timeouts round up to the
 * kernel's tick and restart with every read, and its getaddrinfo() has none);
 * hiredis' reader parses the replies. Underneath is the transport: send() and
 * recv() on the socket, or OpenSSL's session on it (redis/tls.c). */
#include "redis/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include <sluice/error.h>

#include "redis/resolve.h"
#include "redis/resp.h"
#include "redis/socket.h"
#include "redis/tls.h"
#include "secret.h"

/* ---- the transport ---------------------------------------------------------------------- */

static sluice__redis_outcome io_failure(int saved_errno)
{
    return saved_errno == ECONNRESET || saved_errno == EPIPE ? SLUICE__REDIS_LOST
                                                             : SLUICE__REDIS_BROKEN;
}

sluice__redis_transport *sluice__redis_transport_new(int fd, sluice__tls *tls)
{
    sluice__redis_transport *t = g_new0(sluice__redis_transport, 1);
    t->fd = fd;
    t->tls = tls;
    t->reader = redisReaderCreate();
    return t;
}

void sluice__redis_transport_free(sluice__redis_transport *t)
{
    if (!t)
        return;
    sluice__tls_free(t->tls);
    redisReaderFree(t->reader);
    close(t->fd);
    g_free(t);
}

void sluice__redis_transport_abandon(sluice__redis_transport *t)
{
    if (t)
        close(t->fd);
}

sluice__redis_outcome sluice__redis_send_some(sluice__redis_transport *t, const char *data,
                                              gsize len, gsize *sent, short *wait, int *saved_errno)
{
    if (t->tls)
        return sluice__tls_send_some(t->tls, data, len, sent, wait, saved_errno);
    *sent = 0;
    while (*sent < len) {
        ssize_t n = send(t->fd, data + *sent, len - *sent, MSG_NOSIGNAL);
        if (n > 0) {
            *sent += (gsize)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            *wait = POLLOUT;
            return SLUICE__REDIS_SENT;
        } else {
            *saved_errno = n < 0 ? errno : EPIPE;
            return io_failure(*saved_errno);
        }
    }
    return SLUICE__REDIS_SENT;
}

sluice__redis_outcome sluice__redis_receive_some(sluice__redis_transport *t, gsize *got,
                                                 short *wait, int *saved_errno)
{
    if (t->tls)
        return sluice__tls_receive_some(t->tls, t->reader, got, wait, saved_errno);
    char buf[16 * 1024];
    *got = 0;
    ssize_t n = recv(t->fd, buf, sizeof buf, 0);
    if (n > 0) {
        *got = (gsize)n;
        if (redisReaderFeed(t->reader, buf, (size_t)n) == REDIS_OK)
            return SLUICE__REDIS_SENT;
        *saved_errno = ENOMEM;
        return SLUICE__REDIS_BROKEN;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        *wait = POLLIN;
        return SLUICE__REDIS_SENT;
    }
    *saved_errno = n < 0 ? errno : ECONNRESET;
    return n == 0 ? SLUICE__REDIS_LOST : io_failure(*saved_errno);
}

sluice__redis_outcome sluice__redis_send(sluice__redis_transport *t, gint64 deadline,
                                         const char *data, gsize len, int *saved_errno)
{
    while (len > 0) {
        gsize sent = 0;
        short wait = 0;
        sluice__redis_outcome o = sluice__redis_send_some(t, data, len, &sent, &wait, saved_errno);
        if (o != SLUICE__REDIS_SENT)
            return o;
        data += sent;
        len -= sent;
        if (len > 0 && !sluice__redis_ready(t->fd, wait, deadline))
            return SLUICE__REDIS_TIMED_OUT;
    }
    return SLUICE__REDIS_SENT;
}

sluice__redis_outcome sluice__redis_receive(sluice__redis_transport *t, gint64 deadline,
                                            int *saved_errno)
{
    /* wait first unless the TLS session holds what the socket had (a recv() that
     * finds nothing costs a system call) */
    short wait = t->tls && sluice__tls_pending(t->tls) ? 0 : POLLIN;
    for (;;) {
        if (wait && !sluice__redis_ready(t->fd, wait, deadline))
            return SLUICE__REDIS_TIMED_OUT;
        gsize got = 0;
        sluice__redis_outcome o = sluice__redis_receive_some(t, &got, &wait, saved_errno);
        if (o != SLUICE__REDIS_SENT || got > 0)
            return o;
    }
}

const char *sluice__redis_outcome_reason(sluice__redis_outcome o, int saved_errno)
{
    switch (o) {
    case SLUICE__REDIS_TIMED_OUT:
        return "timed out";
    case SLUICE__REDIS_LOST:
        return "connection closed by the server";
    default:
        return saved_errno < 0 ? sluice__tls_reason(saved_errno) : g_strerror(saved_errno);
    }
}

/* ---- connecting ------------------------------------------------------------------------- */

int sluice__redis_connect_start(const struct sockaddr *addr, socklen_t len)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (addr->sa_family != AF_UNIX) {
        /* a command goes out at once, not after the previous reply's ACK; a peer
         * that vanished is noticed within a minute (as hiredis does both) */
        int on = 1, idle = 15, interval = 5, count = 3;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
    }
    if (connect(fd, addr, len) == 0 || errno == EINPROGRESS)
        return fd;
    int saved_errno = errno;
    close(fd);
    errno = saved_errno;
    return -1;
}

int sluice__redis_connected(int fd)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        return errno;
    return err;
}

/* A socket connected to addr before deadline, or -1 and *why. */
static int connect_to(const struct sockaddr *addr, socklen_t len, gint64 deadline, int *why)
{
    int fd = sluice__redis_connect_start(addr, len);
    if (fd < 0) {
        *why = errno;
        return -1;
    }
    if (!sluice__redis_ready(fd, POLLOUT, deadline))
        *why = ETIMEDOUT;
    else
        *why = sluice__redis_connected(fd);
    if (*why == 0)
        return fd;
    close(fd);
    return -1;
}

/* A socket connected to e's server before deadline (each of its addresses in
 * turn), or -1 and *error. */
static int open_socket(const sluice__redis_endpoint *e, gint64 deadline, GError **error)
{
    int why = 0, fd = -1;
    if (e->socket) {
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        if (strlen(e->socket) >= sizeof un.sun_path) {
            sluice__redis_fail(error, SLUICE_ERROR_BACKEND, e, "connect", "socket path too long");
            return -1;
        }
        strcpy(un.sun_path, e->socket);
        fd = connect_to((struct sockaddr *)&un, sizeof un, deadline, &why);
    } else {
        const char *failed = NULL;
        struct addrinfo *all = sluice__redis_resolve(e->host, e->port, deadline, &failed);
        if (!all) {
            g_autofree char *step = g_strdup_printf("resolve %s", e->host);
            sluice__redis_fail(error, SLUICE_ERROR_BACKEND, e, step, failed);
            return -1;
        }
        for (struct addrinfo *a = all; a && fd < 0 && why != ETIMEDOUT; a = a->ai_next)
            fd = connect_to(a->ai_addr, a->ai_addrlen, deadline, &why);
        freeaddrinfo(all);
    }
    if (fd < 0)
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, e, "connect",
                           why == ETIMEDOUT ? "timed out" : g_strerror(why));
    return fd;
}

redisReply *sluice__redis_conn_command(const sluice__redis_endpoint *e, sluice__redis_transport *t,
                                       gint64 deadline, int argc, const char **argv, GError **error)
{
    char small[256];
    gsize len;
    char *cmd = sluice__redis_format_in(small, sizeof small, argc, argv, &len);
    int saved_errno = 0;
    sluice__redis_outcome o = sluice__redis_send(t, deadline, cmd, len, &saved_errno);
    sluice__secret_wipe(cmd, len); /* it may be an AUTH with the password */
    if (cmd != small)
        g_free(cmd);
    void *r = NULL;
    while (o == SLUICE__REDIS_SENT && !r) {
        if (redisReaderGetReply(t->reader, &r) != REDIS_OK) {
            o = SLUICE__REDIS_BROKEN;
            saved_errno = EPROTO;
        } else if (!r) {
            o = sluice__redis_receive(t, deadline, &saved_errno);
        }
    }
    if (o == SLUICE__REDIS_LOST && t->tls && sluice__tls_asked_for_certificate(t->tls)) {
        sluice__redis_fail(error, SLUICE_ERROR_TLS, e, argv[0], SLUICE__TLS_NEEDS_CERTIFICATE);
    } else if (o != SLUICE__REDIS_SENT) {
        /* a TLS port answers plaintext by closing the connection */
        g_autofree char *why = g_strdup_printf(
            "%s%s", sluice__redis_outcome_reason(o, saved_errno),
            !t->tls && o == SLUICE__REDIS_LOST ? " (a TLS port? rediss:// speaks TLS)" : "");
        sluice__redis_fail(error, saved_errno < 0 ? SLUICE_ERROR_TLS : SLUICE_ERROR_BACKEND, e,
                           argv[0], why);
    }
    return r;
}

/* Runs one setup command on t, nothing else being on it; FALSE (and *error, with
 * code for an error reply) when it failed. */
static gboolean command(const sluice__redis_endpoint *e, sluice__redis_transport *t,
                        gint64 deadline, int code, GError **error, int argc, const char **argv)
{
    redisReply *reply = sluice__redis_conn_command(e, t, deadline, argc, argv, error);
    if (!reply)
        return FALSE;
    gboolean ok = reply->type != REDIS_REPLY_ERROR;
    if (!ok)
        sluice__redis_fail(error, code, e, argv[0], reply->str);
    freeReplyObject(reply);
    return ok;
}

sluice__redis_transport *sluice__redis_connect(const sluice__redis_endpoint *e, gint64 deadline,
                                               gboolean probe, GError **error)
{
    int fd = open_socket(e, deadline, error);
    if (fd < 0)
        return NULL;
    sluice__tls *tls = NULL;
    if (e->tls) {
        tls = sluice__tls_new(e->tls, e->tls_name, fd);
        if (!sluice__tls_handshake(tls, deadline, e->what, error)) {
            sluice__tls_free(tls);
            close(fd);
            return NULL;
        }
    }
    sluice__redis_transport *t = sluice__redis_transport_new(fd, tls);
    if (e->password) {
        const char *with_user[] = {"AUTH", e->user, e->password};
        const char *password_only[] = {"AUTH", e->password};
        gboolean ok = e->user ? command(e, t, deadline, SLUICE_ERROR_AUTH, error, 3, with_user)
                              : command(e, t, deadline, SLUICE_ERROR_AUTH, error, 2, password_only);
        if (!ok)
            goto err;
    }
    const char *ping[] = {"PING"}; /* NOAUTH here: a password is needed and missing */
    if (probe && !command(e, t, deadline, SLUICE_ERROR_AUTH, error, 1, ping))
        goto err;
    if (e->db != 0) {
        char db[24];
        db[sluice__redis_decimal(db, e->db)] = '\0';
        const char *select[] = {"SELECT", db};
        /* "ERR DB index is out of range": the URL names a database the server has not */
        if (!command(e, t, deadline, SLUICE_ERROR_CONFIG, error, 2, select))
            goto err;
    }
    return t;
err:
    sluice__redis_transport_free(t);
    return NULL;
}
