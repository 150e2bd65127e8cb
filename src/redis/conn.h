/* SPDX-License-Identifier: MIT */
/* A connection to Redis bounded by a deadline: connect, TLS, AUTH, SELECT, send, wait;
 * plaintext or TLS underneath (the transport). */
#ifndef SLUICE_REDIS_CONN_H
#define SLUICE_REDIS_CONN_H

#include <glib.h>
#include <hiredis/hiredis.h>
#include <sys/socket.h>

#include "redis/endpoint.h"
#include "redis/socket.h"
#include "redis/tls.h"

/* A connected socket (non-blocking), hiredis' reader of its replies, and TLS on it
 * when the endpoint wants it. */
typedef struct {
    int fd;
    redisReader *reader;
    sluice__tls *tls; /* NULL: plaintext */
} sluice__redis_transport;

/* Connects to e's server (its name resolved within the deadline), runs the TLS
 * handshake when e wants TLS, authenticates and selects its database before
 * deadline (µs, monotonic); the transport, or NULL and *error: SLUICE_ERROR_AUTH
 * when the server refused the credentials, SLUICE_ERROR_TLS when TLS failed,
 * SLUICE_ERROR_CONFIG when the server has no such database. probe: also PING, so
 * that a server wanting a password it was not given fails now. */
sluice__redis_transport *sluice__redis_connect(const sluice__redis_endpoint *e, gint64 deadline,
                                               gboolean probe, GError **error);

/* Runs one command on t (made by sluice__redis_connect), nothing else being on
 * it, before deadline: the reply (an error reply too; freeReplyObject it), or NULL
 * and *error ("WHAT: ARGV0: why"), after which t is of no more use. */
redisReply *sluice__redis_conn_command(const sluice__redis_endpoint *e, sluice__redis_transport *t,
                                       gint64 deadline, int argc, const char **argv,
                                       GError **error);

/* A transport on fd (connected, non-blocking), over tls unless NULL; takes both. */
sluice__redis_transport *sluice__redis_transport_new(int fd, sluice__tls *tls);
/* Closes it. A fork child's copy says nothing on the connection (no TLS
 * close_notify): the parent's stays whole. */
void sluice__redis_transport_free(sluice__redis_transport *t);
/* In a forked child, a transport a thread of the parent may have been using: closes the
 * child's copy of its socket and leaks the rest, whose TLS session and reader may be half
 * way through a call, their lock held by a thread the child does not have. */
void sluice__redis_transport_abandon(sluice__redis_transport *t);

/* A socket of addr's family, non-blocking and close-on-exec, connecting to addr:
 * its fd (connected, or connecting: wait for POLLOUT, then sluice__redis_connected),
 * or -1 and errno. */
int sluice__redis_connect_start(const struct sockaddr *addr, socklen_t len);
/* 0 once fd's connect has succeeded, else its errno. */
int sluice__redis_connected(int fd);

/* Writes all of data before deadline (a closed connection is an error, never a
 * SIGPIPE); on failure *saved_errno says why. A thread may send while another
 * receives. */
sluice__redis_outcome sluice__redis_send(sluice__redis_transport *t, gint64 deadline,
                                         const char *data, gsize len, int *saved_errno);
/* Reads what the server has sent into t's reader, waiting no later than deadline;
 * SENT when something was read, else why not (*saved_errno for BROKEN). */
sluice__redis_outcome sluice__redis_receive(sluice__redis_transport *t, gint64 deadline,
                                            int *saved_errno);
/* Without waiting: what can be written now (*sent bytes; 0: wait for *wait), and
 * what has come (*got bytes into the reader; 0: wait for *wait). */
sluice__redis_outcome sluice__redis_send_some(sluice__redis_transport *t, const char *data,
                                              gsize len, gsize *sent, short *wait,
                                              int *saved_errno);
sluice__redis_outcome sluice__redis_receive_some(sluice__redis_transport *t, gsize *got,
                                                 short *wait, int *saved_errno);

/* For a message: "timed out", "connection closed by the server", a TLS failure, or
 * errno's text. */
const char *sluice__redis_outcome_reason(sluice__redis_outcome o, int saved_errno);

#endif
