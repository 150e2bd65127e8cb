/* A blocking connection to Redis bounded by a deadline.
 *
 * hiredis connects and parses; sluice sends and waits itself, on a non-blocking
 * socket with ppoll(), so that connect, AUTH, SELECT and a command all end by one
 * deadline (hiredis 0.14's socket timeouts round up to the kernel's tick and
 * restart with every read). */
#define _GNU_SOURCE /* ppoll */
#include "redis/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <sluice/error.h>

#include "redis/resp.h"

gboolean sluice__redis_ready(int fd, short events, gint64 deadline)
{
    for (;;) {
        gint64 left = deadline - g_get_monotonic_time();
        if (left <= 0)
            return FALSE;
        struct pollfd p = {.fd = fd, .events = events};
        struct timespec ts = {.tv_sec = left / 1000000, .tv_nsec = left % 1000000 * 1000};
        int n = ppoll(&p, 1, &ts, NULL);
        if (n > 0)
            return TRUE; /* ready, or an error or hang-up that the next I/O reports */
        if (n < 0 && errno != EINTR)
            return TRUE;
    }
}

static sluice__redis_outcome io_failure(int saved_errno)
{
    return saved_errno == ECONNRESET || saved_errno == EPIPE ? SLUICE__REDIS_LOST
                                                             : SLUICE__REDIS_BROKEN;
}

sluice__redis_outcome sluice__redis_send(int fd, gint64 deadline, const char *data, gsize len,
                                         int *saved_errno)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n > 0) {
            data += n;
            len -= (gsize)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (!sluice__redis_ready(fd, POLLOUT, deadline))
                return SLUICE__REDIS_TIMED_OUT;
        } else {
            *saved_errno = n < 0 ? errno : EPIPE;
            return io_failure(*saved_errno);
        }
    }
    return SLUICE__REDIS_SENT;
}

sluice__redis_outcome sluice__redis_receive(redisContext *ctx, gint64 deadline, int *saved_errno)
{
    if (!sluice__redis_ready(ctx->fd, POLLIN, deadline))
        return SLUICE__REDIS_TIMED_OUT;
    errno = 0;
    if (redisBufferRead(ctx) == REDIS_OK) /* EAGAIN: nothing yet, not an error */
        return SLUICE__REDIS_SENT;
    *saved_errno = errno ? errno : EIO;
    return ctx->err == REDIS_ERR_EOF ? SLUICE__REDIS_LOST : io_failure(*saved_errno);
}

const char *sluice__redis_outcome_reason(sluice__redis_outcome o, int saved_errno)
{
    switch (o) {
    case SLUICE__REDIS_TIMED_OUT:
        return "timed out";
    case SLUICE__REDIS_LOST:
        return "connection closed by the server";
    default:
        return g_strerror(saved_errno);
    }
}

redisReply *sluice__redis_conn_command(const sluice__redis_endpoint *e, redisContext *ctx,
                                       gint64 deadline, int argc, const char **argv, GError **error)
{
    char small[256];
    gsize len;
    char *cmd = sluice__redis_format_in(small, sizeof small, argc, argv, &len);
    int saved_errno = 0;
    sluice__redis_outcome o = sluice__redis_send(ctx->fd, deadline, cmd, len, &saved_errno);
    if (cmd != small)
        g_free(cmd);
    void *r = NULL;
    while (o == SLUICE__REDIS_SENT && !r) {
        if (redisGetReplyFromReader(ctx, &r) != REDIS_OK) {
            o = SLUICE__REDIS_BROKEN;
            saved_errno = EPROTO;
        } else if (!r) {
            o = sluice__redis_receive(ctx, deadline, &saved_errno);
        }
    }
    if (o != SLUICE__REDIS_SENT)
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, e, argv[0],
                           sluice__redis_outcome_reason(o, saved_errno));
    return r;
}

/* Runs one setup command on ctx, nothing else being on it; FALSE (and *error, with
 * code for an error reply) when it failed. */
static gboolean command(const sluice__redis_endpoint *e, redisContext *ctx, gint64 deadline,
                        int code, GError **error, int argc, const char **argv)
{
    redisReply *reply = sluice__redis_conn_command(e, ctx, deadline, argc, argv, error);
    if (!reply)
        return FALSE;
    gboolean ok = reply->type != REDIS_REPLY_ERROR;
    if (!ok)
        sluice__redis_fail(error, code, e, argv[0], reply->str);
    freeReplyObject(reply);
    return ok;
}

redisContext *sluice__redis_connect(const sluice__redis_endpoint *e, gint64 deadline,
                                    gboolean probe, GError **error)
{
    gint64 left = deadline - g_get_monotonic_time();
    if (left <= 0) {
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, e, "connect", "timed out");
        return NULL;
    }
    struct timeval tv = {.tv_sec = left / 1000000, .tv_usec = left % 1000000};
    redisContext *ctx = e->socket ? redisConnectUnixWithTimeout(e->socket, tv)
                                  : redisConnectWithTimeout(e->host, e->port, tv);
    if (!ctx || ctx->err) {
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, e, "connect",
                           !ctx ? "out of memory"
                           : ctx->err == REDIS_ERR_IO &&
                                   (errno == EINPROGRESS || errno == ETIMEDOUT)
                               ? "timed out"
                               : ctx->errstr);
        goto err;
    }
    if (!e->socket)
        redisEnableKeepAlive(ctx);
    /* from now on hiredis only parses: sluice sends and polls itself */
    int flags = fcntl(ctx->fd, F_GETFL);
    if (flags < 0 || fcntl(ctx->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, e, "connect", g_strerror(errno));
        goto err;
    }
    ctx->flags &= ~REDIS_BLOCK;
    if (e->password) {
        const char *with_user[] = {"AUTH", e->user, e->password};
        const char *password_only[] = {"AUTH", e->password};
        gboolean ok = e->user
                          ? command(e, ctx, deadline, SLUICE_ERROR_AUTH, error, 3, with_user)
                          : command(e, ctx, deadline, SLUICE_ERROR_AUTH, error, 2, password_only);
        if (!ok)
            goto err;
    }
    const char *ping[] = {"PING"}; /* NOAUTH here: a password is needed and missing */
    if (probe && !command(e, ctx, deadline, SLUICE_ERROR_AUTH, error, 1, ping))
        goto err;
    if (e->db != 0) {
        g_autofree char *db = g_strdup_printf("%d", e->db);
        const char *select[] = {"SELECT", db};
        if (!command(e, ctx, deadline, SLUICE_ERROR_BACKEND, error, 2, select))
            goto err;
    }
    return ctx;
err:
    if (ctx)
        redisFree(ctx);
    return NULL;
}
