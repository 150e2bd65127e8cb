/* SPDX-License-Identifier: MIT */
/* The master of a Sentinel-managed backend: the node calls go to, moved by failovers. */
#ifndef SLUICE_REDIS_SENTINEL_MASTER_H
#define SLUICE_REDIS_SENTINEL_MASTER_H

#include <glib.h>

#include "redis/node.h"
#include "redis/url.h"

typedef struct sluice__redis_master sluice__redis_master;

/* Finds the master of url (redis+sentinel://) now, within a few steps of
 * timeout_us, and starts following it (sentinel_watch.c). password: the data
 * nodes' when the URL has none; sentinel_password: the Sentinels' own, or NULL;
 * tls and tls_name: as sluice__redis_sentinel_new takes them. NULL and *error when
 * a password was refused (SLUICE_ERROR_AUTH) or TLS refused a certificate
 * (SLUICE_ERROR_TLS); a master that cannot be found yet does not fail (it is
 * logged, and calls fail meanwhile). */
sluice__redis_master *sluice__redis_master_new(const sluice__redis_url *url, const char *password,
                                               const char *sentinel_password,
                                               sluice__tls_context *tls, const char *tls_name,
                                               gint64 timeout_us, GError **error);
/* Stops following the master (a reload replaced the backend); the master's
 * connection closes (calls still on it finish first). */
void sluice__redis_master_retire(sluice__redis_master *m);
/* No call may be in progress on any of its nodes. */
void sluice__redis_master_free(sluice__redis_master *m);

/* The node of the master now, or NULL (and *error) while none is known. Takes no
 * lock. */
sluice__redis_node *sluice__redis_master_node(sluice__redis_master *m, GError **error);
/* A call to node failed (no connection, a timeout, READONLY, ...): if node is still
 * the master, the master is looked for again, on the watch's thread. Takes no lock. */
void sluice__redis_master_failed(sluice__redis_master *m, sluice__redis_node *node);

#endif
