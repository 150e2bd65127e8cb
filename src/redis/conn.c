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

gsize sluice__redis_decimal(char *out, gint64 v)
{
    char digits[20];
    gsize n = 0, len = 0;
    guint64 u = v < 0 ? (guint64)0 - (guint64)v : (guint64)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        out[len++] = '-';
    while (n > 0)
        out[len++] = digits[--n];
    return len;
}

/* Appends `<mark><n>\r\n` at buf + at when it fits in size; the new position. */
static gsize put_count(char *buf, gsize size, gsize at, char mark, gsize n)
{
    char text[24];
    text[0] = mark;
    gsize len = 1 + sluice__redis_decimal(text + 1, (gint64)n);
    text[len++] = '\r';
    text[len++] = '\n';
    if (at + len <= size)
        memcpy(buf + at, text, len);
    return at + len;
}

gsize sluice__redis_format(char *buf, gsize size, int argc, const char *const *argv)
{
    gsize at = put_count(buf, size, 0, '*', (gsize)argc);
    for (int i = 0; i < argc; i++) {
        gsize len = strlen(argv[i]);
        at = put_count(buf, size, at, '$', len);
        if (at + len + 2 <= size) {
            memcpy(buf + at, argv[i], len);
            memcpy(buf + at + len, "\r\n", 2);
        }
        at += len + 2;
    }
    return at;
}

char *sluice__redis_format_in(char *small, gsize size, int argc, const char *const *argv,
                              gsize *len)
{
    *len = sluice__redis_format(small, size, argc, argv);
    if (*len <= size)
        return small;
    char *big = g_malloc(*len); /* EVAL with a script's source, a DEL of many keys */
    sluice__redis_format(big, *len, argc, argv);
    return big;
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

void sluice__redis_fail(GError **error, int code, const sluice__redis_backend *b, const char *step,
                        const char *detail)
{
    g_set_error(error, SLUICE_ERROR_DOMAIN, code, "%s: %s: %s", b->what, step, detail);
}

/* Runs one setup command on ctx, nothing else being on it; FALSE (and *error, with
 * code for an error reply) when it failed. */
static gboolean command(const sluice__redis_backend *b, redisContext *ctx, gint64 deadline,
                        int code, GError **error, int argc, const char **argv)
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
    if (o != SLUICE__REDIS_SENT) {
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, b, argv[0],
                           sluice__redis_outcome_reason(o, saved_errno));
        return FALSE;
    }
    redisReply *reply = r;
    gboolean ok = reply->type != REDIS_REPLY_ERROR;
    if (!ok)
        sluice__redis_fail(error, code, b, argv[0], reply->str);
    freeReplyObject(reply);
    return ok;
}

redisContext *sluice__redis_connect(const sluice__redis_backend *b, gint64 deadline, gboolean probe,
                                    GError **error)
{
    gint64 left = deadline - g_get_monotonic_time();
    if (left <= 0) {
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, b, "connect", "timed out");
        return NULL;
    }
    struct timeval tv = {.tv_sec = left / 1000000, .tv_usec = left % 1000000};
    redisContext *ctx = b->url.socket ? redisConnectUnixWithTimeout(b->url.socket, tv)
                                      : redisConnectWithTimeout(b->url.host, b->url.port, tv);
    if (!ctx || ctx->err) {
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, b, "connect",
                           !ctx ? "out of memory"
                           : ctx->err == REDIS_ERR_IO &&
                                   (errno == EINPROGRESS || errno == ETIMEDOUT)
                               ? "timed out"
                               : ctx->errstr);
        goto err;
    }
    if (!b->url.socket)
        redisEnableKeepAlive(ctx);
    /* from now on hiredis only parses: sluice sends and polls itself */
    int flags = fcntl(ctx->fd, F_GETFL);
    if (flags < 0 || fcntl(ctx->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        sluice__redis_fail(error, SLUICE_ERROR_BACKEND, b, "connect", g_strerror(errno));
        goto err;
    }
    ctx->flags &= ~REDIS_BLOCK;
    if (b->url.password) {
        const char *with_user[] = {"AUTH", b->url.user, b->url.password};
        const char *password_only[] = {"AUTH", b->url.password};
        gboolean ok = b->url.user
                          ? command(b, ctx, deadline, SLUICE_ERROR_AUTH, error, 3, with_user)
                          : command(b, ctx, deadline, SLUICE_ERROR_AUTH, error, 2, password_only);
        if (!ok)
            goto err;
    }
    const char *ping[] = {"PING"}; /* NOAUTH here: a password is needed and missing */
    if (probe && !command(b, ctx, deadline, SLUICE_ERROR_AUTH, error, 1, ping))
        goto err;
    if (b->url.db != 0) {
        g_autofree char *db = g_strdup_printf("%d", b->url.db);
        const char *select[] = {"SELECT", db};
        if (!command(b, ctx, deadline, SLUICE_ERROR_BACKEND, error, 2, select))
            goto err;
    }
    return ctx;
err:
    if (ctx)
        redisFree(ctx);
    return NULL;
}
