/* SPDX-License-Identifier: MIT */
/* TLS for the tests and benchmarks: certificates made with the openssl command, and a redis-server
 * that speaks TLS with them. */
#ifndef SLUICE_TEST_TLS_CERTS_H
#define SLUICE_TEST_TLS_CERTS_H

#include <glib.h>

#include "redis_server.h"

/* The path of one of tests/support/tls_certs.sh's files ("ca.pem", "client.key", ...) in a
 * temporary directory made once per process (removed when the process that made
 * it exits; call it before forking, so that forked tests share one). g_free it. */
char *test_tls_file(const char *name);

/* The redis-server (or redis-sentinel) arguments that make it speak TLS on port
 * (a "{port1}" of tests/support/redis_server.h) with the certificate NAME.pem, trusting
 * ca.pem, asking clients for a certificate as auth_clients says (no, optional,
 * yes), and showing client.pem when it connects to another server itself (a
 * Cluster's bus, a replica, a Sentinel). NULL-ended; g_strfreev it. */
char **test_tls_server_args(const char *name, const char *auth_clients, const char *port);

/* A redis-server listening on 127.0.0.1 in plaintext (port: the tests' own
 * commands) and TLS (test_tls_port) with the certificate NAME.pem ("server",
 * "other-server", "wrong-name", "expired"), trusting ca.pem for client
 * certificates; auth_clients: tls-auth-clients (no, optional, yes). */
test_redis *test_tls_start(const char *name, const char *auth_clients);

/* The port where a server of test_tls_start speaks TLS. */
int test_tls_port(const test_redis *redis);
/* rediss://127.0.0.1:TLS_PORT/0 (g_free it). */
char *test_tls_url(const test_redis *redis);

#endif
