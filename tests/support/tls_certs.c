/* SPDX-License-Identifier: MIT */
/* TLS for the tests and benchmarks: certificates made with the openssl command, and a redis-server
 * that speaks TLS with them. */
#include "tls_certs.h"

#include <stdlib.h>
#include <unistd.h>

static char *dir;     /* the certificates, made by tests/support/tls_certs.sh */
static pid_t made_by; /* only that process removes them (forked tests exit too) */

static void remove_certs(void)
{
    if (dir && getpid() == made_by)
        test_remove_dir(dir);
}

char *test_tls_file(const char *name)
{
    if (!dir) {
        dir = g_dir_make_tmp("sluice-tls-XXXXXX", NULL);
        const char *argv[] = {"sh", SLUICE_TLS_CERTS_SCRIPT, dir, NULL};
        int status = -1;
        g_autoptr(GError) error = NULL;
        if (!dir ||
            !g_spawn_sync(NULL, test_strv(argv), NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL,
                          &status, &error) ||
            !g_spawn_check_wait_status(status, NULL)) {
            g_printerr("tls_certs: %s failed (is the openssl command installed?) %s\n",
                       SLUICE_TLS_CERTS_SCRIPT, error ? error->message : "");
            exit(EXIT_FAILURE);
        }
        made_by = getpid();
        atexit(remove_certs);
    }
    return g_build_filename(dir, name, NULL);
}

char **test_tls_server_args(const char *name, const char *auth_clients, const char *port)
{
    g_autofree char *pem = g_strconcat(name, ".pem", NULL);
    g_autofree char *key = g_strconcat(name, ".key", NULL);
    g_autofree char *cert_file = test_tls_file(pem);
    g_autofree char *key_file = test_tls_file(key);
    g_autofree char *ca_file = test_tls_file("ca.pem");
    g_autofree char *client_file = test_tls_file("client.pem");
    g_autofree char *client_key = test_tls_file("client.key");
    const char *args[] = {"--tls-port",
                          port,
                          "--tls-cert-file",
                          cert_file,
                          "--tls-key-file",
                          key_file,
                          "--tls-ca-cert-file",
                          ca_file,
                          "--tls-auth-clients",
                          auth_clients,
                          "--tls-client-cert-file",
                          client_file,
                          "--tls-client-key-file",
                          client_key,
                          NULL};
    return g_strdupv(test_strv(args));
}

test_redis *test_tls_start(const char *name, const char *auth_clients)
{
    g_auto(GStrv) args = test_tls_server_args(name, auth_clients, "{port1}");
    test_redis_options options = {.args = (const char *const *)args, .more_ports = 1};
    return test_redis_start_with(&options);
}

int test_tls_port(const test_redis *redis)
{
    return redis->ports[1];
}

char *test_tls_url(const test_redis *redis)
{
    return g_strdup_printf("rediss://127.0.0.1:%d/0", test_tls_port(redis));
}
