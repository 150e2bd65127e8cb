/* SPDX-License-Identifier: MIT */
/* Hot reload: saves of the keyfile apply within a second, broken files are refused. */
#include "fixture.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <unistd.h>

/* How long a save may take to apply (the bound), and how long a test waits
 * for something that must not happen. */
#define APPLY_MS (1000 * fixture_time_scale()) /* ×N under valgrind */
#define QUIET_MS (1200 * fixture_time_scale())

static char *dir;  /* a directory of the test's own */
static char *path; /* the keyfile sluice watches, in dir */

static void setup(void)
{
    dir = g_dir_make_tmp("sluice-reload-XXXXXX", NULL);
    ck_assert_ptr_nonnull(dir);
    path = g_build_filename(dir, "limits.ini", NULL);
}

static void teardown(void)
{
    sluice_shutdown();
    test_remove_dir(dir);
    g_clear_pointer(&dir, g_free);
    g_clear_pointer(&path, g_free);
}

/* Writes the keyfile in place (truncate and write), as `echo >` and some editors do. */
static void write_in_place(const char *p, const char *contents)
{
    g_autofree char *full = fixture_contents(contents);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(full, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

/* Writes a temporary file beside it and renames it over the keyfile, as vim, gedit
 * and g_file_set_contents do. */
static void write_by_rename(const char *p, const char *contents)
{
    g_autofree char *full = fixture_contents(contents);
    g_autofree char *tmp = g_strconcat(p, ".tmp", NULL);
    ck_assert(g_file_set_contents(tmp, full, -1, NULL));
    ck_assert_int_eq(g_rename(tmp, p), 0);
}

static void start(const char *contents)
{
    fixture_flush();
    write_in_place(path, contents);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
}

static gint64 limit_of(const char *name)
{
    sluice_decision d;
    ck_assert_int_ne(sluice_acquire(name, NULL, 0, &d, NULL), SLUICE_FAILED);
    return d.limit;
}

/* Milliseconds until `name` has limit `expected`, or -1 after timeout_ms. */
static gint64 wait_for_limit(const char *name, gint64 expected, gint64 timeout_ms)
{
    gint64 start = g_get_monotonic_time();
    for (;;) {
        gint64 elapsed = (g_get_monotonic_time() - start) / 1000;
        if (limit_of(name) == expected)
            return elapsed;
        if (elapsed > timeout_ms)
            return -1;
        g_usleep(5000);
    }
}

#define RULE(limit) "[limit:api]\nalgorithm = fixed_window\nlimit = " #limit "\nwindow = 1h\n"

START_TEST(test_save_in_place_applies_within_a_second)
{
    start(RULE(5));
    ck_assert_int_eq(limit_of("api"), 5);
    g_usleep(50 * 1000);
    write_in_place(path, RULE(7));
    gint64 ms = wait_for_limit("api", 7, APPLY_MS);
    ck_assert_msg(ms >= 0 && ms <= APPLY_MS, "applied after %" G_GINT64_FORMAT " ms", ms);
}
END_TEST

START_TEST(test_rename_save_applies)
{
    start(RULE(5));
    write_by_rename(path, RULE(9));
    gint64 ms = wait_for_limit("api", 9, APPLY_MS);
    ck_assert_msg(ms >= 0 && ms <= APPLY_MS, "applied after %" G_GINT64_FORMAT " ms", ms);
    /* a second save to the new inode is seen too */
    write_by_rename(path, RULE(11));
    ck_assert_int_ge(wait_for_limit("api", 11, APPLY_MS), 0);
}
END_TEST

START_TEST(test_delete_then_write_applies)
{
    start(RULE(5));
    ck_assert_int_eq(g_unlink(path), 0);
    g_usleep(250 * 1000); /* the watcher sees it gone: the rules stay */
    ck_assert_int_eq(limit_of("api"), 5);
    write_in_place(path, RULE(6));
    ck_assert_int_ge(wait_for_limit("api", 6, APPLY_MS), 0);
}
END_TEST

/* A configuration manager's deploy: the keyfile is a symlink swapped to a new target. */
START_TEST(test_symlink_swap_applies)
{
    g_autofree char *v1 = g_build_filename(dir, "v1.ini", NULL);
    g_autofree char *v2 = g_build_filename(dir, "v2.ini", NULL);
    g_autofree char *link = g_build_filename(dir, "link.tmp", NULL);
    write_in_place(v1, RULE(5));
    write_in_place(v2, RULE(8));
    ck_assert_int_eq(symlink(v1, path), 0);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(limit_of("api"), 5);
    ck_assert_int_eq(symlink(v2, link), 0);
    ck_assert_int_eq(g_rename(link, path), 0);
    ck_assert_int_ge(wait_for_limit("api", 8, APPLY_MS), 0);
}
END_TEST

/* Messages logged at warning level by sluice: the watcher thread logs them. */
static GPtrArray *warnings; /* under warnings_lock */
static GMutex warnings_lock;

static void record_warning(const gchar *domain, GLogLevelFlags level, const gchar *message,
                           gpointer user_data)
{
    (void)domain, (void)level, (void)user_data;
    g_mutex_lock(&warnings_lock);
    if (warnings)
        g_ptr_array_add(warnings, g_strdup(message));
    g_mutex_unlock(&warnings_lock);
}

static gboolean warned(const char *a, const char *b, const char *c)
{
    gboolean found = FALSE;
    g_mutex_lock(&warnings_lock);
    for (guint i = 0; i < warnings->len && !found; i++) {
        const char *m = g_ptr_array_index(warnings, i);
        found = strstr(m, a) && strstr(m, b) && strstr(m, c);
    }
    g_mutex_unlock(&warnings_lock);
    return found;
}

static guint warnings_logged(void)
{
    g_mutex_lock(&warnings_lock);
    guint n = warnings->len;
    g_mutex_unlock(&warnings_lock);
    return n;
}

START_TEST(test_broken_file_is_refused_and_logged)
{
    g_mutex_lock(&warnings_lock);
    warnings = g_ptr_array_new_with_free_func(g_free);
    g_mutex_unlock(&warnings_lock);
    guint handler = g_log_set_handler("sluice", G_LOG_LEVEL_WARNING, record_warning, NULL);
    start(RULE(5));
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("api", NULL, 5, &d, NULL), SLUICE_ALLOWED);

    write_in_place(path, "[limit:api]\nalgorithm = fixed_window\nlimit = -3\nwindow = 1h\n");
    g_usleep(QUIET_MS * 1000);
    ck_assert_msg(warned(path, "[limit:api]", "limit = -3"), "no warning naming file, group, key");
    /* the running rule stays, and so does its state */
    ck_assert_int_eq(sluice_acquire("api", NULL, 1, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(d.limit, 5);
    guint logged = warnings_logged();
    g_usleep(300 * 1000); /* logged once, not once per tick */
    ck_assert_uint_eq(warnings_logged(), logged);

    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_reload(&error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG));
    ck_assert_ptr_nonnull(strstr(error->message, path));
    ck_assert_ptr_nonnull(strstr(error->message, "[limit:api] limit = -3"));

    write_in_place(path, RULE(6)); /* fixed: applies */
    ck_assert_int_ge(wait_for_limit("api", 6, APPLY_MS), 0);
    sluice_shutdown(); /* joins the watcher, which logs: only then the handler goes */
    g_log_remove_handler("sluice", handler);
    g_mutex_lock(&warnings_lock);
    g_clear_pointer(&warnings, g_ptr_array_unref);
    g_mutex_unlock(&warnings_lock);
}
END_TEST

START_TEST(test_unchanged_rule_keeps_its_state)
{
    const char *both = "[limit:a]\nalgorithm = token_bucket\nlimit = 2\nwindow = 1h\n"
                       "[limit:b]\nalgorithm = sliding_log\nlimit = 3\nwindow = 1h\n";
    start(both);
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("a", NULL, 2, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("b", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    write_by_rename(path, "[limit:a]\nalgorithm = token_bucket\nlimit = 2\nwindow = 1h\n"
                          "[limit:b]\nalgorithm = sliding_log\nlimit = 4\nwindow = 1h\n"
                          "[limit:c]\nlimit = 1\nwindow = 1m\n");
    ck_assert_int_ge(wait_for_limit("b", 4, APPLY_MS), 0);
    ck_assert_int_eq(sluice_acquire("a", NULL, 1, &d, NULL), SLUICE_DENIED); /* no free burst */
    ck_assert_int_eq(d.remaining, 0);
    ck_assert_int_eq(sluice_acquire("b", NULL, 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 3); /* same algorithm, larger limit: its log stays */
    ck_assert_int_eq(limit_of("c"), 1);
}
END_TEST

/* A new algorithm keeps state another way: it starts afresh, on Redis too (its keys
 * carry the algorithm, so a sorted set is never read as a string). */
START_TEST(test_a_new_algorithm_starts_afresh)
{
    start("[sluice]\nreload = false\n" RULE(2));
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("api", NULL, 2, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("api", NULL, 1, &d, NULL), SLUICE_DENIED);
    write_in_place(path, "[sluice]\nreload = false\n"
                         "[limit:api]\nalgorithm = sliding_log\nlimit = 2\nwindow = 1h\n");
    ck_assert(sluice_reload(NULL));
    g_autoptr(GError) error = NULL;
    ck_assert_int_eq(sluice_acquire("api", NULL, 2, &d, &error), SLUICE_ALLOWED);
    ck_assert_ptr_null(error);
}
END_TEST

START_TEST(test_reload_false_stops_watching)
{
    start("[sluice]\nreload = false\n" RULE(5));
    write_in_place(path, "[sluice]\nreload = false\n" RULE(7));
    g_usleep(QUIET_MS * 1000);
    ck_assert_int_eq(limit_of("api"), 5);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_reload(&error), "%s", error ? error->message : "");
    ck_assert_int_eq(limit_of("api"), 7);
    /* turning it back on by a forced reload starts watching again */
    write_in_place(path, RULE(8));
    ck_assert(sluice_reload(NULL));
    write_in_place(path, RULE(9));
    ck_assert_int_ge(wait_for_limit("api", 9, APPLY_MS), 0);
}
END_TEST

/* ---- four threads keep deciding while the limit changes ------------------------ */

#define THREADS 4

typedef struct {
    gint stop;
    gint errors;
    gint armed;           /* saved_at is set */
    gint64 saved_at;      /* monotonic µs of the save */
    gint64 seen[THREADS]; /* µs after the save when each saw the new limit; -1: not yet */
    gint next;            /* hands out thread numbers */
} live;

static gpointer caller(gpointer p)
{
    live *l = p;
    int me = g_atomic_int_add(&l->next, 1);
    while (!g_atomic_int_get(&l->stop)) {
        sluice_decision d;
        if (sluice_acquire("api", NULL, 1, &d, NULL) == SLUICE_FAILED)
            g_atomic_int_inc(&l->errors);
        if (d.limit == 200000 && g_atomic_int_get(&l->armed) && l->seen[me] < 0)
            __atomic_store_n(&l->seen[me], g_get_monotonic_time() - l->saved_at, __ATOMIC_RELAXED);
        /* callers of a service pause between calls; four threads that never do
         * starve the watcher under valgrind, which runs one thread at a time */
        g_usleep(50);
    }
    return NULL;
}

static gboolean all_seen(live *l)
{
    for (int i = 0; i < THREADS; i++)
        if (__atomic_load_n(&l->seen[i], __ATOMIC_RELAXED) < 0)
            return FALSE;
    return TRUE;
}

START_TEST(test_four_threads_see_the_new_limit_within_a_second)
{
    start("[limit:api]\nalgorithm = token_bucket\nlimit = 100000\nwindow = 1s\n");
    live l = {0};
    for (int i = 0; i < THREADS; i++)
        l.seen[i] = -1;
    GThread *threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        threads[i] = g_thread_new("caller", caller, &l);
    g_usleep(200 * 1000);
    l.saved_at = g_get_monotonic_time();
    g_atomic_int_set(&l.armed, 1);
    write_by_rename(path, "[limit:api]\nalgorithm = token_bucket\nlimit = 200000\nwindow = 1s\n");
    for (gint64 i = 0; i < 3 * APPLY_MS / 10 && !all_seen(&l); i++) /* up to 3 s, ×N */
        g_usleep(10 * 1000);
    g_atomic_int_set(&l.stop, 1);
    for (int i = 0; i < THREADS; i++)
        g_thread_join(threads[i]);
    for (int i = 0; i < THREADS; i++)
        ck_assert_msg(l.seen[i] >= 0 && l.seen[i] <= APPLY_MS * 1000,
                      "thread %d saw the new limit after %" G_GINT64_FORMAT " µs", i, l.seen[i]);
    ck_assert_int_eq(l.errors, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reload");
    TCase *tc = tcase_create("reload");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_save_in_place_applies_within_a_second);
    tcase_add_test(tc, test_rename_save_applies);
    tcase_add_test(tc, test_delete_then_write_applies);
    tcase_add_test(tc, test_symlink_swap_applies);
    tcase_add_test(tc, test_broken_file_is_refused_and_logged);
    tcase_add_test(tc, test_unchanged_rule_keeps_its_state);
    tcase_add_test(tc, test_a_new_algorithm_starts_afresh);
    tcase_add_test(tc, test_reload_false_stops_watching);
    tcase_add_test(tc, test_four_threads_see_the_new_limit_within_a_second);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
