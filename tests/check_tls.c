/* TLS to Redis (rediss://) and the mistakes sluice_init catches at start-up: each bad
 * certificate refused with its reason, a client certificate for tls-auth-clients,
 * plaintext and TLS crossed, a stalled handshake, a database the server has not, and
 * a resolver that never answers, each bounded by the call's timeout. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include "fixture.h"

#include <dlfcn.h>
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
    ck_assert_msg(g_error_matches(error, SLUICE_ERROR_DOMAIN, code), "code %d: %s", error->code,
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

/* ---- TLS that works ----------------------------------------------------------------------- */

START_TEST(rediss_decides_over_tls_and_verifies_the_server)
{
    test_redis *redis = test_tls_start("server", "optional");
    g_autofree char *url = test_tls_url(redis);
    g_autofree char *more = trusting(NULL);
    g_autofree char *path = keyfile(url, more);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
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
    const char *server; /* tests/tls_certs.sh's certificate */
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
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, &error), SLUICE_ERROR);
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
    test_redis *redis = test_tls_start("server", "optional");
    g_autofree char *url = test_tls_url(redis);
    g_autofree char *more = trusting("timeout = 300ms\n");
    g_autofree char *path = keyfile(url, more);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, &error), SLUICE_ALLOWED);
    /* the connection goes; the next call's new one meets a server that accepts
     * (the kernel does) but never answers the ClientHello */
    redisReply *r = test_redis_command(redis, "CLIENT KILL TYPE normal SKIPME yes");
    freeReplyObject(r);
    test_redis_pause(redis);
    fixture_stamp s = fixture_stamp_now();
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, &error), SLUICE_ERROR);
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
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, &error), SLUICE_ERROR);
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
    tcase_add_test(tc, every_node_of_a_tls_cluster_is_verified);
    tcase_add_test(tc, the_sentinels_and_the_master_they_name_are_verified);
    tcase_add_test(tc, a_database_the_server_has_not_fails_init);
    tcase_add_test(tc, a_resolver_that_does_not_answer_costs_a_call_its_timeout);
    tcase_add_test(tc, a_reload_that_changes_a_tls_file_makes_new_connections);
    suite_add_tcase(s, tc);
    g_free(test_tls_file("ca.pem")); /* made once, before the tests fork */
    return fixture_run(s);
}
