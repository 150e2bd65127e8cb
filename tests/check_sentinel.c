/* SPDX-License-Identifier: MIT */
/* Redis Sentinel: the test fixture fails over, and sluice finds the master through it. */
#include "fixture.h"
#include "redis_sentinel.h"

#include <glib/gstdio.h>
#include <signal.h>
#include <sluice/error.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis/sentinel.h"

#define PASSWORD          "data-pass"
#define SENTINEL_PASSWORD "sentinel-pass"

/* ---- the fixture ------------------------------------------------------------------ */

/* The fixture's master dies: the Sentinels say +switch-master to its replica, which
 * says it is the master, within a few seconds. */
START_TEST(the_fixture_fails_over_when_the_master_dies)
{
    const test_sentinel_options options = {.password = PASSWORD,
                                           .sentinel_password = SENTINEL_PASSWORD};
    test_sentinel *s = test_sentinel_start(&options);
    ck_assert_ptr_eq(test_sentinel_master(s, 5 * G_USEC_PER_SEC), s->node[0]);
    redisContext *sub = test_sentinel_subscribe(s, 0);

    gint64 killed = g_get_monotonic_time(), switched = 0;
    test_redis_kill(s->node[0]);
    test_redis *promoted = test_sentinel_wait_switch(s, &sub, 1, 20 * G_USEC_PER_SEC, &switched);
    ck_assert_ptr_eq(promoted, s->node[1]);
    g_printerr("check_sentinel: +switch-master %.2f s after the master died\n",
               (double)(switched - killed) / G_USEC_PER_SEC);
    /* the two other Sentinels learn it from the first's hello messages */
    ck_assert_ptr_eq(test_sentinel_master(s, 10 * G_USEC_PER_SEC), s->node[1]);
    redisFree(sub);
    test_sentinel_stop(s);
}
END_TEST

/* ---- finding the master ---------------------------------------------------------------- */

static test_sentinel *shared; /* for the tests that leave it as it is */
static test_redis *rogue;     /* a Sentinel that watches the replica as the master */

static void start_shared(void)
{
    const test_sentinel_options options = {.password = PASSWORD,
                                           .sentinel_password = SENTINEL_PASSWORD};
    shared = test_sentinel_start(&options);
    g_autofree char *config = g_strdup_printf("sentinel monitor %s 127.0.0.1 %d 1\n"
                                              "sentinel auth-pass %s %s\nrequirepass %s\n",
                                              TEST_SENTINEL_MASTER, shared->node[1]->port,
                                              TEST_SENTINEL_MASTER, PASSWORD, SENTINEL_PASSWORD);
    rogue = test_redis_start_program("redis-sentinel", config, NULL);
}

static void stop_shared(void)
{
    test_redis_stop(rogue);
    test_sentinel_stop(shared);
}

/* A resolver for the Sentinels given (a test_redis each), with these passwords. */
static sluice__redis_sentinel *resolver(test_redis *const *sentinels, guint n,
                                        const char *sentinel_password, const char *name)
{
    const char *hosts[4];
    int ports[4];
    for (guint i = 0; i < n; i++) {
        hosts[i] = "127.0.0.1";
        ports[i] = sentinels[i]->port;
    }
    return sluice__redis_sentinel_new(hosts, ports, n, name ? name : TEST_SENTINEL_MASTER,
                                      sentinel_password, NULL, PASSWORD, NULL, NULL);
}

/* What resolve says: the port it found, or 0 and *message. */
static int resolve(sluice__redis_sentinel *r, gint64 step_us, char **message, int *code)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *host = NULL;
    int port = 0;
    if (sluice__redis_sentinel_resolve(r, step_us, &host, &port, &error)) {
        ck_assert_str_eq(host, "127.0.0.1");
        return port;
    }
    ck_assert_ptr_nonnull(error);
    if (message)
        *message = g_strdup(error->message);
    if (code)
        *code = error->code;
    return 0;
}

START_TEST(the_master_is_the_server_the_sentinels_name_and_that_says_master)
{
    sluice__redis_sentinel *r = resolver(shared->sentinel, 3, SENTINEL_PASSWORD, NULL);
    ck_assert_int_eq(resolve(r, 500000, NULL, NULL), shared->node[0]->port);
    sluice__redis_sentinel_free(r);
}
END_TEST

/* A Sentinel that does not answer costs its share of the time, then the next is
 * asked; the one that answered is asked first the next time. */
START_TEST(a_sentinel_that_does_not_answer_is_passed_over_in_its_time)
{
    sluice__redis_sentinel *r = resolver(shared->sentinel, 3, SENTINEL_PASSWORD, NULL);
    test_redis_pause(shared->sentinel[0]);
    fixture_stamp start = fixture_stamp_now();
    int first = resolve(r, 100000, NULL, NULL);
    fixture_stamp end = fixture_stamp_now();
    fixture_stamp again = fixture_stamp_now();
    int second = resolve(r, 100000, NULL, NULL);
    gint64 took_again = fixture_stamp_took_us(again, fixture_stamp_now());
    test_redis_resume(shared->sentinel[0]); /* before any assertion: the next tests need it */
    sluice__redis_sentinel_free(r);
    ck_assert_int_eq(first, shared->node[0]->port);
    ck_assert_int_ge(end.now_us - start.now_us, 100000); /* Sentinel 0 timed out */
    /* Sentinel 1 answered (less the time this thread waited for a CPU) */
    ck_assert_int_lt(fixture_stamp_took_us(start, end), 200000 + 100000 * fixture_time_scale());
    ck_assert_int_eq(second, shared->node[0]->port);
    ck_assert_int_lt(took_again, 100000 * fixture_time_scale());
}
END_TEST

/* A Sentinel that names a replica (here one that watches it as the master) is
 * passed over: the replica says so when asked its ROLE. With no other Sentinel
 * there is no master, and the message says why. */
START_TEST(a_sentinel_that_names_a_replica_is_passed_over)
{
    test_redis *rogue_first[] = {rogue, shared->sentinel[1]};
    sluice__redis_sentinel *r = resolver(rogue_first, 2, SENTINEL_PASSWORD, NULL);
    ck_assert_int_eq(resolve(r, 500000, NULL, NULL), shared->node[0]->port);
    sluice__redis_sentinel_free(r);

    r = resolver(&rogue, 1, SENTINEL_PASSWORD, NULL);
    g_autofree char *message = NULL;
    ck_assert_int_eq(resolve(r, 500000, &message, NULL), 0);
    g_autofree char *expected = g_strdup_printf(
        "redis+sentinel master sluice: no Sentinel named a master: redis sentinel 127.0.0.1:%d "
        "named it: redis 127.0.0.1:%d: ROLE: says it is a slave, not the master",
        rogue->port, shared->node[1]->port);
    ck_assert_str_eq(message, expected);
    sluice__redis_sentinel_free(r);
}
END_TEST

START_TEST(a_wrong_sentinel_password_or_master_name_is_said)
{
    sluice__redis_sentinel *r = resolver(shared->sentinel, 1, "wrong", NULL);
    g_autofree char *message = NULL;
    int code = 0;
    ck_assert_int_eq(resolve(r, 500000, &message, &code), 0);
    ck_assert_int_eq(code, SLUICE_ERROR_AUTH);
    ck_assert_msg(strstr(message, "AUTH") && !strstr(message, "wrong"), "%s", message);
    sluice__redis_sentinel_free(r);

    r = resolver(shared->sentinel, 1, SENTINEL_PASSWORD, "nosuch");
    g_clear_pointer(&message, g_free);
    ck_assert_int_eq(resolve(r, 500000, &message, &code), 0);
    ck_assert_int_eq(code, SLUICE_ERROR_BACKEND);
    g_autofree char *expected =
        g_strdup_printf("redis+sentinel master nosuch: no Sentinel named a master: redis sentinel "
                        "127.0.0.1:%d: watches no master called nosuch",
                        shared->sentinel[0]->port);
    ck_assert_str_eq(message, expected);
    sluice__redis_sentinel_free(r);
}
END_TEST

/* ---- the redis backend through Sentinels ---------------------------------------------- */

/* A keyfile for s: redis+sentinel:// with the data nodes' password in the URL and
 * the Sentinels' in a file (sentinel_password is what the file holds). */
static char *keyfile_for(const test_sentinel *s, const char *sentinel_password, const char *rest)
{
    g_autofree char *path = fixture_write_keyfile(sentinel_password);
    g_chmod(path, 0600);
    return g_strdup_printf(
        "[sluice]\nbackend = redis\n"
        "redis = redis+sentinel://:%s@127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/%s\n"
        "sentinel_password_file = %s\n%s",
        s->password, s->sentinel[0]->port, s->sentinel[1]->port, s->sentinel[2]->port,
        TEST_SENTINEL_MASTER, path, rest);
}

static gboolean init_with(const char *contents, GError **error)
{
    g_autofree char *path = fixture_write_keyfile(contents);
    g_chmod(path, 0600); /* it holds the data nodes' password */
    gboolean ok = sluice_init(path, error);
    g_unlink(path);
    return ok;
}

/* sluice_init finds the master through the Sentinels, with both passwords; a wrong
 * Sentinel password stops it, as a wrong server password does. */
START_TEST(init_finds_the_master_through_the_sentinels)
{
    g_autofree char *good =
        keyfile_for(shared, SENTINEL_PASSWORD, "timeout = 2s\n[limit:x]\nlimit = 2\nwindow = 1m\n");
    g_autoptr(GError) error = NULL;
    ck_assert_msg(init_with(good, &error), "%s", error ? error->message : "");
    sluice_decision d;
    ck_assert_msg(sluice_acquire("x", "init", 1, &d, &error) == SLUICE_ALLOWED, "%s",
                  error ? error->message : "denied");
    redisReply *r = test_sentinel_node_command(shared, shared->node[0], "DBSIZE");
    ck_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer > 0); /* the master holds it */
    freeReplyObject(r);
    sluice_shutdown();

    g_autofree char *bad = keyfile_for(shared, "wrong", "[limit:x]\nlimit = 2\nwindow = 1m\n");
    ck_assert(!init_with(bad, &error));
    ck_assert_msg(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_AUTH), "%s", error->message);
    ck_assert_msg(strstr(error->message, "redis sentinel 127.0.0.1:") &&
                      !strstr(error->message, "wrong"),
                  "%s", error->message);
}
END_TEST

/* ---- failover while threads decide --------------------------------------------------------- */

#define TIMEOUT_MS 50
#define WINDOW_US  200000 /* shorter than the outage: no window spans it */
#define LIMIT      40

typedef struct {
    gint64 sent, received; /* monotonic µs */
    gint64 net_us;         /* how long it took, less the time the thread waited for a CPU */
    int result;            /* SLUICE_ALLOWED, _DENIED, _ERROR */
    gboolean allowed;
} call_record;

typedef struct {
    test_sentinel *s;
    redisContext *subs[3]; /* subscribed to each Sentinel's +switch-master */
    GThread *threads[4];
    gint stop;
    GMutex lock;
    GArray *calls; /* call_record */
} run;

static gpointer decide(gpointer data)
{
    run *r = data;
    GArray *mine = g_array_new(FALSE, FALSE, sizeof(call_record));
    while (!g_atomic_int_get(&r->stop)) {
        call_record c;
        sluice_decision d = {0};
        GError *error = NULL;
        fixture_stamp sent = fixture_stamp_now();
        c.result = sluice_acquire("f", NULL, 1, &d, &error);
        fixture_stamp received = fixture_stamp_now();
        c.sent = sent.now_us;
        c.received = received.now_us;
        c.net_us = fixture_stamp_took_us(sent, received);
        c.allowed = d.allowed;
        g_clear_error(&error);
        g_array_append_val(mine, c);
        g_usleep(500); /* 4 threads: about 8000 calls a second */
    }
    g_mutex_lock(&r->lock);
    g_array_append_vals(r->calls, mine->data, mine->len);
    g_mutex_unlock(&r->lock);
    g_array_free(mine, TRUE);
    return NULL;
}

static gint by_received(gconstpointer a, gconstpointer b)
{
    const call_record *x = a, *y = b;
    return (x->received > y->received) - (x->received < y->received);
}

/* A master, a replica and three Sentinels, a subscription to each Sentinel, and 4
 * threads deciding on limit f (sliding_log, LIMIT per WINDOW_US, on_error = deny)
 * through them for 300 ms already. */
static void run_start(run *r)
{
    const test_sentinel_options options = {.password = PASSWORD,
                                           .sentinel_password = SENTINEL_PASSWORD};
    *r = (run){.s = test_sentinel_start(&options),
               .calls = g_array_new(FALSE, FALSE, sizeof(call_record))};
    g_mutex_init(&r->lock);
    g_autofree char *contents = keyfile_for(
        r->s, SENTINEL_PASSWORD,
        "timeout = 50ms\non_error = deny\n[limit:f]\nalgorithm = sliding_log\nlimit = 40\n"
        "window = 200ms\n");
    g_autoptr(GError) error = NULL;
    ck_assert_msg(init_with(contents, &error), "%s", error ? error->message : "");
    for (int i = 0; i < 3; i++)
        r->subs[i] = test_sentinel_subscribe(r->s, i);
    for (guint i = 0; i < G_N_ELEMENTS(r->threads); i++)
        r->threads[i] = g_thread_new("decide", decide, r);
    g_usleep(300000);
}

/* Stops and joins the threads, and shuts sluice down. */
static void run_stop(run *r)
{
    g_atomic_int_set(&r->stop, 1);
    for (guint i = 0; i < G_N_ELEMENTS(r->threads); i++)
        g_thread_join(r->threads[i]);
    sluice_shutdown();
}

static void run_free(run *r)
{
    for (int i = 0; i < 3; i++)
        redisFree(r->subs[i]);
    g_array_free(r->calls, TRUE);
    g_mutex_clear(&r->lock);
    test_sentinel_stop(r->s);
}

/* The most admissions that certainly fell in one window: sent after its start and
 * answered by its end (Redis decided each somewhere between). */
static guint most_admitted_in_a_window(GArray *calls)
{
    guint most = 0;
    for (guint i = 0; i < calls->len; i++) {
        const call_record *end = &g_array_index(calls, call_record, i);
        guint in = 0;
        for (guint j = 0; end->allowed && j <= i; j++) {
            const call_record *c = &g_array_index(calls, call_record, j);
            in += c->allowed && c->sent > end->received - WINDOW_US;
        }
        most = MAX(most, in);
    }
    return most;
}

/* The master dies while threads decide: each call ends within the timeout
 * (on_error = deny answers meanwhile, and denies), decisions resume within a
 * second of the Sentinels' +switch-master, no window admits more than the limit,
 * and the old master, started again, is never sent a script. */
START_TEST(decisions_resume_on_the_new_master_within_a_second_of_the_switch)
{
    run r;
    run_start(&r);
    test_sentinel *s = r.s;
    gint64 killed = g_get_monotonic_time(), switched = 0;
    test_redis_kill(s->node[0]);
    ck_assert_ptr_eq(test_sentinel_wait_switch(s, r.subs, 3, 20 * G_USEC_PER_SEC, &switched),
                     s->node[1]);
    g_usleep(1200000);
    /* the old master is back, as a master until the Sentinels make it a replica:
     * they name the new one, so nothing is sent to it (its full sync forks the new
     * master, which may hold calls up for a while: not counted below) */
    gint64 restarted = g_get_monotonic_time();
    test_redis_restart(s->node[0]);
    g_usleep(500000);
    run_stop(&r);

    g_array_sort(r.calls, by_received);
    gint64 bound = (TIMEOUT_MS + 10) * 1000 * fixture_time_scale(), failing = 0, resumed = 0;
    guint errors = 0, after = 0, failed_after = 0;
    for (guint i = 0; i < r.calls->len; i++) {
        const call_record *c = &g_array_index(r.calls, call_record, i);
        ck_assert_msg(c->net_us <= bound, "a call took %" G_GINT64_FORMAT " µs", c->net_us);
        if (c->result == SLUICE_FAILED) {
            ck_assert(!c->allowed); /* on_error = deny */
            errors++;
        }
        if (c->sent < killed)
            continue;
        if (!failing && c->result == SLUICE_FAILED)
            failing = c->sent; /* the first call the dead master failed */
        else if (failing && !resumed && c->result != SLUICE_FAILED && c->sent > failing)
            resumed = c->received;
        if (resumed && c->sent > resumed && c->received < restarted) {
            after++;
            failed_after += c->result == SLUICE_FAILED;
        }
    }
    g_printerr("check_sentinel: %u calls, %u failed; +switch-master %.2f s after the master "
               "died, decisions resumed %.1f ms after it; then %u of %u calls failed\n",
               r.calls->len, errors, (double)(switched - killed) / G_USEC_PER_SEC,
               (double)(resumed - switched) / 1000, failed_after, after);
    ck_assert_int_gt(failing, 0);
    /* (maybe before the message came: a Sentinel names the promoted replica, and the
     * replica says it is the master, as soon as it is promoted) */
    ck_assert_int_lt(resumed, switched + G_USEC_PER_SEC);
    /* the new master decides from then on (a call may still time out now and then
     * on a loaded machine: the breaker's and the timeout's business) */
    ck_assert_uint_le(failed_after * 20, after);
    ck_assert_uint_le(most_admitted_in_a_window(r.calls), LIMIT);

    redisReply *stats = test_sentinel_node_command(s, s->node[0], "INFO commandstats");
    ck_assert(stats && stats->type == REDIS_REPLY_STRING);
    ck_assert_msg(!strstr(stats->str, "cmdstat_evalsha") && !strstr(stats->str, "cmdstat_eval:") &&
                      !strstr(stats->str, "cmdstat_fcall:"),
                  "%s", stats->str);
    freeReplyObject(stats);
    run_free(&r);
}
END_TEST

/* The FCALL, EVALSHA and EVAL that node ran (INFO commandstats: calls=N; a READONLY
 * refusal is a rejected call, not one). */
static long long scripts_run(const test_sentinel *s, const test_redis *node)
{
    redisReply *r = test_sentinel_node_command(s, node, "INFO commandstats");
    ck_assert(r && r->type == REDIS_REPLY_STRING);
    long long n = 0;
    static const char *const names[] = {
        "cmdstat_evalsha:calls=", "cmdstat_eval:calls=", "cmdstat_fcall:calls="};
    for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
        const char *at = strstr(r->str, names[i]);
        n += at ? g_ascii_strtoll(at + strlen(names[i]), NULL, 10) : 0;
    }
    freeReplyObject(r);
    return n;
}

/* A failover the operator asks for (SENTINEL FAILOVER): the old master lives on as
 * a replica; decisions move to the new master, and the old one runs no script
 * from then on. */
START_TEST(after_a_manual_failover_the_old_master_runs_no_script)
{
    run r;
    run_start(&r);
    test_sentinel *s = r.s;
    ck_assert_int_gt(scripts_run(s, s->node[0]), 0);
    redisReply *asked = test_sentinel_command(s, 0, "SENTINEL FAILOVER %s", TEST_SENTINEL_MASTER);
    ck_assert_msg(asked && asked->type == REDIS_REPLY_STATUS, "%s", asked ? asked->str : "?");
    freeReplyObject(asked);
    gint64 switched = 0;
    ck_assert_ptr_eq(test_sentinel_wait_switch(s, r.subs, 3, 20 * G_USEC_PER_SEC, &switched),
                     s->node[1]);
    g_usleep(G_USEC_PER_SEC);
    long long on_old = scripts_run(s, s->node[0]), on_new = scripts_run(s, s->node[1]);
    g_usleep(500000);
    ck_assert_int_eq(scripts_run(s, s->node[0]), on_old); /* a replica now: none */
    ck_assert_int_gt(scripts_run(s, s->node[1]), on_new);
    run_stop(&r);

    gint64 bound = (TIMEOUT_MS + 10) * 1000 * fixture_time_scale();
    for (guint i = 0; i < r.calls->len; i++) {
        const call_record *c = &g_array_index(r.calls, call_record, i);
        ck_assert_msg(c->net_us <= bound, "a call took %" G_GINT64_FORMAT " µs", c->net_us);
        ck_assert(c->result != SLUICE_FAILED || !c->allowed);
    }
    /* the admissions the old master took after the replica's promotion, before it
     * was demoted, never reached the new master (asynchronous replication): a
     * window across the switch may admit that many more. From the switch on, the
     * new master holds them all. */
    GArray *after = g_array_new(FALSE, FALSE, sizeof(call_record));
    for (guint i = 0; i < r.calls->len; i++)
        if (g_array_index(r.calls, call_record, i).sent > switched + 100000)
            g_array_append_val(after, g_array_index(r.calls, call_record, i));
    g_array_sort(after, by_received);
    ck_assert_uint_le(most_admitted_in_a_window(after), LIMIT);
    g_array_free(after, TRUE);
    run_free(&r);
}
END_TEST

/* ---- reload, shutdown, fork ----------------------------------------------------------- */

/* How many threads of this process are called name now. */
static int threads_now(const char *name)
{
    g_autoptr(GDir) dir = g_dir_open("/proc/self/task", 0, NULL);
    ck_assert_ptr_nonnull(dir);
    int n = 0;
    const char *tid;
    while ((tid = g_dir_read_name(dir))) {
        g_autofree char *path = g_strdup_printf("/proc/self/task/%s/comm", tid);
        g_autofree char *comm = NULL;
        if (g_file_get_contents(path, &comm, NULL, NULL))
            n += strcmp(g_strstrip(comm), name) == 0;
    }
    return n;
}

/* How many, once it is `expected` (a new thread names itself as it starts) or a
 * second has passed. */
static int threads_called(const char *name, int expected)
{
    int n = threads_now(name);
    for (int i = 0; i < 100 && n != expected; i++) {
        g_usleep(10000);
        n = threads_now(name);
    }
    return n;
}

/* One thread follows the master: a reload that makes a new backend stops the old
 * one's, sluice_shutdown the last. */
START_TEST(reload_and_shutdown_stop_the_thread_that_follows_the_master)
{
    g_autofree char *first =
        keyfile_for(shared, SENTINEL_PASSWORD, "timeout = 1s\n[limit:x]\nlimit = 5\nwindow = 1m\n");
    g_autofree char *path = fixture_write_keyfile(first);
    g_chmod(path, 0600);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(threads_called("sluice-sentinel", 1), 1);

    g_autofree char *second =
        keyfile_for(shared, SENTINEL_PASSWORD, "timeout = 2s\n[limit:x]\nlimit = 5\nwindow = 1m\n");
    ck_assert(g_file_set_contents(path, second, -1, NULL));
    ck_assert_msg(sluice_reload(&error), "%s", error ? error->message : "");
    ck_assert_int_eq(threads_called("sluice-sentinel", 1), 1); /* the new backend's */
    ck_assert_int_eq(sluice_acquire("x", NULL, 1, NULL, &error), SLUICE_ALLOWED);

    sluice_shutdown();
    ck_assert_int_eq(threads_called("sluice-sentinel", 0), 0);
}
END_TEST

/* ThreadSanitizer's runtime can hang a thread started in the child of a
 * multi-threaded fork (tests/support/fixture.c): the child's side is checked in the other
 * builds. */
#if defined(__SANITIZE_THREAD__)
#define CHILD_THREADS FALSE
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHILD_THREADS FALSE
#endif
#endif
#ifndef CHILD_THREADS
#define CHILD_THREADS TRUE
#endif

typedef struct {
    gint ready;      /* the child decided on the first master */
    gint failed;     /* its calls failed after the kill */
    gint64 resumed;  /* when it decided on the new master (monotonic µs) */
    gint64 switched; /* when it saw the new master named by the Sentinels */
} child_report;

/* A child forked after init has no thread of its own: when the master dies its
 * first failed call starts one, which follows the failover as the parent's does. */
START_TEST(a_forked_child_follows_the_failover_with_a_thread_of_its_own)
{
    const test_sentinel_options options = {.password = PASSWORD,
                                           .sentinel_password = SENTINEL_PASSWORD};
    test_sentinel *s = test_sentinel_start(&options);
    g_autofree char *contents =
        keyfile_for(s, SENTINEL_PASSWORD,
                    "timeout = 50ms\non_error = deny\n[limit:c]\nalgorithm = token_bucket\n"
                    "limit = 1000000\nwindow = 1s\n");
    g_autoptr(GError) error = NULL;
    ck_assert_msg(init_with(contents, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(sluice_acquire("c", NULL, 1, NULL, NULL), SLUICE_ALLOWED);

    child_report *report =
        mmap(NULL, sizeof *report, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(report != MAP_FAILED);
    memset(report, 0, sizeof *report);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        /* past the parent's wait for +switch-master (a failover whose vote splits
         * takes a few failover-timeouts), so the parent reports a slow failover */
        signal(SIGALRM, SIG_DFL);
        alarm(60);
        int threads = threads_now("sluice-sentinel"); /* none: the parent's is not here */
        gboolean ok = threads == 0 && sluice_acquire("c", NULL, 1, NULL, NULL) == SLUICE_ALLOWED;
        g_atomic_int_set(&report->ready, ok ? 1 : 2);
        while (ok) {
            int r = sluice_acquire("c", NULL, 1, NULL, NULL);
            if (r == SLUICE_FAILED)
                g_atomic_int_set(&report->failed, 1);
            else if (g_atomic_int_get(&report->failed) && r == SLUICE_ALLOWED) {
                report->resumed = g_get_monotonic_time();
                break;
            }
            g_usleep(1000);
        }
        _exit(threads_called("sluice-sentinel", 1) == 1 ? 0 : 3);
    }
    while (!g_atomic_int_get(&report->ready))
        g_usleep(1000);
    ck_assert_int_eq(g_atomic_int_get(&report->ready), 1);
    redisContext *subs[3];
    for (int i = 0; i < 3; i++)
        subs[i] = test_sentinel_subscribe(s, i);
    gint64 switched = 0;
    test_redis_kill(s->node[0]);
    ck_assert_ptr_eq(test_sentinel_wait_switch(s, subs, 3, 20 * G_USEC_PER_SEC, &switched),
                     s->node[1]);
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %s %d",
                  WIFEXITED(status) ? "exit" : "signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    ck_assert_int_gt(report->resumed, 0);
    ck_assert_int_lt(report->resumed, switched + G_USEC_PER_SEC);
    g_printerr("check_sentinel: a forked child decided on the new master %.1f ms after "
               "+switch-master\n",
               (double)(report->resumed - switched) / 1000);
    for (int i = 0; i < 3; i++)
        redisFree(subs[i]);
    munmap(report, sizeof *report);
    sluice_shutdown();
    test_sentinel_stop(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sentinel");
    TCase *fixture = tcase_create("fixture");
    tcase_set_timeout(fixture, 60);
    tcase_add_test(fixture, the_fixture_fails_over_when_the_master_dies);
    suite_add_tcase(s, fixture);

    TCase *resolving = tcase_create("resolve");
    tcase_set_timeout(resolving, 60);
    tcase_add_unchecked_fixture(resolving, start_shared, stop_shared);
    tcase_add_test(resolving, the_master_is_the_server_the_sentinels_name_and_that_says_master);
    tcase_add_test(resolving, a_sentinel_that_does_not_answer_is_passed_over_in_its_time);
    tcase_add_test(resolving, a_sentinel_that_names_a_replica_is_passed_over);
    tcase_add_test(resolving, a_wrong_sentinel_password_or_master_name_is_said);
    tcase_add_test(resolving, init_finds_the_master_through_the_sentinels);
    tcase_add_test(resolving, reload_and_shutdown_stop_the_thread_that_follows_the_master);
    suite_add_tcase(s, resolving);

    TCase *failover = tcase_create("failover");
    tcase_set_timeout(failover, 60);
    tcase_add_test(failover, decisions_resume_on_the_new_master_within_a_second_of_the_switch);
    if (CHILD_THREADS) /* registered only where it runs: not under TSan (above) */
        tcase_add_test(failover, a_forked_child_follows_the_failover_with_a_thread_of_its_own);
    tcase_add_test(failover, after_a_manual_failover_the_old_master_runs_no_script);
    suite_add_tcase(s, failover);
    return fixture_run(s);
}
