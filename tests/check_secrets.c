/* SPDX-License-Identifier: MIT */
/* The Redis password: taken from the URL, $SLUICE_REDIS_PASSWORD or password_file,
 * and never in a log line or an error message, whatever fails. */
#include "fixture.h"

#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PASSWORD "Pa55-w0rd-4-sluice"  /* the server's                    */
#define WRONG    "Wr0ng-S3cret-p4ss"   /* refused                         */
#define ACL_PASS "acl-Pa55-for-app-u5" /* ACL user app's                  */

static test_redis *secured; /* --requirepass PASSWORD, ACL user app */

/* ---- everything logged, and every error, for the test to search ------------------ */

static GMutex logged_lock;
static GString *logged; /* every log line of this process, one per line */

static GLogWriterOutput capture(GLogLevelFlags level, const GLogField *fields, gsize n,
                                gpointer data)
{
    (void)level;
    (void)data;
    g_mutex_lock(&logged_lock);
    for (gsize i = 0; i < n; i++) {
        if (strcmp(fields[i].key, "MESSAGE") == 0)
            g_string_append_printf(logged, "%s\n", (const char *)fields[i].value);
    }
    g_mutex_unlock(&logged_lock);
    return G_LOG_WRITER_HANDLED;
}

/* Logs and errors seen since the last forget(). */
static GString *seen(void)
{
    g_mutex_lock(&logged_lock);
    GString *copy = g_string_new(logged->str);
    g_mutex_unlock(&logged_lock);
    return copy;
}

static void forget(void)
{
    g_mutex_lock(&logged_lock);
    g_string_truncate(logged, 0);
    g_mutex_unlock(&logged_lock);
}

static void note_error(const GError *error)
{
    if (!error)
        return;
    g_mutex_lock(&logged_lock);
    g_string_append_printf(logged, "ERROR %s\n", error->message);
    g_mutex_unlock(&logged_lock);
}

/* No password, right or wrong, in anything logged or returned so far. */
static void assert_no_password(void)
{
    g_autoptr(GString) all = seen();
    const char *const secrets[] = {PASSWORD, WRONG, ACL_PASS, "Pa55", "S3cret"};
    for (gsize i = 0; i < G_N_ELEMENTS(secrets); i++)
        ck_assert_msg(!strstr(all->str, secrets[i]), "a password appears in:\n%s", all->str);
}

static gboolean seen_text(const char *text)
{
    g_autoptr(GString) all = seen();
    return strstr(all->str, text) != NULL;
}

/* ---- keyfiles ------------------------------------------------------------------ */

/* A keyfile for the secured server (port 0: one nobody listens on); userinfo
 * goes before the host ("" for none); extra lines go into [sluice]. */
static char *keyfile(const char *userinfo, int port, const char *extra)
{
    g_autofree char *ini = g_strdup_printf(
        "[sluice]\nbackend = redis\nredis = redis://%s127.0.0.1:%d/0\ntimeout = 1s\n"
        "on_error = deny\n%s\n[limit:a]\nalgorithm = fixed_window\nlimit = 1\nwindow = 1m\n",
        userinfo, port ? port : secured->port, extra ? extra : "");
    return fixture_write_keyfile(ini);
}

static GPtrArray *made; /* password files and their directories, removed at exit */

static void remove_made(void)
{
    for (guint i = made->len; i-- > 0;) {
        const char *path = g_ptr_array_index(made, i);
        if (g_unlink(path) != 0)
            g_rmdir(path);
    }
}

/* A new file holding contents (mode 0600), alone in a new directory. */
static char *secret_file(const char *contents)
{
    if (!made) {
        made = g_ptr_array_new_with_free_func(g_free);
        atexit(remove_made);
    }
    char *dir = g_dir_make_tmp("sluice-secret-XXXXXX", NULL);
    g_ptr_array_add(made, dir);
    char *path = g_build_filename(dir, "redis.pass", NULL);
    ck_assert(g_file_set_contents(path, contents, -1, NULL));
    g_chmod(path, 0600);
    g_ptr_array_add(made, g_strdup(path));
    return path;
}

static void flush_secured(void)
{
    freeReplyObject(test_redis_command(secured, "FLUSHALL")); /* with the server's password */
}

/* sluice_init on path must work, and the limit must be decided in Redis. */
static void assert_works(const char *path)
{
    flush_secured();
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(sluice_acquire("a", NULL, 1, NULL, &error), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("a", NULL, 1, NULL, &error), SLUICE_DENIED);
    ck_assert_ptr_null(error);
    sluice_shutdown();
}

/* sluice_init on path must fail with code; returns the message. */
static char *assert_refused(const char *path, int code)
{
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_init(path, &error));
    note_error(error);
    ck_assert_msg(g_error_matches(error, SLUICE_ERROR, code), "%s", error->message);
    return g_strdup(error->message);
}

/* ---- where the password comes from ---------------------------------------------- */

START_TEST(the_password_can_come_from_the_url_the_environment_or_a_file)
{
    g_autofree char *in_url = keyfile(":" PASSWORD "@", 0, NULL);
    assert_works(in_url);

    g_setenv("SLUICE_REDIS_PASSWORD", PASSWORD, TRUE);
    g_autofree char *from_env = keyfile("", 0, NULL);
    assert_works(from_env);
    g_unsetenv("SLUICE_REDIS_PASSWORD");

    g_autofree char *file = secret_file(PASSWORD "\n"); /* the line end is not part of it */
    g_autofree char *line = g_strdup_printf("password_file = %s", file);
    g_autofree char *from_file = keyfile("", 0, line);
    assert_works(from_file);

    g_autofree char *crlf = secret_file(ACL_PASS "\r\n");
    g_autofree char *acl_line = g_strdup_printf("password_file = %s", crlf);
    g_autofree char *acl_user = keyfile("app@", 0, acl_line); /* user in the URL */
    assert_works(acl_user);
    assert_no_password();
}
END_TEST

START_TEST(a_relative_password_file_is_found_next_to_the_keyfile)
{
    g_autofree char *file = secret_file(PASSWORD);
    g_autofree char *dir = g_path_get_dirname(file);
    g_autofree char *ini = g_build_filename(dir, "limits.ini", NULL);
    g_autofree char *text = g_strdup_printf(
        "[sluice]\nbackend = redis\nredis = redis://127.0.0.1:%d\npassword_file = redis.pass\n"
        "[limit:a]\nalgorithm = fixed_window\nlimit = 1\nwindow = 1m\n",
        secured->port);
    ck_assert(g_file_set_contents(ini, text, -1, NULL));
    assert_works(ini);
    g_unlink(ini);
}
END_TEST

START_TEST(the_keyfile_wins_over_the_environment_and_holds_one_password_only)
{
    g_setenv("SLUICE_REDIS_PASSWORD", WRONG, TRUE);
    g_autofree char *in_url = keyfile(":" PASSWORD "@", 0, NULL);
    assert_works(in_url);

    g_autofree char *file = secret_file(PASSWORD);
    g_autofree char *line = g_strdup_printf("password_file = %s", file);
    g_autofree char *from_file = keyfile("", 0, line);
    assert_works(from_file);

    g_autofree char *both = keyfile(":" PASSWORD "@", 0, line);
    g_autofree char *message = assert_refused(both, SLUICE_ERROR_CONFIG);
    ck_assert_msg(strstr(message, "password_file") && strstr(message, "keep one of them"), "%s",
                  message);
    g_unsetenv("SLUICE_REDIS_PASSWORD");
    assert_no_password();
}
END_TEST

START_TEST(a_password_file_that_cannot_be_used_is_a_clear_error)
{
    g_autofree char *empty = secret_file("\n");
    g_autofree char *dir = g_path_get_dirname(empty);
    g_autofree char *huge = g_strnfill(5000, 'p');
    g_autofree char *too_big = secret_file(huge);
    struct {
        const char *path, *says;
    } const cases[] = {
        {"/nonexistent/redis.pass", "cannot read /nonexistent/redis.pass: No such file"},
        {dir, "not a regular file"},
        {empty, "is empty"},
        {too_big, "is larger than 4 KiB"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *line = g_strdup_printf("password_file = %s", cases[i].path);
        g_autofree char *path = keyfile("", 0, line);
        g_autofree char *message = assert_refused(path, SLUICE_ERROR_CONFIG);
        ck_assert_msg(strstr(message, "[sluice] password_file = ") &&
                          strstr(message, cases[i].says),
                      "%s", message);
    }
}
END_TEST

/* ---- never shown ------------------------------------------------------------------ */

START_TEST(a_refused_password_is_not_shown_wherever_it_came_from)
{
    forget();
    g_autofree char *in_url = keyfile(":" WRONG "@", 0, NULL);
    g_autofree char *m1 = assert_refused(in_url, SLUICE_ERROR_AUTH);
    ck_assert_msg(strstr(m1, "WRONGPASS"), "%s", m1);

    g_autofree char *acl = keyfile("app:" WRONG "@", 0, NULL);
    g_free(assert_refused(acl, SLUICE_ERROR_AUTH));

    g_setenv("SLUICE_REDIS_PASSWORD", WRONG, TRUE);
    g_autofree char *from_env = keyfile("", 0, NULL);
    g_free(assert_refused(from_env, SLUICE_ERROR_AUTH));
    g_unsetenv("SLUICE_REDIS_PASSWORD");

    g_autofree char *file = secret_file(WRONG "\n");
    g_autofree char *line = g_strdup_printf("password_file = %s", file);
    g_autofree char *from_file = keyfile("", 0, line);
    g_free(assert_refused(from_file, SLUICE_ERROR_AUTH));
    assert_no_password();
}
END_TEST

START_TEST(a_bad_url_is_not_repeated)
{
    const char *const urls[] = {
        "redis://:" WRONG "@127.0.0.1:notaport/0",
        "redis://app:" WRONG "@/0",
        "redis://app:" WRONG "@127.0.0.1:6379/zero",
        "redis://app:" WRONG "@127.0.0.1:6379/0?timeout=1",
        "http://app:" WRONG "@127.0.0.1:6379",
        "unix://app:" WRONG "@host/tmp/redis.sock",
        "redis://app:" WRONG "@127.0.0.1:0",
        "redis://app:" WRONG "@127.0.0.1:6379/\xff",
    };
    forget();
    for (gsize i = 0; i < G_N_ELEMENTS(urls); i++) {
        g_autofree char *ini =
            g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\n[limit:a]\nlimit = 1\n"
                            "window = 1s\n",
                            urls[i]);
        g_autofree char *path = fixture_write_keyfile(ini);
        g_free(assert_refused(path, SLUICE_ERROR_CONFIG));
    }
    /* a line that is not even key = value: GLib quotes it, sluice hides the password */
    g_autofree char *broken =
        fixture_write_keyfile("[sluice]\nbackend = redis\nredis://app:" WRONG "@127.0.0.1:6379\n");
    g_autofree char *message = assert_refused(broken, SLUICE_ERROR_CONFIG);
    ck_assert_msg(strstr(message, "redis://***@127.0.0.1:6379"), "%s", message);
    assert_no_password();
}
END_TEST

START_TEST(an_unreachable_server_is_reported_without_the_password)
{
    forget();
    int port = test_redis_free_port();
    g_setenv("SLUICE_REDIS_PASSWORD", WRONG, TRUE);
    g_autofree char *file = secret_file(WRONG "\n");
    g_autofree char *line = g_strdup_printf("password_file = %s", file);
    char *paths[] = {keyfile(":" WRONG "@", port, NULL), keyfile("", port, NULL),
                     keyfile("app@", port, line)};
    for (gsize i = 0; i < G_N_ELEMENTS(paths); i++) {
        g_autoptr(GError) error = NULL;
        ck_assert_msg(sluice_init(paths[i], &error), "%s", error ? error->message : "");
        for (int call = 0; call < 5; call++) { /* fail, then the breaker answers */
            sluice_decision d;
            ck_assert_int_eq(sluice_acquire("a", NULL, 1, &d, &error), SLUICE_FAILED);
            note_error(error);
            g_clear_error(&error);
        }
        sluice_shutdown();
        g_free(paths[i]);
    }
    g_unsetenv("SLUICE_REDIS_PASSWORD");
    ck_assert(seen_text("Connection refused")); /* what failed is said, and logged */
    ck_assert(seen_text("failed 3 times in a row"));
    assert_no_password();
}
END_TEST

/* ---- files others can read ---------------------------------------------------------- */

START_TEST(a_keyfile_or_password_file_others_can_read_is_warned_about)
{
    g_autofree char *path = keyfile(":" PASSWORD "@", 0, NULL);
    g_chmod(path, 0600);
    forget();
    assert_works(path);
    ck_assert(!seen_text("may read it"));

    g_chmod(path, 0644);
    forget();
    assert_works(path);
    g_autofree char *expected = g_strdup_printf("%s holds the Redis password and its group or "
                                                "others may read it (mode 0644)",
                                                path);
    ck_assert_msg(seen_text(expected), "no warning about %s", path);

    /* a password from elsewhere: the keyfile holds none, whatever its mode */
    g_autofree char *file = secret_file(PASSWORD);
    g_autofree char *line = g_strdup_printf("password_file = %s", file);
    g_autofree char *clean = keyfile("", 0, line);
    g_chmod(clean, 0644);
    forget();
    assert_works(clean);
    ck_assert(!seen_text("may read it"));
    g_chmod(file, 0640);
    forget();
    assert_works(clean);
    g_autofree char *about_file =
        g_strdup_printf("%s holds the Redis password and its group or others may read it (mode "
                        "0640)",
                        file);
    ck_assert(seen_text(about_file));
    assert_no_password();
}
END_TEST

int main(void)
{
    g_setenv("G_MESSAGES_DEBUG", "all", TRUE); /* debug messages too */
    g_unsetenv("SLUICE_REDIS_PASSWORD");
    logged = g_string_new(NULL);
    g_log_set_writer_func(capture, NULL, NULL);

    secured = test_redis_start_secured(PASSWORD, "app", ACL_PASS);

    Suite *s = suite_create("secrets");
    TCase *tc = tcase_create("secrets");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, the_password_can_come_from_the_url_the_environment_or_a_file);
    tcase_add_test(tc, a_relative_password_file_is_found_next_to_the_keyfile);
    tcase_add_test(tc, the_keyfile_wins_over_the_environment_and_holds_one_password_only);
    tcase_add_test(tc, a_password_file_that_cannot_be_used_is_a_clear_error);
    tcase_add_test(tc, a_refused_password_is_not_shown_wherever_it_came_from);
    tcase_add_test(tc, a_bad_url_is_not_repeated);
    tcase_add_test(tc, an_unreachable_server_is_reported_without_the_password);
    tcase_add_test(tc, a_keyfile_or_password_file_others_can_read_is_warned_about);
    suite_add_tcase(s, tc);

    int status = fixture_run(s);
    test_redis_stop(secured);
    return status;
}
