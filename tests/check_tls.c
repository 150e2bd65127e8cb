/* SPDX-License-Identifier: MIT */
/* TLS to Redis (rediss://) and the mistakes sluice_init catches at start-up: each bad
 * certificate refused with its reason, a client certificate for tls-auth-clients,
 * plaintext and TLS crossed, a stalled handshake, a database the server has not, and
 * a resolver that never answers, each bounded by the call's timeout. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include "fixture.h"

#include <dlfcn.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <netdb.h>
#include <string.h>

#include "tls_certs.h"

/* ---- a resolver that never answers for one name ---------------------------------------- */

#define STALLING_NAME "stalls.sluice.test"

/* The library's getaddrinfo() is this one (the program's symbol comes first): the
 * name STALLING_NAME takes 3 s and fails, as a resolver that does not answer (an
 * address only, AI_NUMERICHOST, never asks the resolver). */
int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    if (node && strcmp(node, STALLING_NAME) == 0) {
        if (hints && hints->ai_flags & AI_NUMERICHOST)
            return EAI_NONAME;
        g_usleep(3 * G_USEC_PER_SEC);
        return EAI_AGAIN;
    }
    static int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    if (!real)
        real = (int (*)(const char *, const char *, const struct addrinfo *,
                        struct addrinfo **))dlsym(RTLD_NEXT, "getaddrinfo");
    return real(node, service, hints, res);
}

/* ---- helpers ----------------------------------------------------------------------------- */

#define LIMIT "[limit:t]\nalgorithm = fixed_window\nlimit = 100\nwindow = 1h\n"

/* A keyfile reaching url, with more [sluice] lines (a timeout there replaces 2 s:
 * the tests that do not time a call leave room for a loaded machine). */
static char *keyfile(const char *url, const char *more)
{
    g_autofree char *contents = g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\n"
                                                "reload = false\non_error = deny\ntimeout = 2s\n"
                                                "%s\n" LIMIT,
                                                url, more ? more : "");
    return fixture_write_keyfile(contents);
}

/* tls_ca_file = ca.pem (absolute), and more. */
static char *trusting(const char *more)
{
    g_autofree char *ca = test_tls_file("ca.pem");
    return g_strdup_printf("tls_ca_file = %s\n%s", ca, more ? more : "");
}

static void assert_init_works(const char *path)
{
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "sluice_init: %s", error ? error->message : "");
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, &error), SLUICE_ALLOWED);
    sluice_shutdown();
}

/* sluice_init fails with code and a message that holds `says`. */
static void assert_init_fails(const char *path, int code, const char *says)
{
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_init(path, &error));
    ck_assert_ptr_nonnull(error);
    ck_assert_msg(g_error_matches(error, SLUICE_ERROR, code), "code %d: %s", error->code,
                  error->message);
    ck_assert_msg(strstr(error->message, says), "'%s' does not say '%s'", error->message, says);
}

/* The connections the server has: those on its TLS port, and all. */
static int clients_on(const test_redis *redis, int port)
{
    redisReply *r = test_redis_command(redis, "CLIENT LIST TYPE normal");
    ck_assert_ptr_nonnull(r);
    g_autofree char *laddr = g_strdup_printf("laddr=127.0.0.1:%d ", port);
    int n = 0;
    for (const char *p = r->str; (p = strstr(p, laddr)); p++)
        n++;
    freeReplyObject(r);
    return n;
}

/* A server speaking TLS with the good certificate, and sluice_init on it trusting
 * the test CA, with more [sluice] lines. */
static test_redis *init_on_tls(const char *more)
{
    test_redis *redis = test_tls_start("server", "optional");
    g_autofree char *url = test_tls_url(redis);
    g_autofree char *trust = trusting(more);
    g_autofree char *path = keyfile(url, trust);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    return redis;
}

/* ---- TLS that works ----------------------------------------------------------------------- */

START_TEST(rediss_decides_over_tls_and_verifies_the_server)
{
    test_redis *redis = init_on_tls(NULL);
    g_autoptr(GError) error = NULL;
    sluice_decision d;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sluice_acquire("t", NULL, 1, &d, &error), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 97);
    ck_assert_int_eq(clients_on(redis, test_tls_port(redis)), 1); /* over TLS, and only */
    sluice_shutdown();
    test_redis_stop(redis);
}
END_TEST

START_TEST(a_host_name_and_tls_server_name_are_checked_against_the_certificate)
{
    test_redis *redis = test_tls_start("server", "optional");
    test_redis *other = test_tls_start("wrong-name", "optional"); /* other.example only */
    /* a name in the URL (resolved, sent as SNI, matched with DNS:localhost) */
    g_autofree char *by_name = g_strdup_printf("rediss://localhost:%d", test_tls_port(redis));
    g_autofree char *more = trusting(NULL);
    g_autofree char *path = keyfile(by_name, more);
    assert_init_works(path);
    /* tls_server_name: the name the certificate must hold, whatever the URL says */
    g_autofree char *url = test_tls_url(other);
    g_autofree char *named = trusting("tls_server_name = other.example\n");
    g_autofree char *renamed = keyfile(url, named);
    assert_init_works(renamed);
    g_autofree char *wrong = trusting("tls_server_name = localhost\n");
    g_autofree char *misnamed = keyfile(url, wrong);
    assert_init_fails(misnamed, SLUICE_ERROR_TLS, "TLS: certificate does not match localhost");
    test_redis_stop(other);
    test_redis_stop(redis);
}
END_TEST

START_TEST(a_client_certificate_gets_through_tls_auth_clients_yes)
{
    test_redis *redis = test_tls_start("server", "yes");
    g_autofree char *url = test_tls_url(redis);
    g_autofree char *cert = test_tls_file("client.pem");
    g_autofree char *key = test_tls_file("client.key");
    g_autofree char *lines = g_strdup_printf("tls_cert_file = %s\ntls_key_file = %s\n", cert, key);
    g_autofree char *with = trusting(lines);
    g_autofree char *path = keyfile(url, with);
    assert_init_works(path);
    g_autofree char *without = trusting(NULL);
    g_autofree char *bare = keyfile(url, without);
    assert_init_fails(bare, SLUICE_ERROR_TLS, "TLS: the server requires a client certificate");
    test_redis_stop(redis);
}
END_TEST

static void note_warning(const char *domain, GLogLevelFlags level, const char *message,
                         gpointer data)
{
    (void)domain;
    (void)level;
    GString *seen = data;
    g_string_append_printf(seen, "%s\n", message);
}

START_TEST(a_client_key_others_can_read_is_warned_about)
{
    g_autofree char *cert = test_tls_file("client.pem");
    g_autofree char *key = test_tls_file("client.key");
    g_autofree char *text = NULL;
    ck_assert(g_file_get_contents(key, &text, NULL, NULL));
    g_autofree char *dir = g_dir_make_tmp("sluice-key-XXXXXX", NULL);
    g_autofree char *copy = g_build_filename(dir, "client.key", NULL);
    ck_assert(g_file_set_contents(copy, text, -1, NULL));
    g_autofree char *lines = g_strdup_printf("tls_cert_file = %s\ntls_key_file = %s\n", cert, copy);
    g_autofree char *more = trusting(lines);
    g_autofree char *path = keyfile("rediss://127.0.0.1:1", more);
    GString *seen = g_string_new(NULL);
    g_log_set_handler("sluice", G_LOG_LEVEL_WARNING, note_warning, seen);
    g_autofree char *expected = g_strdup_printf(
        "%s holds the TLS client key and its group or others may read it (mode 0644)", copy);

    g_chmod(copy, 0600);
    ck_assert(sluice_init(path, NULL)); /* no server there: init goes on, on_error decides */
    sluice_shutdown();
    ck_assert_msg(!strstr(seen->str, "may read it"), "%s", seen->str);
    g_chmod(copy, 0644);
    ck_assert(sluice_init(path, NULL));
    sluice_shutdown();
    ck_assert_msg(strstr(seen->str, expected), "no warning about %s: %s", copy, seen->str);
    g_string_free(seen, TRUE);
    g_unlink(copy);
    g_rmdir(dir);
}
END_TEST

/* ---- each bad certificate, refused at init with its reason ------------------------------- */

static const struct {
    const char *server; /* tests/support/tls_certs.sh's certificate */
    const char *says;
} bad[] = {
    {"other-server", "TLS: certificate not signed by a trusted CA"},
    {"wrong-name", "TLS: certificate does not match 127.0.0.1"},
    {"expired", "TLS: certificate has expired"},
};

START_TEST(a_bad_certificate_fails_init_with_its_reason)
{
    test_redis *redis = test_tls_start(bad[_i].server, "optional");
    g_autofree char *url = test_tls_url(redis);
    g_autofree char *more = trusting(NULL);
    g_autofree char *path = keyfile(url, more);
    g_autofree char *says =
        g_strdup_printf("redis 127.0.0.1:%d: %s", test_tls_port(redis), bad[_i].says);
    assert_init_fails(path, SLUICE_ERROR_TLS, says);
    test_redis_stop(redis);
}
END_TEST

START_TEST(tls_keys_need_a_tls_url_and_files_that_exist)
{
    g_autofree char *more = trusting(NULL);
    g_autofree char *plain = keyfile("redis://127.0.0.1:1", more);
    assert_init_fails(
        plain, SLUICE_ERROR_CONFIG,
        "tls_ca_file: applies only to TLS: the redis URL is plaintext; use rediss://");
    /* relative to the keyfile's directory, as password_file */
    g_autofree char *missing = keyfile("rediss://127.0.0.1:1", "tls_ca_file = no-such-ca.pem\n");
    assert_init_fails(missing, SLUICE_ERROR_CONFIG, "no-such-ca.pem: no such file");
    g_autofree char *cert = test_tls_file("client.pem");
    g_autofree char *line = g_strdup_printf("tls_cert_file = %s\n", cert);
    g_autofree char *alone = keyfile("rediss://127.0.0.1:1", line);
    assert_init_fails(alone, SLUICE_ERROR_CONFIG, "a client certificate needs its key");
    /* a key that is not the certificate's */
    g_autofree char *other_key = test_tls_file("server.key");
    g_autofree char *pair =
        g_strdup_printf("tls_cert_file = %s\ntls_key_file = %s\n", cert, other_key);
    g_autofree char *mismatched = keyfile("rediss://127.0.0.1:1", pair);
    assert_init_fails(mismatched, SLUICE_ERROR_CONFIG, "not the key of tls_cert_file");
}
END_TEST

/* ---- plaintext and TLS crossed, a stalled handshake: clear, and within timeout ---------- */

START_TEST(rediss_against_a_plaintext_port_fails_init_within_timeout)
{
    test_redis *redis = test_redis_start(NULL);
    g_autofree char *url = g_strdup_printf("rediss://127.0.0.1:%d", redis->port);
    g_autofree char *more = trusting("timeout = 300ms\n");
    g_autofree char *path = keyfile(url, more);
    /* what init costs besides the connection (the keyfile, loading the CA: slow
     * under a sanitizer), from an init whose connect is refused at once */
    g_autofree char *refused = keyfile("rediss://127.0.0.1:1", more);
    fixture_stamp s = fixture_stamp_now();
    ck_assert(sluice_init(refused, NULL));
    gint64 setup = fixture_stamp_took_us(s, fixture_stamp_now());
    sluice_shutdown();
    s = fixture_stamp_now();
    assert_init_fails(path, SLUICE_ERROR_TLS, "TLS: server did not answer TLS");
    gint64 took = fixture_stamp_took_us(s, fixture_stamp_now()) - setup;
    ck_assert_msg(took <= (300 + 10) * 1000 * fixture_time_scale(),
                  "took %" G_GINT64_FORMAT " µs beyond the setup", took);
    test_redis_stop(redis);
}
END_TEST

START_TEST(a_plaintext_url_against_a_tls_port_fails_clearly_within_timeout)
{
    test_redis *redis = test_tls_start("server", "optional");
    g_autofree char *url = g_strdup_printf("redis://127.0.0.1:%d", test_tls_port(redis));
    g_autofree char *path = keyfile(url, "timeout = 300ms\n");
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    fixture_stamp s = fixture_stamp_now();
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, &error), SLUICE_FAILED);
    gint64 took = fixture_stamp_took_us(s, fixture_stamp_now());
    ck_assert_msg(strstr(error->message, "connection closed by the server"), "%s", error->message);
    ck_assert_msg(took <= (300 + 10) * 1000 * fixture_time_scale(), "took %" G_GINT64_FORMAT " µs",
                  took);
    sluice_shutdown();
    test_redis_stop(redis);
}
END_TEST

START_TEST(a_server_stopped_during_the_handshake_costs_a_call_its_timeout)
{
    test_redis *redis = init_on_tls("timeout = 300ms\n");
    g_autoptr(GError) error = NULL;
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, &error), SLUICE_ALLOWED);
    /* the connection goes; the next call's new one meets a server that accepts
     * (the kernel does) but never answers the ClientHello */
    redisReply *r = test_redis_command(redis, "CLIENT KILL TYPE normal SKIPME yes");
    freeReplyObject(r);
    test_redis_pause(redis);
    fixture_stamp s = fixture_stamp_now();
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, &error), SLUICE_FAILED);
    gint64 took = fixture_stamp_took_us(s, fixture_stamp_now());
    test_redis_resume(redis);
    ck_assert_msg(strstr(error->message, "TLS: server did not answer TLS (timed out"), "%s",
                  error->message);
    ck_assert_msg(took <= (300 + 10) * 1000 * fixture_time_scale(), "took %" G_GINT64_FORMAT " µs",
                  took);
    sluice_shutdown();
    test_redis_stop(redis);
}
END_TEST

/* ---- a Cluster and Sentinel over TLS -------------------------------------------------- */

/* sluice_init on url with more [sluice] lines: 32 keys decided, spread over the
 * nodes (sluice_shutdown is the caller's). */
static void assert_keys_decided(const char *url, const char *more)
{
    g_autofree char *path = keyfile(url, more);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "sluice_init: %s", error ? error->message : "");
    for (int i = 0; i < 32; i++) {
        g_autofree char *key = g_strdup_printf("user-%d", i);
        ck_assert_msg(sluice_acquire("t", key, 1, NULL, &error) == SLUICE_ALLOWED, "%s",
                      error ? error->message : "denied");
    }
}

START_TEST(every_node_of_a_tls_cluster_is_verified)
{
    const test_cluster_options options = {.tls = TRUE};
    test_cluster *c = test_cluster_start(&options);
    g_autofree char *url = test_cluster_url(c); /* rediss+cluster://, two seeds */
    g_autofree char *trust = trusting(NULL);
    assert_keys_decided(url, trust);
    /* each master was reached on its TLS port (the one CLUSTER SLOTS gives a TLS
     * client), none on its plaintext port but for this question itself */
    for (int m = 0; m < c->masters; m++) {
        ck_assert_int_gt(test_cluster_keys(c, c->node[m]), 0);
        redisReply *r = test_cluster_command(c, c->node[m], "INFO stats");
        ck_assert_ptr_nonnull(r);
        freeReplyObject(r);
    }
    /* tls_server_name is checked against every node's certificate (it holds localhost) */
    g_autofree char *named = trusting("tls_server_name = localhost\n");
    assert_keys_decided(url, named);
    g_autofree char *misnamed = trusting("tls_server_name = redis.example\n");
    g_autofree char *path = keyfile(url, misnamed);
    assert_init_fails(path, SLUICE_ERROR_TLS, "TLS: certificate does not match redis.example");
    /* another CA: the seeds refuse init, as one server does */
    g_autofree char *other = test_tls_file("other-ca.pem");
    g_autofree char *distrust = g_strdup_printf("tls_ca_file = %s\n", other);
    g_autofree char *path2 = keyfile(url, distrust);
    assert_init_fails(path2, SLUICE_ERROR_TLS, "TLS: certificate not signed by a trusted CA");
    test_cluster_stop(c);
}
END_TEST

START_TEST(the_sentinels_and_the_master_they_name_are_verified)
{
    const test_sentinel_options options = {.tls = TRUE, .down_after_ms = 10000};
    test_sentinel *s = test_sentinel_start(&options);
    g_autofree char *url = test_sentinel_url(s); /* rediss+sentinel:// */
    g_autofree char *trust = trusting(NULL);
    assert_keys_decided(url, trust);
    /* the master on its TLS port: sluice's link and the Sentinels' (the only one
     * on the plaintext port is this question) */
    ck_assert_int_gt(clients_on(s->node[0], s->node[0]->ports[1]), 0);
    ck_assert_int_eq(clients_on(s->node[0], s->node[0]->port), 1);
    sluice_shutdown();
    g_autofree char *other = test_tls_file("other-ca.pem");
    g_autofree char *distrust = g_strdup_printf("tls_ca_file = %s\n", other);
    g_autofree char *path = keyfile(url, distrust);
    assert_init_fails(path, SLUICE_ERROR_TLS, "TLS: certificate not signed by a trusted CA");
    g_autofree char *misnamed = trusting("tls_server_name = redis.example\n");
    g_autofree char *path2 = keyfile(url, misnamed);
    assert_init_fails(path2, SLUICE_ERROR_TLS, "TLS: certificate does not match redis.example");
    test_sentinel_stop(s);
}
END_TEST

/* ---- fork ----------------------------------------------------------------------------- */

/* The client ids of the connections on the server's TLS port, "id=1 id=7 ". */
static char *tls_client_ids(const test_redis *redis)
{
    redisReply *r = test_redis_command(redis, "CLIENT LIST TYPE normal");
    ck_assert_ptr_nonnull(r);
    g_autofree char *laddr = g_strdup_printf("laddr=127.0.0.1:%d ", test_tls_port(redis));
    g_auto(GStrv) lines = g_strsplit(r->str, "\n", -1);
    GString *ids = g_string_new(NULL);
    for (guint i = 0; lines[i]; i++)
        if (strstr(lines[i], laddr))
            g_string_append_printf(ids, "%.*s ", (int)strcspn(lines[i], " "), lines[i]);
    freeReplyObject(r);
    return g_string_free(ids, FALSE);
}

/* How many connections the server has accepted since it started (this question's too). */
static gint64 connections_accepted(const test_redis *redis)
{
    redisReply *r = test_redis_command(redis, "INFO stats");
    ck_assert_ptr_nonnull(r);
    const char *at = strstr(r->str, "total_connections_received:");
    ck_assert_ptr_nonnull(at);
    gint64 n = g_ascii_strtoll(at + strlen("total_connections_received:"), NULL, 10);
    freeReplyObject(r);
    return n;
}

static gboolean child_decides(void)
{
    sluice_decision d;
    return sluice_acquire("c", NULL, 1, &d, NULL) == SLUICE_ALLOWED && d.limit == 1000;
}

START_TEST(a_forked_child_decides_over_a_tls_connection_of_its_own)
{
    test_redis *redis =
        init_on_tls("[limit:c]\nalgorithm = fixed_window\nlimit = 1000\nwindow = 1h\n");
    g_autoptr(GError) error = NULL;
    ck_assert_int_eq(sluice_acquire("c", NULL, 1, NULL, &error), SLUICE_ALLOWED);
    g_autofree char *parent = tls_client_ids(redis); /* the parent's link, alone */
    ck_assert_msg(strlen(parent) > 0 && !strchr(strchr(parent, ' ') + 1, 'i'), "%s", parent);
    gint64 before = connections_accepted(redis);

    /* 4 threads decide on the parent's session while each child decides */
    int ran = fixture_fork_children("t", 3, 20000, child_decides);

    /* each child made its own connection (and this question one); the parent's
     * session is whole: the same connection goes on deciding, no new one */
    ck_assert_int_eq(connections_accepted(redis) - before, ran + 1);
    ck_assert_int_eq(sluice_acquire("c", NULL, 1, NULL, &error), SLUICE_ALLOWED);
    g_autofree char *after = tls_client_ids(redis);
    ck_assert_str_eq(after, parent);
    sluice_shutdown();
    test_redis_stop(redis);
}
END_TEST

/* ---- the asynchronous API ------------------------------------------------------------- */

typedef struct {
    int code;
    GError *error;
    gboolean done;
    fixture_stamp at; /* when the callback ran */
} async_result;

static void on_decided(GObject *source, GAsyncResult *res, gpointer p)
{
    (void)source;
    async_result *r = p;
    r->at = fixture_stamp_now();
    r->code = sluice_acquire_finish(res, NULL, &r->error);
    r->done = TRUE;
}

/* n sluice_acquire_async of "t" on the default main context (key i: keys[i], or
 * NULL), waited for. */
static void decide_async_n(async_result *r, int n, const char *const *keys)
{
    for (int i = 0; i < n; i++) {
        r[i] = (async_result){0};
        sluice_acquire_async("t", keys ? keys[i] : NULL, 1, NULL, on_decided, &r[i]);
    }
    gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC * fixture_time_scale();
    for (int i = 0; i < n; i++) {
        while (!r[i].done && g_get_monotonic_time() < end)
            g_main_context_iteration(NULL, FALSE) || (g_usleep(1000), TRUE);
        ck_assert_msg(r[i].done, "no answer in 10 s");
    }
}

static void decide_async(async_result *r)
{
    decide_async_n(r, 1, NULL);
}

/* A redis-server speaking TLS on tls_port (given: sluice was pointed at it before it
 * started) with the certificate `name`. */
static test_redis *start_tls_on(int tls_port, const char *name, const char *auth_clients)
{
    g_autofree char *port = g_strdup_printf("%d", tls_port);
    g_auto(GStrv) args = test_tls_server_args(name, auth_clients, port);
    test_redis_options options = {.args = (const char *const *)args};
    return test_redis_start_with(&options);
}

/* init on a port where no server is yet (init goes on: on_error decides), then a
 * server there with a certificate sluice must refuse: the asynchronous client meets
 * it first, in its own handshake. */
START_TEST(the_asynchronous_api_refuses_each_bad_certificate_with_its_reason)
{
    int tls_port = test_redis_free_port();
    g_autofree char *url = g_strdup_printf("rediss://127.0.0.1:%d/0", tls_port);
    g_autofree char *more = trusting(NULL);
    g_autofree char *path = keyfile(url, more);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    test_redis *redis = start_tls_on(tls_port, bad[_i].server, "optional");
    async_result r;
    decide_async(&r);
    ck_assert_int_eq(r.code, SLUICE_FAILED);
    ck_assert_ptr_nonnull(r.error);
    g_autofree char *says = g_strdup_printf("redis 127.0.0.1:%d: %s", tls_port, bad[_i].says);
    ck_assert_msg(strstr(r.error->message, says), "'%s' does not say '%s'", r.error->message, says);
    g_error_free(r.error);
    sluice_shutdown();
    test_redis_stop(redis);
}
END_TEST

START_TEST(the_asynchronous_api_shows_a_client_certificate_to_tls_auth_clients_yes)
{
    int tls_port = test_redis_free_port();
    g_autofree char *url = g_strdup_printf("rediss://127.0.0.1:%d/0", tls_port);
    g_autofree char *cert = test_tls_file("client.pem");
    g_autofree char *key = test_tls_file("client.key");
    g_autofree char *lines = g_strdup_printf("tls_cert_file = %s\ntls_key_file = %s\n", cert, key);
    g_autofree char *with = trusting(lines);
    g_autofree char *path = keyfile(url, with);
    g_autofree char *without = trusting(NULL);
    g_autofree char *bare = keyfile(url, without);
    test_redis *redis = start_tls_on(tls_port, "server", "yes");
    async_result r;

    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    decide_async(&r);
    ck_assert_msg(r.code == SLUICE_ALLOWED, "%s", r.error ? r.error->message : "denied");
    sluice_shutdown();

    /* without one: init, before the server is there, goes on; the call says why */
    test_redis_stop(redis);
    ck_assert_msg(sluice_init(bare, &error), "%s", error ? error->message : "");
    redis = start_tls_on(tls_port, "server", "yes");
    decide_async(&r);
    ck_assert_int_eq(r.code, SLUICE_FAILED);
    ck_assert_msg(strstr(r.error->message, "TLS: the server requires a client certificate"), "%s",
                  r.error->message);
    g_error_free(r.error);
    sluice_shutdown();
    test_redis_stop(redis);
}
END_TEST

START_TEST(a_server_stopped_during_the_asynchronous_handshake_costs_a_call_its_timeout)
{
    test_redis *redis = init_on_tls("timeout = 300ms\n");
    async_result r;
    decide_async(&r); /* the main context's connection, made */
    ck_assert_msg(r.code == SLUICE_ALLOWED, "%s", r.error ? r.error->message : "denied");
    /* the connections go (the loop sees its own close); the next call's new one
     * meets a server that accepts (the kernel does) but never answers the ClientHello */
    redisReply *k = test_redis_command(redis, "CLIENT KILL TYPE normal SKIPME yes");
    freeReplyObject(k);
    for (int i = 0; i < 50; i++) {
        g_main_context_iteration(NULL, FALSE);
        g_usleep(1000);
    }
    test_redis_pause(redis);
    fixture_stamp s = fixture_stamp_now(); /* from before the call to when its callback ran */
    decide_async(&r);
    gint64 took = fixture_stamp_took_us(s, r.at);
    test_redis_resume(redis);
    ck_assert_int_eq(r.code, SLUICE_FAILED);
    ck_assert_msg(strstr(r.error->message, "TLS: server did not answer TLS (timed out"), "%s",
                  r.error->message);
    ck_assert_msg(took <= (300 + 10) * 1000 * fixture_time_scale(), "took %" G_GINT64_FORMAT " µs",
                  took);
    g_error_free(r.error);
    sluice_shutdown();
    test_redis_stop(redis);
}
END_TEST

/* ---- a node the Cluster or a Sentinel names ------------------------------------------- */

/* The seeds (node 0 and 1) show the good certificate; the third master, which only
 * CLUSTER SLOTS names, one for another name: its slots fail, on both APIs, saying
 * why; the others' are decided. */
START_TEST(a_node_the_cluster_names_is_verified_too)
{
    const test_cluster_options options = {.tls = TRUE, .tls_last_cert = "wrong-name"};
    test_cluster *c = test_cluster_start(&options);
    g_autofree char *url = test_cluster_url(c);
    g_autofree char *trust = trusting(NULL);
    g_autofree char *path = keyfile(url, trust);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "sluice_init: %s", error ? error->message : "");
    g_autofree char *node =
        g_strdup_printf("redis 127.0.0.1:%d (cluster slot ", c->node[2]->ports[2]);
    const char *why = "TLS: certificate does not match 127.0.0.1";

    /* asynchronous first: the node's breaker has not met it yet */
    char *keys[12];
    async_result r[G_N_ELEMENTS(keys)];
    for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
        keys[i] = g_strdup_printf("user-%u", i);
    decide_async_n(r, G_N_ELEMENTS(keys), (const char *const *)keys);
    int refused = 0;
    for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
        if (r[i].code == SLUICE_ALLOWED)
            continue;
        ck_assert_int_eq(r[i].code, SLUICE_FAILED);
        ck_assert_msg(strstr(r[i].error->message, node) && strstr(r[i].error->message, why),
                      "%s: %s", keys[i], r[i].error->message);
        g_error_free(r[i].error);
        refused++;
    }
    ck_assert_msg(refused > 0 && refused < (int)G_N_ELEMENTS(keys), "%d of %d refused", refused,
                  (int)G_N_ELEMENTS(keys));
    sluice_shutdown();

    /* blocking: the first call on the node's slots says why (later ones may meet its
     * open breaker), every one names the node */
    ck_assert_msg(sluice_init(path, &error), "sluice_init: %s", error ? error->message : "");
    refused = 0;
    for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
        GError *e = NULL;
        int code = sluice_acquire("t", keys[i], 1, NULL, &e);
        if (code == SLUICE_ALLOWED)
            continue;
        ck_assert_int_eq(code, SLUICE_FAILED);
        ck_assert_msg(strstr(e->message, node) && (refused > 0 || strstr(e->message, why)),
                      "%s: %s", keys[i], e->message);
        g_error_free(e);
        refused++;
    }
    ck_assert_int_gt(refused, 0);
    sluice_shutdown();
    for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
        g_free(keys[i]);
    test_cluster_stop(c);
}
END_TEST

/* The Sentinels show the good certificate, the master they name one for another
 * name: init fails, naming it and why. */
START_TEST(the_master_a_sentinel_names_is_verified_too)
{
    const test_sentinel_options options = {
        .tls = TRUE, .down_after_ms = 10000, .tls_master_cert = "wrong-name"};
    test_sentinel *s = test_sentinel_start(&options);
    g_autofree char *url = test_sentinel_url(s);
    g_autofree char *trust = trusting(NULL);
    g_autofree char *path = keyfile(url, trust);
    g_autofree char *says = g_strdup_printf(
        "redis 127.0.0.1:%d: TLS: certificate does not match 127.0.0.1", s->node[0]->ports[1]);
    assert_init_fails(path, SLUICE_ERROR_TLS, says);
    test_sentinel_stop(s);
}
END_TEST

/* ---- start-up checks that are not TLS's ------------------------------------------------ */

START_TEST(a_database_the_server_has_not_fails_init)
{
    test_redis *redis = test_redis_start(NULL);
    g_autofree char *url = g_strdup_printf("redis://127.0.0.1:%d/99", redis->port);
    g_autofree char *path = keyfile(url, NULL);
    assert_init_fails(path, SLUICE_ERROR_CONFIG, "SELECT: ERR DB index is out of range");
    test_redis_stop(redis);
}
END_TEST

START_TEST(a_resolver_that_does_not_answer_costs_a_call_its_timeout)
{
    g_autofree char *path = keyfile("redis://" STALLING_NAME ":6379", "timeout = 100ms\n");
    g_autoptr(GError) error = NULL;
    fixture_stamp s = fixture_stamp_now();
    ck_assert(sluice_init(path, &error)); /* an absent server does not stop init */
    gint64 took = fixture_stamp_took_us(s, fixture_stamp_now());
    ck_assert_msg(took <= (100 + 10) * 1000 * fixture_time_scale(), "init took %" G_GINT64_FORMAT,
                  took);
    s = fixture_stamp_now();
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, &error), SLUICE_FAILED);
    took = fixture_stamp_took_us(s, fixture_stamp_now());
    ck_assert_msg(strstr(error->message, "resolve " STALLING_NAME ": timed out"), "%s",
                  error->message);
    ck_assert_msg(took <= (100 + 10) * 1000 * fixture_time_scale(), "took %" G_GINT64_FORMAT " µs",
                  took);
    sluice_shutdown();
}
END_TEST

/* ---- reload ------------------------------------------------------------------------------- */

START_TEST(a_reload_that_changes_a_tls_file_makes_new_connections)
{
    test_redis *redis = test_tls_start("server", "optional");
    g_autofree char *url = test_tls_url(redis);
    /* a copy of ca.pem beside the keyfile, named relatively */
    g_autofree char *ca = test_tls_file("ca.pem");
    g_autofree char *ca_text = NULL;
    ck_assert(g_file_get_contents(ca, &ca_text, NULL, NULL));
    g_autofree char *path = keyfile(url, "tls_ca_file = sluice-test-ca.pem\n");
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *copy = g_build_filename(dir, "sluice-test-ca.pem", NULL);
    ck_assert(g_file_set_contents(copy, ca_text, -1, NULL));
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(clients_on(redis, test_tls_port(redis)), 1);
    redisReply *before = test_redis_command(redis, "CLIENT LIST TYPE normal");

    /* the same keyfile, the CA file replaced in place (another CA's certificate
     * appended): the next call is on a new connection, the old one is closed */
    g_autofree char *other = test_tls_file("other-ca.pem");
    g_autofree char *other_text = NULL;
    ck_assert(g_file_get_contents(other, &other_text, NULL, NULL));
    g_autofree char *both = g_strconcat(ca_text, other_text, NULL);
    ck_assert(g_file_set_contents(copy, both, -1, NULL));
    ck_assert_msg(sluice_reload(&error), "%s", error ? error->message : "");
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(clients_on(redis, test_tls_port(redis)), 1);
    redisReply *after = test_redis_command(redis, "CLIENT LIST TYPE normal");
    ck_assert_str_ne(before->str, after->str); /* another client id */
    freeReplyObject(before);
    freeReplyObject(after);
    sluice_shutdown();
    g_unlink(copy);
    test_redis_stop(redis);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("tls");
    tcase_add_test(tc, rediss_decides_over_tls_and_verifies_the_server);
    tcase_add_test(tc, a_host_name_and_tls_server_name_are_checked_against_the_certificate);
    tcase_add_test(tc, a_client_certificate_gets_through_tls_auth_clients_yes);
    tcase_add_loop_test(tc, a_bad_certificate_fails_init_with_its_reason, 0, G_N_ELEMENTS(bad));
    tcase_add_test(tc, tls_keys_need_a_tls_url_and_files_that_exist);
    tcase_add_test(tc, a_client_key_others_can_read_is_warned_about);
    tcase_add_test(tc, rediss_against_a_plaintext_port_fails_init_within_timeout);
    tcase_add_test(tc, a_plaintext_url_against_a_tls_port_fails_clearly_within_timeout);
    tcase_add_test(tc, a_server_stopped_during_the_handshake_costs_a_call_its_timeout);
    tcase_add_test(tc, a_forked_child_decides_over_a_tls_connection_of_its_own);
    tcase_add_loop_test(tc, the_asynchronous_api_refuses_each_bad_certificate_with_its_reason, 0,
                        G_N_ELEMENTS(bad));
    tcase_add_test(tc, the_asynchronous_api_shows_a_client_certificate_to_tls_auth_clients_yes);
    tcase_add_test(tc, a_server_stopped_during_the_asynchronous_handshake_costs_a_call_its_timeout);
    tcase_add_test(tc, every_node_of_a_tls_cluster_is_verified);
    tcase_add_test(tc, a_node_the_cluster_names_is_verified_too);
    tcase_add_test(tc, the_master_a_sentinel_names_is_verified_too);
    tcase_add_test(tc, the_sentinels_and_the_master_they_name_are_verified);
    tcase_add_test(tc, a_database_the_server_has_not_fails_init);
    tcase_add_test(tc, a_resolver_that_does_not_answer_costs_a_call_its_timeout);
    tcase_add_test(tc, a_reload_that_changes_a_tls_file_makes_new_connections);
    suite_add_tcase(s, tc);
    g_free(test_tls_file("ca.pem")); /* made once, before the tests fork */
    return fixture_run(s);
}
