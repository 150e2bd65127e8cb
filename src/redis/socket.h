/* SPDX-License-Identifier: MIT */
/* Waiting on a non-blocking socket until a deadline, and how an exchange on it ended:
 * what the connection (conn.c) and TLS on it (tls.c) both need. */
#ifndef SLUICE_REDIS_SOCKET_H
#define SLUICE_REDIS_SOCKET_H

#include <glib.h>

/* How an exchange with Redis ended. */
typedef enum {
    SLUICE__REDIS_SENT,      /* done (a reply came, maybe an error reply)      */
    SLUICE__REDIS_TIMED_OUT, /* the deadline passed                            */
    SLUICE__REDIS_LOST,      /* the server closed or reset the connection      */
    SLUICE__REDIS_BROKEN,    /* another I/O or protocol error                  */
} sluice__redis_outcome;

/* Waits until fd is ready for `events` (POLLIN, POLLOUT); FALSE once deadline has
 * passed. poll() keeps to the microsecond, where socket timeouts round up to the
 * kernel's tick. */
gboolean sluice__redis_ready(int fd, short events, gint64 deadline);

#endif
