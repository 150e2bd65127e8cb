/* SPDX-License-Identifier: MIT */
/* The `redis` URL: every form (one server, Cluster, Sentinel, TLS) parsed into
 * its parts, and every bad one refused saying what is wrong, never repeating it. */
#include "fixture.h"

#include <glib/gstdio.h>
#include <string.h>

#include "redis/url.h"

/* Parses url, failing the test when it does not parse. */
static void parse_ok(const char *url, sluice__redis_url *out)
{
    char *why = NULL;
    ck_assert_msg(sluice__redis_url_parse(url, out, &why), "%s: %s", url, why);
    ck_assert_ptr_null(why);
}

/* The reason url is refused; fails the test when it parses. */
static char *refused(const char *url)
{
    sluice__redis_url out;
    char *why = NULL;
    ck_assert_msg(!sluice__redis_url_parse(url, &out, &why), "%s parsed", url);
    ck_assert_ptr_nonnull(why);
    ck_assert_ptr_null(out.addresses);
    ck_assert_ptr_null(out.password);
    return why;
}

/* u's addresses read "HOST PORT, HOST PORT...". */
static void ck_addresses(const sluice__redis_url *u, const char *expected)
{
    g_autoptr(GString) got = g_string_new(NULL);
    for (guint i = 0; i < u->n_addresses; i++)
        g_string_append_printf(got, "%s%s %d", i ? ", " : "", u->addresses[i].host,
                               u->addresses[i].port);
    ck_assert_str_eq(got->str, expected);
}

#define ck_refused(url, expected)                                                                  \
    do {                                                                                           \
        g_autofree char *why_ = refused(url);                                                      \
        ck_assert_str_eq(why_, expected);                                                          \
    } while (0)

#define SINGLE   "expected redis://[user:password@]host[:port][/db] or unix:///path.sock"
#define CLUSTER  "expected redis+cluster://[user:password@]host:port[,host:port...]"
#define SENTINEL "expected redis+sentinel://[user:password@]host:port[,host:port...]/MASTER[?db=N]"

START_TEST(one_server_url_keeps_its_parts)
{
    sluice__redis_url u;
    parse_ok("redis://app:s%40cret@db.internal:6380/3", &u);
    ck_assert_int_eq(u.topology, SLUICE__REDIS_SINGLE);
    ck_assert(!u.tls);
    ck_assert_uint_eq(u.n_addresses, 1);
    ck_assert_str_eq(u.addresses[0].host, "db.internal");
    ck_assert_int_eq(u.addresses[0].port, 6380);
    ck_assert_ptr_eq(u.host, u.addresses[0].host);
    ck_assert_int_eq(u.port, 6380);
    ck_assert_str_eq(u.user, "app");
    ck_assert_str_eq(u.password, "s@cret");
    ck_assert_int_eq(u.db, 3);
    ck_assert_ptr_null(u.socket);
    ck_assert_ptr_null(u.master);
    ck_assert_str_eq(sluice__redis_url_scheme(&u), "redis");
    sluice__redis_url_clear(&u);
    ck_assert_ptr_null(u.host);

    parse_ok("redis://127.0.0.1", &u);
    ck_assert_int_eq(u.port, 6379);
    ck_assert_int_eq(u.db, 0);
    ck_assert_ptr_null(u.user);
    ck_assert_ptr_null(u.password);
    sluice__redis_url_clear(&u);

    parse_ok("redis://:only-a-password@[::1]:7000?db=2", &u);
    ck_assert_str_eq(u.host, "::1");
    ck_assert_int_eq(u.port, 7000);
    ck_assert_ptr_null(u.user);
    ck_assert_str_eq(u.password, "only-a-password");
    ck_assert_int_eq(u.db, 2);
    sluice__redis_url_clear(&u);
}
END_TEST

START_TEST(unix_socket_url_keeps_its_path_and_db)
{
    sluice__redis_url u;
    parse_ok("unix:///run/redis%20x.sock?db=2", &u);
    ck_assert_str_eq(u.socket, "/run/redis x.sock");
    ck_assert_ptr_null(u.host);
    ck_assert_uint_eq(u.n_addresses, 0);
    ck_assert_int_eq(u.db, 2);
    ck_assert_str_eq(sluice__redis_url_scheme(&u), "unix");
    sluice__redis_url_clear(&u);

    parse_ok("unix://app:pw@/tmp/r.sock", &u);
    ck_assert_str_eq(u.user, "app");
    ck_assert_str_eq(u.password, "pw");
    ck_assert_str_eq(u.socket, "/tmp/r.sock");
    sluice__redis_url_clear(&u);
}
END_TEST

START_TEST(cluster_url_lists_every_seed_node)
{
    sluice__redis_url u;
    parse_ok("redis+cluster://app:pw@10.0.0.1:7000,node-b:7001,[2001:db8::2]:7002,node-c", &u);
    ck_assert_int_eq(u.topology, SLUICE__REDIS_CLUSTER);
    ck_assert(!u.tls);
    ck_addresses(&u, "10.0.0.1 7000, node-b 7001, 2001:db8::2 7002, node-c 6379");
    ck_assert_str_eq(u.user, "app");
    ck_assert_str_eq(u.password, "pw");
    ck_assert_int_eq(u.db, 0);
    ck_assert_str_eq(sluice__redis_url_scheme(&u), "redis+cluster");
    sluice__redis_url_clear(&u);

    parse_ok("rediss+cluster://127.0.0.1:7000/", &u);
    ck_assert_int_eq(u.topology, SLUICE__REDIS_CLUSTER);
    ck_assert(u.tls);
    ck_assert_uint_eq(u.n_addresses, 1);
    ck_assert_str_eq(sluice__redis_url_scheme(&u), "rediss+cluster");
    sluice__redis_url_clear(&u);
}
END_TEST

START_TEST(sentinel_url_names_the_sentinels_and_the_master)
{
    sluice__redis_url u;
    parse_ok("redis+sentinel://app:pw@s1:26380,s2,[::1]:26381/my%20master?db=4", &u);
    ck_assert_int_eq(u.topology, SLUICE__REDIS_SENTINEL);
    ck_assert(!u.tls);
    ck_addresses(&u, "s1 26380, s2 26379, ::1 26381"); /* 26379: a Sentinel's default */
    ck_assert_str_eq(u.master, "my master");
    ck_assert_int_eq(u.db, 4);
    ck_assert_str_eq(u.user, "app");
    ck_assert_str_eq(u.password, "pw");
    sluice__redis_url_clear(&u);

    parse_ok("rediss+sentinel://127.0.0.1:26379/mymaster", &u);
    ck_assert(u.tls);
    ck_assert_str_eq(u.master, "mymaster");
    ck_assert_int_eq(u.db, 0);
    ck_assert_str_eq(sluice__redis_url_scheme(&u), "rediss+sentinel");
    sluice__redis_url_clear(&u);
}
END_TEST

START_TEST(tls_url_of_one_server_sets_the_flag_only)
{
    sluice__redis_url u;
    parse_ok("REDISS://127.0.0.1:6380/1", &u);
    ck_assert_int_eq(u.topology, SLUICE__REDIS_SINGLE);
    ck_assert(u.tls);
    ck_assert_str_eq(u.host, "127.0.0.1");
    ck_assert_int_eq(u.port, 6380);
    ck_assert_int_eq(u.db, 1);
    ck_assert_str_eq(sluice__redis_url_scheme(&u), "rediss");
    sluice__redis_url_clear(&u);
}
END_TEST

START_TEST(a_port_that_is_not_a_number_says_so)
{
    const char *urls[] = {"redis://127.0.0.1:sixty/0",
                          "redis://h:0",
                          "redis://h:65536",
                          "redis://h:",
                          "redis://h:-1",
                          "redis://[::1]:x",
                          "redis://h:99999999999999999999"};
    for (gsize i = 0; i < G_N_ELEMENTS(urls); i++)
        ck_refused(urls[i], "the port is not a number from 1 to 65535; " SINGLE);
    ck_refused("redis+cluster://a:7000,b:seven",
               "the port is not a number from 1 to 65535; " CLUSTER);
}
END_TEST

START_TEST(a_database_on_a_cluster_url_is_refused)
{
    ck_refused("redis+cluster://a:7000,b:7001/1",
               "a database: a Redis Cluster has only database 0; " CLUSTER);
    ck_refused("redis+cluster://a:7000/0",
               "a database: a Redis Cluster has only database 0; " CLUSTER);
    ck_refused("redis+cluster://a:7000?db=0",
               "a database: a Redis Cluster has only database 0; " CLUSTER);
}
END_TEST

START_TEST(bad_urls_say_what_is_wrong)
{
    ck_refused("http://u:p@127.0.0.1/0",
               "unknown scheme; expected redis://, rediss://, unix://, redis+cluster://, "
               "rediss+cluster://, redis+sentinel:// or rediss+sentinel://");
    ck_refused("127.0.0.1:6379",
               "not a URL; expected redis://, rediss://, unix://, redis+cluster://, "
               "rediss+cluster://, redis+sentinel:// or rediss+sentinel://");
    ck_refused("redis://", "no host; " SINGLE);
    ck_refused("redis://h/zero", "the database is not a whole number; " SINGLE);
    ck_refused("redis://h/1?db=2", "two databases, in the path and in ?db=; " SINGLE);
    ck_refused("redis://h?timeout=1", "unknown query; only ?db=N; " SINGLE);
    ck_refused("redis://a:1,b:2",
               "more than one host; a Redis Cluster is redis+cluster://, Sentinels "
               "redis+sentinel://; " SINGLE);
    ck_refused("redis://::1:6379", "an IPv6 address goes in brackets, e.g. [::1]:6379; " SINGLE);
    ck_refused("redis://[::1:6379", "an IPv6 address without its closing ]; " SINGLE);
    ck_refused("redis://[db]:6379", "what stands in brackets is not an IPv6 address; " SINGLE);
    ck_refused("redis://[::1]x",
               "an IPv6 address in brackets is followed by :port or nothing; " SINGLE);
    ck_refused("redis://a b:1", "the host is neither a host name nor an IP address; " SINGLE);
    ck_refused("redis://h:1#frag", "a # outside the password (written %23 inside it); " SINGLE);
    ck_refused("redis://u%00:p@h", "the user holds %00 or a bad %-escape; " SINGLE);
    ck_refused("unix://", "a unix socket needs an absolute path (unix:///path.sock); " SINGLE);
    ck_refused("unix://host/x.sock",
               "a unix socket needs an absolute path (unix:///path.sock); " SINGLE);
    ck_refused("redis+cluster://a:7000,,b:7001", "no host; " CLUSTER);
    ck_refused("redis+cluster://a:7000,", "no host; " CLUSTER);
    ck_refused("redis+sentinel://s1:26379",
               "no master name after the addresses (…/mymaster); " SENTINEL);
    ck_refused("redis+sentinel://s1:26379/",
               "no master name after the addresses (…/mymaster); " SENTINEL);
    ck_refused("redis+sentinel://s1/a/b",
               "the master name holds a /, %00 or a bad %-escape; " SENTINEL);
    ck_refused("redis+sentinel://s1/m?db=x", "the database is not a whole number; " SENTINEL);
    ck_refused("rediss+cluster://a:7000/2",
               "a database: a Redis Cluster has only database 0; expected "
               "rediss+cluster://[user:password@]host:port[,host:port...]");
}
END_TEST

START_TEST(the_password_is_never_repeated)
{
    const char *urls[] = {
        "redis://u:TOPSECRET@h:port",
        "redis+cluster://u:TOPSECRET@a:1,b:x",
        "redis+sentinel://:TOPSECRET@s1",
        "rediss+cluster://u:TOPSECRET@a:1/3",
        "redis://u:TOPSECRET%zz@h",
        "redis://u:TOPSECRET@::1",
        "redis+sentinel://:TOPSECRET@s/m?db=a",
        "ftp://u:TOPSECRET@h",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(urls); i++) {
        g_autofree char *why = refused(urls[i]);
        ck_assert_msg(!strstr(why, "TOPSECRET"), "%s", why);
    }
}
END_TEST

/* The keyfile refuses a bad URL with the file, group and key, and takes the
 * Sentinels' password from its own file. */
START_TEST(the_keyfile_refuses_a_bad_url_without_echoing_it)
{
    g_autofree char *path =
        fixture_write_keyfile("[sluice]\nredis = redis+cluster://app:TOPSECRET@127.0.0.1:7000/2\n");
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_config_check(path, &error));
    g_autofree char *expected = g_strdup_printf(
        "%s: [sluice] redis: a database: a Redis Cluster has only database 0; " CLUSTER, path);
    ck_assert_str_eq(error->message, expected);
}
END_TEST

START_TEST(the_sentinels_password_comes_from_its_own_file)
{
    g_autofree char *dir = g_dir_make_tmp("sluice-url-XXXXXX", NULL);
    g_autofree char *pass = g_build_filename(dir, "sentinel.pass", NULL);
    g_autofree char *empty = g_build_filename(dir, "empty.pass", NULL);
    ck_assert(g_file_set_contents(pass, "s3cret\n", -1, NULL));
    ck_assert(g_file_set_contents(empty, "", 0, NULL));
    g_chmod(pass, 0600);
    g_autofree char *good = g_strdup_printf(
        "[sluice]\nredis = redis+sentinel://127.0.0.1:26379/m\nsentinel_password_file = %s\n",
        pass);
    g_autofree char *good_path = fixture_write_keyfile(good);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_config_check(good_path, &error), "%s", error ? error->message : "");

    g_autofree char *bad = g_strdup_printf(
        "[sluice]\nredis = redis+sentinel://127.0.0.1:26379/m\nsentinel_password_file = %s\n",
        empty);
    g_autofree char *bad_path = fixture_write_keyfile(bad);
    ck_assert(!sluice_config_check(bad_path, &error));
    g_autofree char *expected = g_strdup_printf(
        "%s: [sluice] sentinel_password_file = %s: %s is empty; expected the password", bad_path,
        empty, empty);
    ck_assert_str_eq(error->message, expected);
    g_unlink(pass);
    g_unlink(empty);
    g_rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redis_url");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, one_server_url_keeps_its_parts);
    tcase_add_test(tc, unix_socket_url_keeps_its_path_and_db);
    tcase_add_test(tc, cluster_url_lists_every_seed_node);
    tcase_add_test(tc, sentinel_url_names_the_sentinels_and_the_master);
    tcase_add_test(tc, tls_url_of_one_server_sets_the_flag_only);
    tcase_add_test(tc, a_port_that_is_not_a_number_says_so);
    tcase_add_test(tc, a_database_on_a_cluster_url_is_refused);
    tcase_add_test(tc, bad_urls_say_what_is_wrong);
    tcase_add_test(tc, the_password_is_never_repeated);
    tcase_add_test(tc, the_keyfile_refuses_a_bad_url_without_echoing_it);
    tcase_add_test(tc, the_sentinels_password_comes_from_its_own_file);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
