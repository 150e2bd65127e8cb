/* SPDX-License-Identifier: MIT */
/* The `redis` keyfile value: one server, a Redis Cluster or a Sentinel-managed
 * master, in plain TCP or TLS. */
#ifndef SLUICE_REDIS_URL_H
#define SLUICE_REDIS_URL_H

#include <glib.h>

typedef enum {
    SLUICE__REDIS_SINGLE,   /* redis://, rediss://, unix://: one server            */
    SLUICE__REDIS_CLUSTER,  /* redis+cluster://: any nodes of a Redis Cluster      */
    SLUICE__REDIS_SENTINEL, /* redis+sentinel://: the Sentinels that watch MASTER */
} sluice__redis_topology;

/* One host:port of the URL. */
typedef struct {
    char *host; /* a name or an address; an IPv6 address without its brackets */
    int port;
} sluice__redis_address;

typedef struct {
    sluice__redis_topology topology;
    gboolean tls;                     /* rediss, rediss+cluster, rediss+sentinel          */
    sluice__redis_address *addresses; /* in the URL's order; none for a unix socket       */
    guint n_addresses;                /* 1 for redis:// and rediss://                     */
    char *host;     /* addresses[0].host (not a copy); NULL for a unix socket              */
    int port;       /* addresses[0].port: 6379 unless given (a Sentinel's: 26379)          */
    char *socket;   /* unix:///path.sock: the path                                         */
    char *user;     /* ACL user, or NULL (a Sentinel URL's: the data nodes')               */
    char *password; /* or NULL; never logged (a Sentinel URL's: the data nodes')           */
    int db;         /* SELECT; 0 unless given (a Cluster has only 0)                       */
    char *master;   /* redis+sentinel://…/MASTER: the name the Sentinels know it by        */
} sluice__redis_url;

/* Parses one of
 *   redis://[user:password@]host[:port][/db]    unix://[user:password@]/path.sock[?db=N]
 *   redis+cluster://[user:password@]host[:port][,host[:port]...]
 *   redis+sentinel://[user:password@]host[:port][,host[:port]...]/MASTER[?db=N]
 * and the TLS forms rediss://, rediss+cluster://, rediss+sentinel:// into out (free
 * with sluice__redis_url_clear); an IPv6 host is written in brackets ([::1]:6379).
 * FALSE and a sentence in *why (which never repeats the URL: it may hold a
 * password) when it is not one. */
gboolean sluice__redis_url_parse(const char *url, sluice__redis_url *out, char **why);
void sluice__redis_url_clear(sluice__redis_url *url);

/* The URL's scheme ("redis+cluster"), as parsed. Test-only: tests/check_redis_url.c
 * reads back what a URL was taken for; the library itself never asks. */
const char *sluice__redis_url_scheme(const sluice__redis_url *url);

#endif
