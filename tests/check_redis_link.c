/* SPDX-License-Identifier: MIT */
/* The blocking callers' shared, pipelined connection to Redis (src/redis_link.c), against
 * a real redis-server: one connection for many threads, every reply to its own caller
 * (also across a server that hangs past the callers' timeouts), and fork() while threads
 * are deciding. */
#include "fixture.h"

#include <glib/gstdio.h>
#include <string.h>

#define THREADS 16

/* The connections the server has, this command's own included. */
static int clients_connected(void)
{
    redisReply *r = test_redis_command(fixture_redis(), "CLIENT LIST TYPE normal");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    int lines = 0;
    for (const char *p = r->str; (p = strchr(p, '\n')); p++)
        lines++;
    freeReplyObject(r);
    return lines;
}

/* Lets threads start deciding together. */
typedef struct {
    GMutex lock;
    GCond cond;
    int waiting, total;
} barrier;

static void barrier_wait(barrier *b)
{
    g_mutex_lock(&b->lock);
    if (++b->waiting == b->total)
        g_cond_broadcast(&b->cond);
    while (b->waiting < b->total)
        g_cond_wait(&b->cond, &b->lock);
    g_mutex_unlock(&b->lock);
}

/* ---- many threads, one connection ----------------------------------------------------- */

#define PER_KEY_LIMIT 50

typedef struct {
    barrier *start;
    int index;
    char *failure; /* the first wrong answer this thread saw */
} caller;

/* Each thread on its own key: its answers count down from the limit exactly, so a
 * reply handed to another thread would show as a wrong remaining or verdict. */
static gpointer count_down(gpointer data)
{
    caller *c = data;
    char key[16];
    g_snprintf(key, sizeof key, "k%d", c->index);
    barrier_wait(c->start);
    for (int i = 0; i < 2 * PER_KEY_LIMIT && !c->failure; i++) {
        sluice_decision d;
        GError *error = NULL;
        int r = sluice_acquire("t", key, 1, &d, &error);
        gboolean allowed = i < PER_KEY_LIMIT;
        gint64 remaining = allowed ? PER_KEY_LIMIT - 1 - i : 0;
        if (r != (allowed ? SLUICE_ALLOWED : SLUICE_DENIED) || d.remaining != remaining)
            c->failure = g_strdup_printf("call %d on %s: %d, remaining %" G_GINT64_FORMAT
                                         " (expected %s, %" G_GINT64_FORMAT ")%s%s",
                                         i, key, r, d.remaining, allowed ? "allowed" : "denied",
                                         remaining, error ? ": " : "", error ? error->message : "");
        g_clear_error(&error);
    }
    return NULL;
}

START_TEST(threads_share_one_connection_and_each_gets_its_own_answers)
{
    fixture_init("[limit:t]\nalgorithm = fixed_window\nlimit = 50\nwindow = 1h\n");
    int before = clients_connected(); /* sluice's connection (made at init) and this one */
    barrier start = {.total = THREADS};
    caller callers[THREADS];
    GThread *threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        callers[i] = (caller){&start, i, NULL};
        threads[i] = g_thread_new("caller", count_down, &callers[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        g_thread_join(threads[i]);
        ck_assert_msg(!callers[i].failure, "%s", callers[i].failure);
    }
    ck_assert_int_eq(before, 2);
    ck_assert_int_eq(clients_connected(), 2); /* 16 threads, still one connection */
    sluice_shutdown();
}
END_TEST

START_TEST(a_reload_that_changes_the_server_settings_closes_the_old_connection)
{
    g_autofree char *first =
        fixture_contents("[sluice]\nreload = false\n"
                         "[limit:t]\nalgorithm = gcra\nlimit = 5\nwindow = 1s\n");
    g_autofree char *path = fixture_write_keyfile(first);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    for (int i = 0; i < 3; i++) {
        /* another timeout: another backend, and another connection */
        g_autofree char *next = g_strdup_printf("%s[sluice]\ntimeout = %ds\n", first, 3 + i);
        ck_assert(g_file_set_contents(path, next, -1, NULL));
        ck_assert_msg(sluice_reload(&error), "%s", error ? error->message : "");
        ck_assert_int_eq(sluice_acquire("t", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
        ck_assert_int_eq(clients_connected(), 2); /* the new one, and this command's */
    }
    sluice_shutdown();
    g_unlink(path);
}
END_TEST

/* ---- replies reach their callers across a hung server ----------------------------------- */

/* Thread i decides on limit "r<i>" of limit BAND * (i + 1) + HEADROOM and takes fewer
 * than HEADROOM permits (counting those of calls that failed but ran: at most one
 * per failure): its remaining always lies in its own band. */
#define BAND     100000
#define HEADROOM 50000

typedef struct {
    int index;
    gint *stop;
    gint64 answered;          /* answers from Redis */
    gint64 answered_at_pause; /* ... when the last pause ended */
    gint *resumed;
    char *failure;
} band_caller;

static gpointer decide_in_band(gpointer data)
{
    band_caller *c = data;
    char name[16];
    g_snprintf(name, sizeof name, "r%d", c->index);
    gint64 top = BAND * (c->index + 1) + HEADROOM;
    for (int taken = 0; taken < HEADROOM / 2 && !g_atomic_int_get(c->stop) && !c->failure;
         taken++) {
        sluice_decision d;
        GError *error = NULL;
        int r = sluice_acquire(name, NULL, 1, &d, &error);
        if (r == SLUICE_ALLOWED) {
            if (d.remaining < top - HEADROOM || d.remaining >= top)
                c->failure =
                    g_strdup_printf("%s: remaining %" G_GINT64_FORMAT ", outside [%" G_GINT64_FORMAT
                                    ", %" G_GINT64_FORMAT "): another caller's reply",
                                    name, d.remaining, top - HEADROOM, top);
            c->answered++;
            if (!g_atomic_int_get(c->resumed))
                c->answered_at_pause = c->answered;
        } else if (r != SLUICE_FAILED) {
            c->failure = g_strdup_printf("%s: %d, %s", name, r, error ? error->message : "");
        } else {
            g_usleep(2000);
        }
        g_clear_error(&error);
        g_usleep(500);
    }
    return NULL;
}

START_TEST(every_reply_reaches_its_caller_across_a_hung_server)
{
    GString *keyfile = g_string_new("[sluice]\ntimeout = 100ms\non_error = deny\n");
    for (int i = 0; i < 8; i++)
        g_string_append_printf(keyfile,
                               "[limit:r%d]\nalgorithm = fixed_window\nlimit = %d\nwindow = 1h\n",
                               i, BAND * (i + 1) + HEADROOM);
    fixture_init(keyfile->str);
    g_string_free(keyfile, TRUE);

    gint stop = 0, resumed = 0;
    band_caller callers[8];
    GThread *threads[8];
    for (int i = 0; i < 8; i++) {
        callers[i] = (band_caller){.index = i, .stop = &stop, .resumed = &resumed};
        threads[i] = g_thread_new("caller", decide_in_band, &callers[i]);
    }
    /* pauses shorter than, about as long as, and longer than the callers' timeout:
     * some callers leave their place in the line, some connections are dropped */
    static const int pauses_ms[] = {60, 95, 105, 150, 40};
    for (guint p = 0; p < G_N_ELEMENTS(pauses_ms); p++) {
        g_usleep(150000);
        test_redis_pause(fixture_redis());
        g_usleep(pauses_ms[p] * 1000);
        test_redis_resume(fixture_redis());
    }
    g_atomic_int_set(&resumed, 1);
    g_usleep(1000000); /* the breaker's longest pause is 500 ms */
    g_atomic_int_set(&stop, 1);
    for (int i = 0; i < 8; i++) {
        g_thread_join(threads[i]);
        ck_assert_msg(!callers[i].failure, "%s", callers[i].failure);
        ck_assert_msg(callers[i].answered > callers[i].answered_at_pause,
                      "r%d: no answer from Redis after it came back", i);
    }
    sluice_shutdown();
}
END_TEST

/* ---- fork() while threads decide -------------------------------------------------------- */

enum { CHILDREN = 6, CALLS = 3 };

/* A child stuck on its parent's connection (or lock) never answers. */
static gboolean child_decides(void)
{
    int ok = 0;
    for (int i = 0; i < CALLS; i++) {
        GError *error = NULL;
        ok += sluice_acquire("child", NULL, 1, NULL, &error) == SLUICE_ALLOWED && !error;
        g_clear_error(&error);
    }
    return ok == CALLS;
}

START_TEST(a_child_forked_while_threads_decide_gets_its_own_connection)
{
    fixture_init("[limit:busy]\nalgorithm = token_bucket\nlimit = 1000000\nwindow = 1s\n"
                 "[limit:child]\nalgorithm = fixed_window\nlimit = 100\nwindow = 1h\n");
    int checked = fixture_fork_children("busy", CHILDREN, 20000, child_decides);
    /* every child's permits were taken in Redis (none under TSan); the parent still
     * decides */
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("child", NULL, 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 100 - checked * CALLS);
    sluice_shutdown();
}
END_TEST

int main(void)
{
    g_setenv("SLUICE_TEST_BACKEND", "redis", TRUE);
    Suite *s = suite_create("redis_link");
    TCase *tc = tcase_create("link");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, threads_share_one_connection_and_each_gets_its_own_answers);
    tcase_add_test(tc, a_reload_that_changes_the_server_settings_closes_the_old_connection);
    tcase_add_test(tc, every_reply_reaches_its_caller_across_a_hung_server);
    tcase_add_test(tc, a_child_forked_while_threads_decide_gets_its_own_connection);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
