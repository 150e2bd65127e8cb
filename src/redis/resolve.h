/* SPDX-License-Identifier: MIT */
/* Host names resolved within a deadline. */
#ifndef SLUICE_REDIS_RESOLVE_H
#define SLUICE_REDIS_RESOLVE_H

#include <glib.h>
#include <netdb.h>

/* The addresses of host:port for a TCP connection (freeaddrinfo them), or NULL
 * and *why ("timed out", or getaddrinfo's reason) when there are none by deadline
 * (µs, monotonic). An address is taken as it is; a name is looked up on a thread
 * of its own that the caller waits for no longer than deadline (a resolver that
 * never answers costs a call its timeout, and the thread ends when it answers). */
struct addrinfo *sluice__redis_resolve(const char *host, int port, gint64 deadline,
                                       const char **why);

#endif
