/* SPDX-License-Identifier: MIT */
/* Which server is the master that a group of Sentinels watches: ask them, then ask it. */
#ifndef SLUICE_REDIS_SENTINEL_H
#define SLUICE_REDIS_SENTINEL_H

#include <glib.h>

#include "redis/endpoint.h"

typedef struct sluice__redis_sentinel sluice__redis_sentinel;

/* The n Sentinels at hosts[i]:ports[i] that watch the master they call `master`.
 * sentinel_password: the Sentinels' own (AUTH), or NULL; user and password: the
 * data nodes' (the master's ROLE is asked with them), or NULL. tls: the Sentinels
 * and the servers they name are reached over TLS with it (rediss+sentinel://),
 * each certificate checked against tls_name, or when that is NULL against the
 * address the URL or the Sentinel gives; NULL: plaintext. */
sluice__redis_sentinel *sluice__redis_sentinel_new(const char *const *hosts, const int *ports,
                                                   guint n, const char *master,
                                                   const char *sentinel_password, const char *user,
                                                   const char *password, sluice__tls_context *tls,
                                                   const char *tls_name);
void sluice__redis_sentinel_free(sluice__redis_sentinel *s);

/* "redis+sentinel master NAME", for messages. */
const char *sluice__redis_sentinel_what(const sluice__redis_sentinel *s);
/* The master's name, as the Sentinels know it. */
const char *sluice__redis_sentinel_master(const sluice__redis_sentinel *s);
/* The data node at host:port as the Sentinels' servers are reached (credentials,
 * TLS), with db; clear it with sluice__redis_endpoint_clear. */
void sluice__redis_sentinel_node(const sluice__redis_sentinel *s, sluice__redis_endpoint *e,
                                 const char *host, int port, int db);
/* How many Sentinels there are, and where Sentinel i is (with their password). */
guint sluice__redis_sentinel_count(const sluice__redis_sentinel *s);
const sluice__redis_endpoint *sluice__redis_sentinel_at(const sluice__redis_sentinel *s, guint i);

/* Finds the master: asks the Sentinels in turn, the last one that answered first,
 * for its address (SENTINEL get-master-addr-by-name), then asks the server named
 * whether it is the master (ROLE); each Sentinel with the server it names within
 * step_us. The first server that says it is the master is the answer: *host
 * (g_free it) and *port, and its Sentinel is asked first next time. Else FALSE and
 * *error, saying what each Sentinel answered (SLUICE_ERROR_AUTH when a password
 * was refused, a Sentinel's or the server's; else SLUICE_ERROR_TLS when TLS
 * refused one). A server that says it is a replica is
 * never the answer, whoever names it. */
gboolean sluice__redis_sentinel_resolve(sluice__redis_sentinel *s, gint64 step_us, char **host,
                                        int *port, GError **error);

/* TRUE when host:port answers ROLE with master before deadline (asked with the data
 * nodes' credentials); else FALSE and *error (naming the server). */
gboolean sluice__redis_sentinel_is_master(const sluice__redis_sentinel *s, const char *host,
                                          int port, gint64 deadline, GError **error);

/* Sentinel i answered: it is asked first next time. */
void sluice__redis_sentinel_prefer(sluice__redis_sentinel *s, guint i);

#endif
