/* SPDX-License-Identifier: MIT */
/* One Redis server as sluice reaches it: where, as whom, and its name in messages. */
#ifndef SLUICE_REDIS_ENDPOINT_H
#define SLUICE_REDIS_ENDPOINT_H

#include <glib.h>

typedef struct sluice__tls_context sluice__tls_context;

/* Owned strings; the connection and the link read it, never change it. */
typedef struct {
    char *host;               /* NULL for a unix socket                          */
    int port;                 /*                                                 */
    char *socket;             /* the unix socket's path, or NULL                 */
    char *user;               /* ACL user, or NULL                               */
    char *password;           /* or NULL; never logged, zeroed when cleared      */
    int db;                   /* SELECT after connecting, unless 0               */
    char *what;               /* "redis 127.0.0.1:6379": how messages name it    */
    sluice__tls_context *tls; /* a reference: TLS with these settings, or NULL */
    char *tls_name;           /* the name the server's certificate must match  */
} sluice__redis_endpoint;

/* Fills e with copies of what is given (host NULL: socket) and names it. */
void sluice__redis_endpoint_init(sluice__redis_endpoint *e, const char *host, int port,
                                 const char *socket, const char *user, const char *password,
                                 int db);
void sluice__redis_endpoint_clear(sluice__redis_endpoint *e);
/* e is reached over TLS with tls (referenced), its certificate checked against
 * name (tls_server_name), or the host when name is NULL. */
void sluice__redis_endpoint_use_tls(sluice__redis_endpoint *e, sluice__tls_context *tls,
                                    const char *name);

/* Sets *error: "WHAT: STEP: DETAIL" (code: a SLUICE_ERROR_*), the form of every
 * failure of the redis backend. */
void sluice__redis_fail(GError **error, int code, const sluice__redis_endpoint *e, const char *step,
                        const char *detail);

#endif
