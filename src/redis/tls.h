/* SPDX-License-Identifier: MIT */
/* TLS to Redis with OpenSSL: a client's trust and certificate, the handshake on a
 * non-blocking socket, and sending and receiving one step at a time. */
#ifndef SLUICE_REDIS_TLS_H
#define SLUICE_REDIS_TLS_H

#include <glib.h>
#include <hiredis/read.h>

#include "config.h"
#include "redis/endpoint.h" /* sluice__tls_context */
#include "redis/socket.h"   /* sluice__redis_outcome */

typedef struct sluice__tls sluice__tls;

/* Loads s's files; NULL and *error (SLUICE_ERROR_CONFIG: "tls_ca_file /path: why")
 * when one cannot be used. TLS 1.2 at least; the server's chain is always verified. */
sluice__tls_context *sluice__tls_context_new(const sluice__tls_settings *s, GError **error);
sluice__tls_context *sluice__tls_context_ref(sluice__tls_context *t);
void sluice__tls_context_unref(sluice__tls_context *t);

/* A session on fd (connected, non-blocking; it stays the caller's) that checks the
 * server's certificate against name (a host name, also sent as SNI, or an IP
 * address); the handshake is still to run. */
sluice__tls *sluice__tls_new(sluice__tls_context *t, const char *name, int fd);
/* Frees the session without a word to the server (a fork child's copy must not
 * speak on the parent's connection). Does not close the socket. */
void sluice__tls_free(sluice__tls *s);

/* Takes the handshake as far as it goes now: 1 when it is done, 0 when it waits
 * for fd to be ready for *wait (POLLIN or POLLOUT), -1 and *error when it failed:
 * "WHAT: TLS: why" (SLUICE_ERROR_TLS: "certificate has expired", "certificate does
 * not match 127.0.0.1", "server did not answer TLS"; SLUICE_ERROR_BACKEND when the
 * connection was lost). */
int sluice__tls_handshake_step(sluice__tls *s, short *wait, const char *what, GError **error);
/* The handshake in full, waiting with poll() no later than deadline (µs, monotonic). */
gboolean sluice__tls_handshake(sluice__tls *s, gint64 deadline, const char *what, GError **error);
/* *error for a handshake whose time ran out: "WHAT: TLS: server did not answer TLS
 * (timed out: ...)" when no answer came at all, else "WHAT: TLS: handshake timed out". */
void sluice__tls_handshake_timed_out(sluice__tls *s, const char *what, GError **error);

/* Writes what can be written of data now: SENT with *sent bytes (0: wait for the
 * socket to be ready for *wait), or LOST or BROKEN (*saved_errno). A thread may
 * send while another receives on the same session. */
sluice__redis_outcome sluice__tls_send_some(sluice__tls *s, const char *data, gsize len,
                                            gsize *sent, short *wait, int *saved_errno);
/* Reads what has come into reader, until the session holds nothing more of what
 * it read (the socket may hold more: poll() says): SENT with *got bytes (0: wait
 * for *wait), or LOST or BROKEN. A failure of TLS itself is BROKEN with a negative *saved_errno
 * that sluice__tls_reason explains. */
sluice__redis_outcome sluice__tls_receive_some(sluice__tls *s, redisReader *reader, gsize *got,
                                               short *wait, int *saved_errno);

/* TRUE when the session holds bytes read from the socket and not yet returned (a
 * record, or part of one): read before waiting on the socket, which no longer has them. */
gboolean sluice__tls_pending(sluice__tls *s);

/* TRUE when the server asked for a client certificate and had none: with TLS 1.3
 * a server that requires one (tls-auth-clients yes) says so after the handshake,
 * in an alert that a reset connection may lose. */
gboolean sluice__tls_asked_for_certificate(sluice__tls *s);
#define SLUICE__TLS_NEEDS_CERTIFICATE                                                              \
    "TLS: the server requires a client certificate (tls_cert_file, tls_key_file)"

/* For a message: the TLS failure of a negative saved_errno ("TLS: the server
 * refused the client certificate"). */
const char *sluice__tls_reason(int saved_errno);

#endif
