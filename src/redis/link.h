/* SPDX-License-Identifier: MIT */
/* One pipelined connection to a Redis server that every thread of the process shares. */
#ifndef SLUICE_REDIS_LINK_H
#define SLUICE_REDIS_LINK_H

#include <glib.h>
#include <hiredis/hiredis.h>

#include "redis/endpoint.h"

typedef struct sluice__redis_link sluice__redis_link;

/* A link to e's server; it connects on first use. e must outlive it. */
sluice__redis_link *sluice__redis_link_new(const sluice__redis_endpoint *e);
/* No call may be in progress on it. */
void sluice__redis_link_free(sluice__redis_link *link);

/* Lets go of the connection (a call still on it finishes first); the next
 * call connects again. */
void sluice__redis_link_close(sluice__redis_link *link);

/* Connects now unless connected, with a PING (sluice_init: a refused password
 * fails here with SLUICE_ERROR_AUTH). */
gboolean sluice__redis_link_connect(sluice__redis_link *link, gint64 deadline, GError **error);

/* Sends one command and waits for its reply until deadline (µs, monotonic):
 * the reply (maybe an error reply), or NULL and *error ("redis HOST:PORT:
 * ARGV0: why"). *stale is TRUE when the server closed a connection that was
 * made before this call began, so the command may be worth one more try. */
redisReply *sluice__redis_link_command(sluice__redis_link *link, gint64 deadline, int argc,
                                       const char **argv, gboolean *stale, GError **error);

/* The same after ASKING (a Redis Cluster's ASK redirection), the two back to back on
 * the shared connection: the reply to argv, ASKING's dropped. */
redisReply *sluice__redis_link_asking(sluice__redis_link *link, gint64 deadline, int argc,
                                      const char **argv, gboolean *stale, GError **error);

/* The same for a command already in RESP (cmd, len bytes; what: its name in
 * messages), after ASKING when asking. */
redisReply *sluice__redis_link_send(sluice__redis_link *link, gint64 deadline, gboolean asking,
                                    const char *cmd, gsize len, const char *what, gboolean *stale,
                                    GError **error);

#endif
