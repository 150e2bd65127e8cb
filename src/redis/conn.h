/* A blocking connection to Redis bounded by a deadline: connect, AUTH, SELECT, send, wait. */
#ifndef SLUICE_REDIS_CONN_H
#define SLUICE_REDIS_CONN_H

#include <glib.h>
#include <hiredis/hiredis.h>

#include "redis/endpoint.h"

/* How an exchange with Redis ended. */
typedef enum {
    SLUICE__REDIS_SENT,      /* done (a reply came, maybe an error reply)      */
    SLUICE__REDIS_TIMED_OUT, /* the deadline passed                            */
    SLUICE__REDIS_LOST,      /* the server closed or reset the connection      */
    SLUICE__REDIS_BROKEN,    /* another I/O or protocol error                  */
} sluice__redis_outcome;

/* Connects to e's server, authenticates and selects its database before deadline
 * (µs, monotonic); the context, whose socket is non-blocking from then on, or NULL
 * and *error (SLUICE_ERROR_AUTH when the server refused the credentials). probe:
 * also PING, so that a server wanting a password it was not given fails now. */
redisContext *sluice__redis_connect(const sluice__redis_endpoint *e, gint64 deadline,
                                    gboolean probe, GError **error);

/* Runs one command on ctx (made by sluice__redis_connect), nothing else being on
 * it, before deadline: the reply (an error reply too; freeReplyObject it), or NULL
 * and *error ("WHAT: ARGV0: why"), after which ctx is of no more use. */
redisReply *sluice__redis_conn_command(const sluice__redis_endpoint *e, redisContext *ctx,
                                       gint64 deadline, int argc, const char **argv,
                                       GError **error);

/* Waits until fd is ready for `events` (POLLIN, POLLOUT); FALSE once deadline has
 * passed. poll() keeps to the microsecond, where socket timeouts round up to the
 * kernel's tick. */
gboolean sluice__redis_ready(int fd, short events, gint64 deadline);

/* Writes all of data to fd before deadline, with MSG_NOSIGNAL (a closed connection is
 * an error, never a SIGPIPE); on failure *saved_errno says why. */
sluice__redis_outcome sluice__redis_send(int fd, gint64 deadline, const char *data, gsize len,
                                         int *saved_errno);

/* Reads what the server has sent into ctx's reader, waiting no later than deadline;
 * SENT when something was read, else why not (*saved_errno for BROKEN). */
sluice__redis_outcome sluice__redis_receive(redisContext *ctx, gint64 deadline, int *saved_errno);

/* For a message: "timed out", "connection closed by the server", or errno's text. */
const char *sluice__redis_outcome_reason(sluice__redis_outcome o, int saved_errno);

#endif
