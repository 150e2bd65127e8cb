/* SPDX-License-Identifier: MIT */
/* TLS to Redis with OpenSSL.
 *
 * The socket stays sluice's: it is non-blocking, and every wait is a poll() that
 * ends by the caller's deadline, so the handshake is bounded as connect, AUTH and
 * a command are. Verification is never off: the chain against tls_ca_file (or the
 * system's trust store), and the name, or the IP address, against the certificate
 * (X509_VERIFY_PARAM_set1_host / _set1_ip_asc; a name goes out as SNI too).
 *
 * The pipelined link sends on one thread while another reads: an OpenSSL session
 * is not safe for that, so each SSL_* call holds the session's lock (never while
 * waiting). Writes go through a socket BIO of sluice's that sends with MSG_NOSIGNAL:
 * a closed connection is an error, never a SIGPIPE. */
#include "redis/tls.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sluice/error.h>

struct sluice__tls_context {
    gint refs; /* atomic */
    SSL_CTX *ctx;
};

struct sluice__tls {
    SSL *ssl;
    int fd;
    char *name;     /* the name or address the certificate must match */
    GMutex lock;    /* around every SSL_* call on ssl */
    gboolean asked; /* the server asked for a client certificate, and there is none */
};

/* ---- a socket BIO that never raises SIGPIPE ------------------------------------------ */

static int bio_write(BIO *bio, const char *data, int len)
{
    int fd = GPOINTER_TO_INT(BIO_get_data(bio));
    ssize_t n = send(fd, data, (size_t)len, MSG_NOSIGNAL);
    BIO_clear_retry_flags(bio);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_write(bio);
    return (int)n;
}

static int bio_read(BIO *bio, char *data, int len)
{
    int fd = GPOINTER_TO_INT(BIO_get_data(bio));
    ssize_t n = recv(fd, data, (size_t)len, 0);
    BIO_clear_retry_flags(bio);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_read(bio);
    return (int)n;
}

static int bio_puts(BIO *bio, const char *text)
{
    return bio_write(bio, text, (int)strlen(text));
}

static long bio_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
    (void)num;
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_C_GET_FD:
        if (ptr)
            *(int *)ptr = GPOINTER_TO_INT(BIO_get_data(bio));
        return GPOINTER_TO_INT(BIO_get_data(bio));
    default:
        return 0;
    }
}

static BIO_METHOD *bio_method(void)
{
    static gsize method;
    if (g_once_init_enter(&method)) {
        BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sluice socket");
        BIO_meth_set_write(m, bio_write);
        BIO_meth_set_read(m, bio_read);
        BIO_meth_set_puts(m, bio_puts);
        BIO_meth_set_ctrl(m, bio_ctrl);
        g_once_init_leave(&method, (gsize)m);
    }
    return (BIO_METHOD *)method;
}

/* ---- the context ---------------------------------------------------------------------- */

/* The reason of OpenSSL's last error, for a message. */
static const char *last_error(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *why = e ? ERR_reason_error_string(e) : NULL;
    return why ? why : "unknown error";
}

static gboolean file_failed(GError **error, const char *key, const char *path)
{
    /* OpenSSL's reason for a missing file is "system lib": errno says more */
    unsigned long e = ERR_peek_last_error();
    const char *why = ERR_GET_LIB(e) == ERR_LIB_SYS ? g_strerror(ERR_GET_REASON(e)) : last_error();
    g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG, "%s %s: %s", key, path, why);
    ERR_clear_error();
    return FALSE;
}

static gboolean load(SSL_CTX *ctx, const sluice__tls_settings *s, GError **error)
{
    if (s->ca_file ? SSL_CTX_load_verify_locations(ctx, s->ca_file, NULL) != 1
                   : SSL_CTX_set_default_verify_paths(ctx) != 1)
        return file_failed(error, "tls_ca_file", s->ca_file ? s->ca_file : "(the system's)");
    if (!s->cert_file && !s->key_file)
        return TRUE;
    if (!s->cert_file || !s->key_file) {
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG,
                            "a client certificate needs both tls_cert_file and tls_key_file");
        return FALSE;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, s->cert_file) != 1)
        return file_failed(error, "tls_cert_file", s->cert_file);
    gboolean loaded = SSL_CTX_use_PrivateKey_file(ctx, s->key_file, SSL_FILETYPE_PEM) == 1;
    unsigned long e = ERR_peek_last_error();
    if (!loaded &&
        !(ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH))
        return file_failed(error, "tls_key_file", s->key_file);
    if (!loaded || SSL_CTX_check_private_key(ctx) != 1) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG,
                    "tls_key_file %s: not the key of tls_cert_file %s", s->key_file, s->cert_file);
        ERR_clear_error();
        return FALSE;
    }
    return TRUE;
}

/* OpenSSL asks for a client certificate the context has not: none is sent. */
static int no_certificate(SSL *ssl, X509 **cert, EVP_PKEY **key)
{
    (void)cert;
    (void)key;
    sluice__tls *s = SSL_get_app_data(ssl);
    if (s)
        s->asked = TRUE;
    return 0;
}

sluice__tls_context *sluice__tls_context_new(const sluice__tls_settings *s, GError **error)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_TLS, "TLS: %s", last_error());
        ERR_clear_error();
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    /* a write may be taken in part, and retried from where it stopped */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* a read takes what the socket has (records' headers and bodies together) in one
     * recv(), not a header and then its body in two */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_client_cert_cb(ctx, no_certificate);
    if (!load(ctx, s, error)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    sluice__tls_context *t = g_new0(sluice__tls_context, 1);
    t->refs = 1;
    t->ctx = ctx;
    return t;
}

sluice__tls_context *sluice__tls_context_ref(sluice__tls_context *t)
{
    if (t)
        g_atomic_int_inc(&t->refs);
    return t;
}

void sluice__tls_context_unref(sluice__tls_context *t)
{
    if (!t || !g_atomic_int_dec_and_test(&t->refs))
        return;
    SSL_CTX_free(t->ctx);
    g_free(t);
}

/* ---- the handshake -------------------------------------------------------------------- */

sluice__tls *sluice__tls_new(sluice__tls_context *t, const char *name, int fd)
{
    sluice__tls *s = g_new0(sluice__tls, 1);
    g_mutex_init(&s->lock);
    s->fd = fd;
    s->name = g_strdup(name);
    s->ssl = SSL_new(t->ctx);
    BIO *bio = s->ssl ? BIO_new(bio_method()) : NULL;
    if (!bio) { /* out of memory: the first step fails */
        SSL_free(s->ssl);
        s->ssl = NULL;
        return s;
    }
    BIO_set_data(bio, GINT_TO_POINTER(fd));
    BIO_set_init(bio, 1);
    SSL_set_bio(s->ssl, bio, bio);
    SSL_set_app_data(s->ssl, s);
    X509_VERIFY_PARAM *param = SSL_get0_param(s->ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (g_hostname_is_ip_address(name)) { /* no SNI for an address (RFC 6066) */
        if (X509_VERIFY_PARAM_set1_ip_asc(param, name) != 1)
            g_clear_pointer(&s->ssl, SSL_free);
    } else if (X509_VERIFY_PARAM_set1_host(param, name, 0) != 1 ||
               SSL_set_tlsext_host_name(s->ssl, name) != 1) {
        g_clear_pointer(&s->ssl, SSL_free);
    }
    ERR_clear_error();
    return s;
}

void sluice__tls_free(sluice__tls *s)
{
    if (!s)
        return;
    SSL_free(s->ssl); /* no SSL_shutdown: nothing is written */
    g_mutex_clear(&s->lock);
    g_free(s->name);
    g_free(s);
}

/* Why the handshake failed, for "TLS: ..." (into buf, or a string OpenSSL keeps). */
static const char *handshake_reason(sluice__tls *s, char *buf, gsize size)
{
    long v = SSL_get_verify_result(s->ssl);
    switch (v) {
    case X509_V_OK:
        break;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        g_snprintf(buf, size, "certificate does not match %s", s->name);
        return buf;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        g_snprintf(buf, size, "certificate not signed by a trusted CA (%s)",
                   X509_verify_cert_error_string(v));
        return buf;
    default:
        return X509_verify_cert_error_string(v); /* "certificate has expired", ... */
    }
    unsigned long e = ERR_peek_last_error();
    if (ERR_GET_LIB(e) == ERR_LIB_SSL) {
        switch (ERR_GET_REASON(e)) {
        case SSL_R_WRONG_VERSION_NUMBER:
        case SSL_R_PACKET_LENGTH_TOO_LONG:
        case SSL_R_HTTP_REQUEST:
            return "server did not answer TLS";
        case SSL_R_UNEXPECTED_EOF_WHILE_READING:
            return "the server closed the connection during the handshake";
        default:
            break;
        }
    }
    g_snprintf(buf, size, "%s", last_error());
    return buf;
}

/* Fails the handshake: "WHAT: TLS: why". */
static int refused(GError **error, const char *what, int code, const char *why)
{
    g_set_error(error, SLUICE_ERROR, code, "%s: TLS: %s", what, why);
    ERR_clear_error();
    return -1;
}

int sluice__tls_handshake_step(sluice__tls *s, short *wait, const char *what, GError **error)
{
    if (!s->ssl)
        return refused(error, what, SLUICE_ERROR_TLS, "cannot start (out of memory?)");
    ERR_clear_error();
    errno = 0;
    int r = SSL_connect(s->ssl);
    if (r == 1)
        return 1;
    int e = SSL_get_error(s->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *wait = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    if (e == SSL_ERROR_SYSCALL && errno != 0 && errno != ECONNRESET && errno != EPIPE)
        return refused(error, what, SLUICE_ERROR_BACKEND, g_strerror(errno));
    if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN)
        return refused(error, what, SLUICE_ERROR_TLS,
                       "the server closed the connection during the handshake");
    char buf[256];
    return refused(error, what, SLUICE_ERROR_TLS, handshake_reason(s, buf, sizeof buf));
}

void sluice__tls_handshake_timed_out(sluice__tls *s, const char *what, GError **error)
{
    /* still waiting for the ServerHello: nothing that speaks TLS answered */
    refused(
        error, what, SLUICE_ERROR_TLS,
        s->ssl && SSL_get_state(s->ssl) == TLS_ST_CW_CLNT_HELLO
            ? "server did not answer TLS (timed out: a port without TLS, or a server that hangs)"
            : "handshake timed out");
}

gboolean sluice__tls_handshake(sluice__tls *s, gint64 deadline, const char *what, GError **error)
{
    for (;;) {
        short wait = 0;
        int r = sluice__tls_handshake_step(s, &wait, what, error);
        if (r != 0)
            return r == 1;
        if (!sluice__redis_ready(s->fd, wait, deadline)) {
            sluice__tls_handshake_timed_out(s, what, error);
            return FALSE;
        }
    }
}

/* ---- sending and receiving ------------------------------------------------------------ */

/* A failed SSL_read or SSL_write (e: SSL_get_error): LOST or BROKEN, *saved_errno set. */
static sluice__redis_outcome io_failed(int e, int err_errno, int reason, int *saved_errno)
{
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && err_errno == 0) ||
        reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        *saved_errno = ECONNRESET;
        return SLUICE__REDIS_LOST;
    }
    if (e == SSL_ERROR_SYSCALL) {
        *saved_errno = err_errno;
        return err_errno == ECONNRESET || err_errno == EPIPE ? SLUICE__REDIS_LOST
                                                             : SLUICE__REDIS_BROKEN;
    }
    *saved_errno = reason ? -reason : EPROTO;
    return SLUICE__REDIS_BROKEN;
}

/* One SSL_read into `in` (when it is not NULL) or SSL_write of `out` under s's lock:
 * the bytes moved (> 0), or 0 and what to wait for in *wait, or -1 and the failure
 * in *o and *saved_errno. */
static int ssl_io(sluice__tls *s, void *in, const void *out, gsize len, short *wait,
                  sluice__redis_outcome *o, int *saved_errno)
{
    int n = (int)MIN(len, (gsize)G_MAXINT);
    g_mutex_lock(&s->lock);
    /* SSL_get_error needs an empty error queue; emptying one that is empty (as it is
     * unless the program left something there) costs more than looking */
    if (ERR_peek_error() != 0)
        ERR_clear_error();
    errno = 0;
    n = in ? SSL_read(s->ssl, in, n) : SSL_write(s->ssl, out, n);
    if (n > 0) {
        g_mutex_unlock(&s->lock);
        return n;
    }
    int err_errno = errno;
    int e = SSL_get_error(s->ssl, n);
    unsigned long last = ERR_peek_last_error();
    int reason = ERR_GET_LIB(last) == ERR_LIB_SSL ? ERR_GET_REASON(last) : 0;
    ERR_clear_error();
    g_mutex_unlock(&s->lock);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *wait = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    *o = io_failed(e, err_errno, reason, saved_errno);
    return -1;
}

sluice__redis_outcome sluice__tls_send_some(sluice__tls *s, const char *data, gsize len,
                                            gsize *sent, short *wait, int *saved_errno)
{
    sluice__redis_outcome o = SLUICE__REDIS_SENT;
    *sent = 0;
    while (*sent < len) {
        int n = ssl_io(s, NULL, data + *sent, len - *sent, wait, &o, saved_errno);
        if (n <= 0)
            return n == 0 ? SLUICE__REDIS_SENT : o;
        *sent += (gsize)n;
    }
    return SLUICE__REDIS_SENT;
}

sluice__redis_outcome sluice__tls_receive_some(sluice__tls *s, redisReader *reader, gsize *got,
                                               short *wait, int *saved_errno)
{
    char buf[16 * 1024];
    sluice__redis_outcome o = SLUICE__REDIS_SENT;
    *got = 0;
    /* until the session holds nothing more of what it read from the socket (read
     * ahead: as much as the socket had, in one recv()); what is still in the socket,
     * poll() reports. Reading on to EAGAIN would cost a system call a reply. */
    do {
        int n = ssl_io(s, buf, NULL, sizeof buf, wait, &o, saved_errno);
        if (n < 0)
            return *got > 0 ? SLUICE__REDIS_SENT : o; /* the failure shows on the next read */
        if (n == 0)
            return SLUICE__REDIS_SENT;
        if (redisReaderFeed(reader, buf, (size_t)n) != REDIS_OK) {
            *saved_errno = ENOMEM;
            return SLUICE__REDIS_BROKEN;
        }
        *got += (gsize)n;
    } while (sluice__tls_pending(s));
    return SLUICE__REDIS_SENT;
}

gboolean sluice__tls_pending(sluice__tls *s)
{
    g_mutex_lock(&s->lock);
    gboolean pending = SSL_has_pending(s->ssl) == 1;
    g_mutex_unlock(&s->lock);
    return pending;
}

gboolean sluice__tls_asked_for_certificate(sluice__tls *s)
{
    return s->asked;
}

const char *sluice__tls_reason(int saved_errno)
{
    int reason = -saved_errno;
    if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED)
        return SLUICE__TLS_NEEDS_CERTIFICATE;
    if (reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE || reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA)
        return "TLS: the server refused the client certificate";
    static _Thread_local char text[160];
    const char *why = ERR_reason_error_string(ERR_PACK(ERR_LIB_SSL, 0, reason));
    g_snprintf(text, sizeof text, "TLS: %s", why ? why : "protocol error");
    return text;
}
