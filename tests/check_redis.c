/* SPDX-License-Identifier: MIT */
/* The redis backend against real redis-servers on loopback: shared limits across
 * processes, NOSCRIPT, expiry, AUTH and ACL users, fork(), memory per key, and a
 * server that is not there. */
#include "fixture.h"

#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static test_redis *secured; /* a second server: requirepass and an ACL user */
#define PASSWORD "s3cret-pass"

static char *keyfile_for(const test_redis *redis, const char *auth, const char *rest)
{
    return g_strdup_printf("[sluice]\nbackend = redis\nredis = redis://%s127.0.0.1:%d/0\n"
                           "on_error = deny\ntimeout = 500ms\n%s",
                           auth ? auth : "", redis->port, rest);
}

static long long integer_of(redisReply *r)
{
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* ---- a server that is not there ------------------------------------------------------ */

START_TEST(unreachable_redis_at_init_does_not_stop_the_program)
{
    sluice_decision d;
    g_autoptr(GError) error = NULL;
    int port = test_redis_free_port(); /* a port that nobody listens on */
    g_autofree char *ini =
        g_strdup_printf("[sluice]\nbackend = redis\nredis = redis://127.0.0.1:%d\non_error = deny\n"
                        "[limit:x]\nlimit = 5\nwindow = 1s\n",
                        port);
    g_autofree char *path = fixture_write_keyfile(ini);
    ck_assert(sluice_init(path, &error));
    ck_assert_int_eq(sluice_acquire("x", NULL, 1, &d, &error), SLUICE_FAILED);
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND));
    ck_assert_msg(strstr(error->message, "connect"), "%s", error->message);
    ck_assert_int_eq(d.allowed, FALSE); /* on_error = deny */
    sluice_shutdown();
}
END_TEST

/* ---- one limit, shared ----------------------------------------------------------------- */

START_TEST(two_processes_share_one_limit)
{
    fixture_init("[limit:shared]\nalgorithm = sliding_log\nlimit = 10\nwindow = 1m\n");
    gint *admitted =
        mmap(NULL, sizeof(gint), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    *admitted = 0;
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    for (int i = 0; i < 15; i++)
        if (sluice_acquire("shared", NULL, 1, NULL, NULL) == SLUICE_ALLOWED)
            g_atomic_int_inc(admitted);
    if (child == 0)
        _exit(0);
    int status;
    waitpid(child, &status, 0);
    ck_assert_int_eq(*admitted, 10);
    sluice_shutdown();
}
END_TEST

START_TEST(fork_children_decide_on_their_own_connections)
{
    sluice_decision d;
    fixture_init("[limit:f]\nalgorithm = fixed_window\nlimit = 20\nwindow = 1m\n");
    /* the parent's connection exists before the fork */
    ck_assert_int_eq(sluice_acquire("f", NULL, 2, &d, NULL), SLUICE_ALLOWED);
    pid_t children[3];
    for (int c = 0; c < 3; c++) {
        children[c] = fork();
        if (children[c] == 0) {
            int ok = 0;
            for (int i = 0; i < 4; i++)
                ok += sluice_acquire("f", NULL, 1, NULL, NULL) == SLUICE_ALLOWED;
            _exit(ok == 4 ? 0 : 1);
        }
    }
    for (int c = 0; c < 3; c++) {
        int status;
        waitpid(children[c], &status, 0);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* 2 + 12 taken; the parent's own connection still works */
    ck_assert_int_eq(sluice_acquire("f", NULL, 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 6);
    sluice_shutdown();
}
END_TEST

/* ---- scripts and keys --------------------------------------------------------------------- */

START_TEST(noscript_after_script_flush_is_reloaded_transparently)
{
    fixture_init("[limit:g]\nalgorithm = gcra\nlimit = 5\nwindow = 10s\n");
    ck_assert_int_eq(sluice_acquire("g", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    freeReplyObject(test_redis_command(fixture_redis(), "SCRIPT FLUSH"));
    g_autoptr(GError) error = NULL;
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("g", NULL, 1, &d, &error), SLUICE_ALLOWED);
    ck_assert_ptr_null(error);
    ck_assert_int_eq(d.remaining, 3);
    sluice_shutdown();
}
END_TEST

/* sluice's Function library (Redis 7) flushed: the next call loads it again, and
 * decides on the state as it was. */
START_TEST(a_flushed_function_library_is_loaded_again_transparently)
{
    fixture_init("[limit:g]\nalgorithm = gcra\nlimit = 5\nwindow = 10s\n");
    freeReplyObject(test_redis_command(fixture_redis(), "CONFIG RESETSTAT"));
    ck_assert_int_eq(sluice_acquire("g", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(test_redis_command_calls(fixture_redis(), "fcall"), 1);
    freeReplyObject(test_redis_command(fixture_redis(), "FUNCTION FLUSH"));
    g_autoptr(GError) error = NULL;
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("g", NULL, 1, &d, &error), SLUICE_ALLOWED);
    ck_assert_ptr_null(error);
    ck_assert_int_eq(d.remaining, 3);
    ck_assert_int_eq(sluice_acquire("g", NULL, 1, &d, &error), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 2);
    redisReply *r = test_redis_command(fixture_redis(), "FUNCTION LIST LIBRARYNAME sluice");
    ck_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    freeReplyObject(r);
    sluice_shutdown();
}
END_TEST

/* The version sluice_version of the server's library answers: {version, hash}. */
static gint64 library_version(char **hash)
{
    redisReply *r = test_redis_command(fixture_redis(), "FCALL_RO sluice_version 0");
    ck_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    gint64 version = r->element[0]->integer;
    *hash = g_strdup(r->element[1]->str);
    freeReplyObject(r);
    return version;
}

static void load_fake_library(gint64 version, const char *hash)
{
    g_autofree char *library =
        g_strdup_printf("#!lua name=sluice\nredis.register_function{function_name = "
                        "'sluice_version', flags = {'no-writes'}, callback = function() "
                        "return {%" G_GINT64_FORMAT ", '%s'} end}\n",
                        version, hash);
    redisReply *r = test_redis_command(fixture_redis(), "FUNCTION LOAD REPLACE %s", library);
    ck_assert_msg(r && r->type != REDIS_REPLY_ERROR, "%s", r ? r->str : "");
    freeReplyObject(r);
}

/* A library of an older sluice is replaced; one of a newer sluice is left as it is,
 * and this one decides by EVALSHA instead, never through the other's functions. */
START_TEST(an_older_library_is_replaced_and_a_newer_one_left_alone)
{
    g_autofree char *ini =
        fixture_contents("[limit:g]\nalgorithm = gcra\nlimit = 5\nwindow = 10s\n");
    g_autofree char *path = fixture_write_keyfile(ini);
    g_autofree char *hash = NULL, *other = NULL;
    fixture_init(ini); /* flushes the server's keys */
    sluice_shutdown();
    load_fake_library(1, "older");
    freeReplyObject(test_redis_command(fixture_redis(), "CONFIG RESETSTAT"));
    ck_assert(sluice_init(path, NULL));
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("g", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    gint64 version = library_version(&hash);
    ck_assert_int_gt(version, 1);
    ck_assert_str_ne(hash, "older");
    ck_assert_int_eq(test_redis_command_calls(fixture_redis(), "function|load"), 1);
    ck_assert_int_eq(test_redis_command_calls(fixture_redis(), "fcall"), 1);
    sluice_shutdown();

    load_fake_library(version + 1, "newer");
    freeReplyObject(test_redis_command(fixture_redis(), "CONFIG RESETSTAT"));
    ck_assert(sluice_init(path, NULL));
    ck_assert_int_eq(sluice_acquire("g", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("g", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 2);
    ck_assert_int_eq(library_version(&other), version + 1);
    ck_assert_str_eq(other, "newer");
    ck_assert_int_eq(test_redis_command_calls(fixture_redis(), "function|load"), 0);
    ck_assert_int_eq(test_redis_command_calls(fixture_redis(), "fcall"), 0);
    ck_assert_int_ge(test_redis_script_calls(fixture_redis()), 2); /* EVALSHA (and EVAL) */
    sluice_shutdown();
    freeReplyObject(test_redis_command(fixture_redis(), "FUNCTION DELETE sluice"));
}
END_TEST

/* The library is replicated with the data: a replica promoted to master decides
 * with FCALL at once, with nothing loaded there (no FUNCTION LOAD, EVAL or SCRIPT
 * LOAD), as a restarted server that kept its data does. */
START_TEST(a_promoted_replica_decides_without_loading_anything)
{
    test_redis *master = test_redis_start(NULL);
    g_autofree char *master_port = g_strdup_printf("%d", master->port);
    const char *replica_args[] = {"--replicaof", "127.0.0.1", master_port, NULL};
    test_redis *replica = test_redis_start(replica_args);
    const char *rules = "timeout = 2s\n[limit:g]\nalgorithm = gcra\nlimit = 5\nwindow = 10m\n";
    g_autofree char *master_url = test_redis_url(master);
    g_autofree char *master_ini =
        g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\n%s", master_url, rules);
    g_autofree char *master_path = fixture_write_keyfile(master_ini);
    sluice_clock_set(NULL, NULL, NULL);
    g_autoptr(GError) error = NULL;
    ck_assert(sluice_init(master_path, NULL));
    ck_assert_msg(sluice_acquire("g", NULL, 1, NULL, &error) == SLUICE_ALLOWED, "%s",
                  error ? error->message : "denied");
    sluice_shutdown();
    /* the replica has the library and the state once it has caught up */
    gint64 until = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    gboolean caught_up = FALSE;
    while (!caught_up && g_get_monotonic_time() < until) {
        redisReply *r = test_redis_command(replica, "FUNCTION LIST LIBRARYNAME sluice");
        redisReply *k = test_redis_command(replica, "DBSIZE");
        caught_up = r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 && k &&
                    k->type == REDIS_REPLY_INTEGER && k->integer == 1;
        if (r)
            freeReplyObject(r);
        if (k)
            freeReplyObject(k);
        if (!caught_up)
            g_usleep(20000);
    }
    ck_assert(caught_up);
    test_redis_stop(master);
    freeReplyObject(test_redis_command(replica, "REPLICAOF NO ONE"));
    freeReplyObject(test_redis_command(replica, "CONFIG RESETSTAT"));

    g_autofree char *replica_url = test_redis_url(replica);
    g_autofree char *replica_ini =
        g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\n%s", replica_url, rules);
    g_autofree char *replica_path = fixture_write_keyfile(replica_ini);
    ck_assert(sluice_init(replica_path, NULL));
    sluice_decision d;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sluice_acquire("g", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_le(d.remaining, 1); /* the state came along: 4 of 5 taken */
    sluice_shutdown();
    ck_assert_int_eq(test_redis_command_calls(replica, "fcall"), 3);
    static const char *const loads[] = {"function|load", "eval", "evalsha", "script|load"};
    for (guint i = 0; i < G_N_ELEMENTS(loads); i++)
        ck_assert_msg(test_redis_command_calls(replica, loads[i]) == 0, "%s", loads[i]);
    test_redis_stop(replica);
}
END_TEST

/* A state value sluice did not write in this format (another version's decimals, or
 * another program's) fails the call with an error that says so, then on_error
 * decides; it is never misread as a state. Loop: fixed_window, sliding_window,
 * token_bucket (the packed states). */
START_TEST(a_state_in_another_format_is_an_error_not_misread)
{
    static const char *const packed[] = {"fixed_window", "sliding_window", "token_bucket"};
    static const char *const packed_tags[] = {"fw", "sw", "tb"};
    static const char *const foreign[] = {"1763695012345678 3", "1763695012345678 1234 12",
                                          "999 1763695012345678"};
    g_autofree char *ini = g_strdup_printf(
        "[sluice]\non_error = deny\n[limit:v]\nalgorithm = %s\nlimit = 5\nwindow = 10s\n",
        packed[_i]);
    fixture_init(ini);
    g_autofree char *key = g_strdup_printf("sluice:%s:{1:v:}", packed_tags[_i]);
    freeReplyObject(test_redis_command(fixture_redis(), "SET %s %s", key, foreign[_i]));
    g_autoptr(GError) error = NULL;
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("v", NULL, 1, &d, &error), SLUICE_FAILED);
    ck_assert_int_eq(d.allowed, FALSE); /* on_error = deny */
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND));
    ck_assert_msg(strstr(error->message, "did not write in this format"), "%s", error->message);
    /* the value is left as it was; once it is gone, the limit starts afresh */
    redisReply *left = test_redis_command(fixture_redis(), "GET %s", key);
    ck_assert_str_eq(left->str, foreign[_i]);
    freeReplyObject(left);
    freeReplyObject(test_redis_command(fixture_redis(), "DEL %s", key));
    g_clear_error(&error);
    ck_assert_int_eq(sluice_acquire("v", NULL, 1, &d, &error), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 4);
    sluice_shutdown();
}
END_TEST

START_TEST(keys_carry_a_ttl_and_vanish_when_idle)
{
    sluice_clock_set(NULL, NULL, NULL);
    fixture_init("[limit:t]\nalgorithm = fixed_window\nlimit = 5\nwindow = 200ms\n");
    ck_assert_int_eq(sluice_acquire("t", "alice", 1, NULL, NULL), SLUICE_ALLOWED);
    redisReply *keys = test_redis_command(fixture_redis(), "KEYS *");
    ck_assert_int_eq(keys->elements, 1);
    /* one key per limit and caller: prefix, the algorithm's tag, and the hash tag
     * around name and key */
    ck_assert_str_eq(keys->element[0]->str, "sluice:fw:{1:t:alice}");
    freeReplyObject(keys);
    long long ttl = integer_of(test_redis_command(fixture_redis(), "PTTL sluice:fw:{1:t:alice}"));
    ck_assert_int_gt(ttl, 0);
    ck_assert_int_le(ttl, 201);
    g_usleep(400000);
    ck_assert_int_eq(integer_of(test_redis_command(fixture_redis(), "DBSIZE")), 0);
    sluice_shutdown();
}
END_TEST

/* gcra and token_bucket: while the key already lives past the time its state is back
 * to full capacity, the common path writes the state in place (SETRANGE, the key's
 * expiry left alone); when it would not, a SET moves the expiry to a second past it.
 * 2 per second, a burst of 2: the first admission SETs (full again in 500 ms, the key
 * lives 1.5 s), the second is written in place (full in 1 s) and holds: the third is
 * denied until the second permit's 500 ms are up. Loop: gcra, token_bucket. */
START_TEST(a_state_is_written_in_place_while_its_key_outlives_it)
{
    static const char *const names[] = {"gcra", "token_bucket"};
    static const char *const keys[] = {"sluice:gc:{1:r:}", "sluice:tb:{1:r:}"};
    sluice_clock_set(NULL, NULL, NULL); /* Redis TIME: a virtual clock always SETs */
    g_autofree char *ini = g_strdup_printf(
        "[limit:r]\nalgorithm = %s\nlimit = 2\nwindow = 1s\nburst = 2\nper_key = false\n",
        names[_i]);
    fixture_init(ini);
    sluice_decision d;
    gint64 set = test_redis_command_calls(fixture_redis(), "set");
    gint64 in_place = test_redis_command_calls(fixture_redis(), "setrange");
    ck_assert_int_eq(sluice_acquire("r", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 1);
    long long ttl = integer_of(test_redis_command(fixture_redis(), "PTTL %s", keys[_i]));
    ck_assert_int_gt(ttl, 1400);
    ck_assert_int_le(ttl, 1501);
    ck_assert_int_eq(sluice_acquire("r", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 0);
    ck_assert_int_le(integer_of(test_redis_command(fixture_redis(), "PTTL %s", keys[_i])), ttl);
    ck_assert_int_eq(test_redis_command_calls(fixture_redis(), "set") - set, 1);
    ck_assert_int_eq(test_redis_command_calls(fixture_redis(), "setrange") - in_place, 1);
    ck_assert_int_eq(sluice_acquire("r", NULL, 1, &d, NULL), SLUICE_DENIED);
    ck_assert_int_gt(d.retry_after_ms, 400);
    ck_assert_int_le(d.retry_after_ms, 500);
    sluice_shutdown();
}
END_TEST

/* sliding_log on Redis TIME: each entry's member says its time, which is its score;
 * an entry of an older layout (a decimal member, numbered by a :seq counter) counts
 * as any other; and the window's bound, written as text from TIME's, is where the
 * window starts: entries planted a millisecond before it and 10 s after it count
 * as such. */
START_TEST(sliding_log_members_say_their_time_and_older_members_count)
{
    sluice_clock_set(NULL, NULL, NULL); /* Redis TIME */
    fixture_init("[limit:log]\nalgorithm = sliding_log\nlimit = 4\nwindow = 1h\n"
                 "per_key = false\n");
    const char *key = "sluice:sl:{3:log:}";
    redisReply *t = test_redis_command(fixture_redis(), "TIME");
    gint64 now = g_ascii_strtoll(t->element[0]->str, NULL, 10) * 1000000 +
                 g_ascii_strtoll(t->element[1]->str, NULL, 10);
    freeReplyObject(t);
    const gint64 w = G_GINT64_CONSTANT(3600000000);
    freeReplyObject(test_redis_command(fixture_redis(), "ZADD %s %" G_GINT64_FORMAT " 16", key,
                                       now - w - 1000));
    freeReplyObject(test_redis_command(fixture_redis(), "ZADD %s %" G_GINT64_FORMAT " 17", key,
                                       now - w + 10000000));
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("log", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 2); /* 4 less "17" and this one */
    ck_assert_int_eq(sluice_acquire("log", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 1);
    redisReply *log = test_redis_command(fixture_redis(), "ZRANGE %s 0 -1 WITHSCORES", key);
    /* "17" and the two; "16" went with the first admission in a new window-long bucket */
    ck_assert_int_eq(log->elements, 6);
    ck_assert_str_eq(log->element[0]->str, "17");
    for (size_t i = 2; i < log->elements; i += 2) {
        const redisReply *m = log->element[i];
        ck_assert(m->len == 9 || m->len == 13);
        ck_assert_int_eq(m->str[0], 't');
        guint64 at = 0;
        for (int b = 1; b <= 8; b++)
            at = at << 8 | (guchar)m->str[b];
        gint64 score = g_ascii_strtoll(log->element[i + 1]->str, NULL, 10);
        ck_assert_int_eq((gint64)at, score);
        ck_assert_int_ge(score, now);
    }
    freeReplyObject(log);
    ck_assert_int_eq(sluice_acquire("log", NULL, 2, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(d.remaining, 1);
    sluice_shutdown();
}
END_TEST

START_TEST(calls_for_thousands_of_permits_log_one_member_each)
{
    sluice_decision d;
    fixture_init("[limit:log]\nalgorithm = sliding_log\nlimit = 2500\nwindow = 1m\n"
                 "[limit:cc]\nalgorithm = concurrency\nlimit = 1500\n");
    ck_assert_int_eq(sluice_acquire("log", NULL, 2500, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(integer_of(test_redis_command(fixture_redis(), "ZCARD sluice:sl:{3:log:}")),
                     2500);
    ck_assert_int_eq(sluice_acquire("log", NULL, 1, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(sluice_acquire("cc", NULL, 1500, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(integer_of(test_redis_command(fixture_redis(), "ZCARD sluice:cc:{2:cc:}")),
                     1500);
    sluice_release("cc", NULL, 1500);
    ck_assert_int_eq(integer_of(test_redis_command(fixture_redis(), "EXISTS sluice:cc:{2:cc:}")),
                     0);
    ck_assert_int_eq(sluice_acquire("cc", NULL, 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 1500);
    sluice_shutdown();
}
END_TEST

static const char *const algorithms[] = {"fixed_window", "sliding_window", "token_bucket", "gcra"};
static const char *const tags[] = {"fw", "sw", "tb", "gc"};
/* the largest limit the keyfile takes for each over 1000 s */
static const gint64 largest[] = {G_GINT64_CONSTANT(1) << 50, 4503599627, 1000000000, 1000000000};

/* Loop: each algorithm at limit 10^6 with 999 taken, then at its largest limit, full. */
START_TEST(memory_per_key_stays_small_whatever_the_limit)
{
    int a = _i % (int)G_N_ELEMENTS(algorithms);
    gboolean at_largest = _i >= (int)G_N_ELEMENTS(algorithms);
    gint64 limit = at_largest ? largest[a] : 1000000;
    gint64 take = at_largest ? limit : 999;
    g_autofree char *ini =
        g_strdup_printf("[limit:m]\nalgorithm = %s\nlimit = %" G_GINT64_FORMAT "\nwindow = 1000s\n",
                        algorithms[a], limit);
    fixture_init(ini);
    ck_assert_int_eq(sluice_acquire("m", "user-123456", take, NULL, NULL), SLUICE_ALLOWED);
    long long bytes = integer_of(
        test_redis_command(fixture_redis(), "MEMORY USAGE sluice:%s:{1:m:user-123456}", tags[a]));
    ck_assert_msg(bytes < 150,
                  "%s, limit %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT " taken: %lld bytes per key",
                  algorithms[a], limit, take, bytes);
    sluice_shutdown();
}
END_TEST

/* ---- AUTH and ACL --------------------------------------------------------------------- */

START_TEST(password_auth_works_and_a_wrong_one_fails_init)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *good =
        keyfile_for(secured, ":" PASSWORD "@", "[limit:a]\nlimit = 1\nwindow = 1m\n");
    g_autofree char *path = fixture_write_keyfile(good);
    ck_assert(sluice_init(path, &error));
    ck_assert_int_eq(sluice_acquire("a", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("a", NULL, 1, NULL, NULL), SLUICE_DENIED);
    sluice_shutdown();

    g_autofree char *bad = keyfile_for(secured, ":wrong@", "[limit:a]\nlimit = 1\nwindow = 1m\n");
    g_autofree char *bad_path = fixture_write_keyfile(bad);
    ck_assert(!sluice_init(bad_path, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_AUTH));
    ck_assert_msg(strstr(error->message, "AUTH") && strstr(error->message, "WRONGPASS"), "%s",
                  error->message);
    ck_assert_ptr_null(strstr(error->message, "wrong")); /* the password is not repeated */
    g_clear_error(&error);

    g_autofree char *none = keyfile_for(secured, NULL, "");
    g_autofree char *none_path = fixture_write_keyfile(none);
    ck_assert(!sluice_init(none_path, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_AUTH));
    ck_assert_msg(strstr(error->message, "NOAUTH"), "%s", error->message);
}
END_TEST

START_TEST(acl_user_auth_works)
{
    g_autofree char *ini =
        keyfile_for(secured, "app:app-pass@", "[limit:a]\nlimit = 2\nwindow = 1m\n");
    g_autofree char *path = fixture_write_keyfile(ini);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    ck_assert_int_eq(sluice_acquire("a", "k", 2, NULL, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("a", "k", 1, NULL, NULL), SLUICE_DENIED);
    sluice_shutdown();

    g_autofree char *bad = keyfile_for(secured, "app:nope@", "");
    g_autofree char *bad_path = fixture_write_keyfile(bad);
    ck_assert(!sluice_init(bad_path, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_AUTH));
}
END_TEST

/* The asynchronous client authenticates its own connections: AUTH queued ahead of 300
 * calls made before it has connected (more than its output holds at first, which
 * grows while the password is in it unsent), all answered; and a password that no
 * longer works fails that connection's calls with SLUICE_ERROR_AUTH. */
typedef struct {
    int answered, allowed;
    GError *error;
} async_tally;

static void on_tallied(GObject *source, GAsyncResult *res, gpointer p)
{
    (void)source;
    async_tally *t = p;
    GError *error = NULL;
    t->allowed += sluice_acquire_finish(res, NULL, &error) == SLUICE_ALLOWED;
    if (error && !t->error)
        t->error = error;
    else
        g_clear_error(&error);
    t->answered++;
}

/* n calls of "a" made on a new main context (so on a new connection), then answered */
static void async_on_a_new_connection(async_tally *t, int n)
{
    GMainContext *context = g_main_context_new();
    g_main_context_push_thread_default(context);
    for (int i = 0; i < n; i++)
        sluice_acquire_async("a", "k", 1, NULL, on_tallied, t);
    gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC * fixture_time_scale();
    while (t->answered < n && g_get_monotonic_time() < end)
        g_main_context_iteration(context, FALSE) || (g_usleep(1000), TRUE);
    g_main_context_pop_thread_default(context);
    g_main_context_unref(context);
    ck_assert_int_eq(t->answered, n);
}

START_TEST(the_async_client_authenticates_and_reports_a_refused_password)
{
    g_autofree char *ini =
        keyfile_for(secured, "app:app-pass@", "[limit:a]\nlimit = 1000\nwindow = 1m\n");
    g_autofree char *path = fixture_write_keyfile(ini);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    async_tally ok = {0};
    async_on_a_new_connection(&ok, 300);
    ck_assert_msg(!ok.error, "%s", ok.error ? ok.error->message : "");
    ck_assert_int_eq(ok.allowed, 300);

    freeReplyObject(test_redis_command(secured, "ACL SETUSER app resetpass >another-pass"));
    async_tally refused = {0};
    async_on_a_new_connection(&refused, 3);
    freeReplyObject(test_redis_command(secured, "ACL SETUSER app resetpass >app-pass"));
    ck_assert_int_eq(refused.allowed, 0);
    ck_assert(refused.error);
    ck_assert_msg(g_error_matches(refused.error, SLUICE_ERROR, SLUICE_ERROR_AUTH), "%s",
                  refused.error->message);
    ck_assert_ptr_null(strstr(refused.error->message, "app-pass"));
    g_error_free(refused.error);
    sluice_shutdown();
}
END_TEST

/* ---- many processes, many threads --------------------------------------------------------- */

#define PROCS     4
#define THREADS   4
#define RUN_US    3000000
#define MAX_CALLS 20000

typedef struct {
    gint n;
    gint in_flight, most_in_flight;
    gint64 started[PROCS * THREADS], ended[PROCS * THREADS]; /* each thread's run */
    gint64 sent[MAX_CALLS], received[MAX_CALLS];             /* CLOCK_REALTIME µs, as Redis TIME */
} shared_log;

static shared_log *shared;
static const char *hammered;
static gboolean holds; /* concurrency: hold the permit a moment, then release */

static gpointer hammer(gpointer data)
{
    gint slot = GPOINTER_TO_INT(data);
    shared->started[slot] = g_get_real_time();
    gint64 end = g_get_monotonic_time() + RUN_US;
    while (g_get_monotonic_time() < end) {
        gint64 sent = g_get_real_time();
        if (sluice_acquire(hammered, NULL, 1, NULL, NULL) != SLUICE_ALLOWED)
            continue;
        gint64 received = g_get_real_time();
        if (holds) {
            gint now = g_atomic_int_add(&shared->in_flight, 1) + 1;
            gint most;
            do
                most = g_atomic_int_get(&shared->most_in_flight);
            while (now > most &&
                   !g_atomic_int_compare_and_exchange(&shared->most_in_flight, most, now));
            g_usleep(2000);
            g_atomic_int_add(&shared->in_flight, -1);
            sluice_release(hammered, NULL, 1);
            continue;
        }
        gint i = g_atomic_int_add(&shared->n, 1);
        if (i < MAX_CALLS) {
            shared->sent[i] = sent;
            shared->received[i] = received;
        }
    }
    shared->ended[slot] = g_get_real_time();
    return NULL;
}

/* PROCS processes of THREADS threads each decide on `name` for RUN_US. */
static void hammer_from_processes(const char *rules, const char *name, gboolean hold)
{
    /* no keyfile watcher thread: the children fork from a single-threaded parent
     * (ThreadSanitizer cannot follow a child of a multi-threaded process that
     * starts threads of its own) */
    g_autofree char *unwatched = g_strconcat("[sluice]\nreload = false\n", rules, NULL);
    fixture_init(unwatched);
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(shared, 0, sizeof *shared);
    hammered = name;
    holds = hold;
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            GThread *threads[THREADS];
            for (int t = 0; t < THREADS; t++)
                threads[t] = g_thread_new("hammer", hammer, GINT_TO_POINTER(p * THREADS + t));
            for (int t = 0; t < THREADS; t++)
                g_thread_join(threads[t]);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++)
        waitpid(pids[p], NULL, 0);
    sluice_shutdown();
    ck_assert_int_lt(shared->n, MAX_CALLS);
}

/* How many windows of w µs the run touched: 7 of 500 ms in RUN_US, more when the
 * processes started late (a loaded machine, a sanitizer). */
static gint64 windows_of_run(gint64 w)
{
    gint64 first = G_MAXINT64, last = 0;
    for (int i = 0; i < PROCS * THREADS; i++) {
        first = MIN(first, shared->started[i]);
        last = MAX(last, shared->ended[i]);
    }
    return (last - first + w - 1) / w + 1;
}

/* The most admissions that certainly fell in one window (x - w, x]: those sent
 * after x - w and answered by x. Redis decided each somewhere in [sent, received]. */
static gint most_certainly_in_a_window(gint64 w)
{
    gint most = 0;
    for (gint i = 0; i < shared->n; i++) {
        gint64 x = shared->received[i];
        gint in = 0;
        for (gint j = 0; j < shared->n; j++)
            in += shared->sent[j] > x - w && shared->received[j] <= x;
        most = MAX(most, in);
    }
    return most;
}

START_TEST(sliding_log_shared_by_processes_never_admits_more_than_the_limit)
{
    hammer_from_processes("[limit:h]\nalgorithm = sliding_log\nlimit = 100\nwindow = 500ms\n", "h",
                          FALSE);
    ck_assert_int_le(most_certainly_in_a_window(500000), 100);
    /* demand exceeds the limit: about 6 windows' worth pass, at least 5 */
    ck_assert_int_ge(shared->n, 500);
    ck_assert_int_le(shared->n, 100 * windows_of_run(500000));
}
END_TEST

START_TEST(fixed_window_shared_by_processes_admits_at_most_twice_the_limit_per_window)
{
    hammer_from_processes("[limit:h]\nalgorithm = fixed_window\nlimit = 100\nwindow = 500ms\n", "h",
                          FALSE);
    ck_assert_int_le(most_certainly_in_a_window(500000), 200);
    ck_assert_int_ge(shared->n, 500);
    ck_assert_int_le(shared->n, 100 * windows_of_run(500000));
}
END_TEST

START_TEST(token_bucket_and_gcra_shared_by_processes_keep_their_rate)
{
    static const char *const rules[] = {
        "[limit:h]\nalgorithm = token_bucket\nlimit = 100\nwindow = 500ms\nburst = 50\n",
        "[limit:h]\nalgorithm = gcra\nlimit = 100\nwindow = 500ms\nburst = 50\n",
    };
    hammer_from_processes(rules[_i], "h", FALSE);
    /* burst + rate: 50 + 100 per 500 ms over about 3 s */
    ck_assert_int_le(most_certainly_in_a_window(500000), 150 + 1);
    ck_assert_int_ge(shared->n, 500);
    ck_assert_int_le(shared->n, 50 + 100 * windows_of_run(500000));
}
END_TEST

START_TEST(concurrency_shared_by_processes_never_has_more_in_flight)
{
    hammer_from_processes("[limit:h]\nalgorithm = concurrency\nlimit = 3\nwindow = 1m\n", "h",
                          TRUE);
    ck_assert_int_le(shared->most_in_flight, 3);
    ck_assert_int_eq(shared->most_in_flight, 3);
}
END_TEST

/* ---- a server that hangs, and comes back ----------------------------------------------- */

#define FAULTY(policy)                                                                             \
    "[sluice]\ntimeout = 100ms\non_error = " policy "\n"                                           \
    "[limit:p]\nalgorithm = fixed_window\nlimit = 2\nwindow = 1m\n"

/* Calls until Redis answers again; returns how long that took (µs). */
static gint64 until_redis_answers(void)
{
    gint64 start = g_get_monotonic_time();
    for (;;) {
        GError *error = NULL;
        int r = sluice_acquire("p", NULL, 0, NULL, &error);
        if (r != SLUICE_FAILED)
            return g_get_monotonic_time() - start;
        g_error_free(error);
        ck_assert_int_lt(g_get_monotonic_time() - start, 5000000);
        g_usleep(10000);
    }
}

START_TEST(a_hung_server_costs_a_timeout_then_the_breaker_answers_at_once)
{
    sluice_clock_set(NULL, NULL, NULL);
    fixture_init(FAULTY("deny"));
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    test_redis_pause(fixture_redis());
    gint64 slowest = 0;
    for (int i = 0; i < 10; i++) {
        g_autoptr(GError) error = NULL;
        sluice_decision d;
        fixture_stamp sent = fixture_stamp_now();
        ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, &error), SLUICE_FAILED);
        gint64 took = fixture_stamp_took_us(sent, fixture_stamp_now());
        slowest = MAX(slowest, took);
        ck_assert_int_eq(d.allowed, FALSE); /* on_error = deny */
        ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND));
        if (i < 3)
            ck_assert_msg(strstr(error->message, "timed out"), "%s", error->message);
        else /* the breaker is open: no call waits for the dead server */
            ck_assert_int_lt(took, 150000);
    }
    /* a call never takes more than its timeout, reconnect included (+10 ms, stretched
     * under sanitizers) */
    ck_assert_int_lt(slowest, 100000 + 10000 * fixture_time_scale());
    test_redis_resume(fixture_redis());
    ck_assert_int_lt(until_redis_answers(), 1000000); /* the breaker's pause is at most 500 ms */
    /* the timed-out commands were sent, and the resumed server ran them: they
     * may have taken permits (a limiter errs on the side of fewer), so the
     * limit is now used up, and the answer comes from Redis again */
    g_autoptr(GError) error = NULL;
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, NULL, &error), SLUICE_DENIED);
    ck_assert_ptr_null(error);
    sluice_shutdown();
}
END_TEST

START_TEST(a_restarted_server_is_used_again_without_help)
{
    test_redis *own = test_redis_start(NULL); /* restarted by this process, which reaps it */
    g_autofree char *url = test_redis_url(own);
    g_autofree char *ini =
        g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\n%s", url, FAULTY("allow"));
    g_autofree char *path = fixture_write_keyfile(ini);
    sluice_clock_set(NULL, NULL, NULL);
    ck_assert(sluice_init(path, NULL));
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    test_redis_restart(own);
    /* the old connection is dead; the next calls reconnect by themselves */
    ck_assert_int_lt(until_redis_answers(), 1500000);
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("p", NULL, 2, &d, NULL), SLUICE_ALLOWED); /* a new server */
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, NULL), SLUICE_DENIED);
    sluice_shutdown();
    test_redis_stop(own);
}
END_TEST

START_TEST(on_error_local_decides_in_process_while_redis_is_away)
{
    sluice_clock_set(NULL, NULL, NULL);
    fixture_init(FAULTY("local"));
    test_redis_pause(fixture_redis());
    sluice_decision d;
    g_autoptr(GError) error = NULL;
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, &error), SLUICE_FAILED);
    ck_assert_int_eq(d.allowed, TRUE);
    g_clear_error(&error);
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, &error), SLUICE_FAILED);
    ck_assert_int_eq(d.allowed, TRUE);
    g_clear_error(&error);
    ck_assert_int_eq(sluice_acquire("p", NULL, 1, &d, &error), SLUICE_FAILED);
    ck_assert_int_eq(d.allowed, FALSE); /* the same rule, kept in process */
    ck_assert_int_eq(d.limit, 2);
    test_redis_resume(fixture_redis());
    /* back to Redis by itself (no error); the in-process state is not carried over */
    ck_assert_int_lt(until_redis_answers(), 1500000);
    sluice_shutdown();
}
END_TEST

int main(void)
{
    g_setenv("SLUICE_TEST_BACKEND", "redis", TRUE);
    secured = test_redis_start_secured(PASSWORD, "app", "app-pass");

    Suite *s = suite_create("redis");
    TCase *tc = tcase_create("backend");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, unreachable_redis_at_init_does_not_stop_the_program);
    tcase_add_test(tc, two_processes_share_one_limit);
    tcase_add_test(tc, fork_children_decide_on_their_own_connections);
    tcase_add_test(tc, noscript_after_script_flush_is_reloaded_transparently);
    tcase_add_test(tc, a_flushed_function_library_is_loaded_again_transparently);
    tcase_add_test(tc, an_older_library_is_replaced_and_a_newer_one_left_alone);
    tcase_add_test(tc, a_promoted_replica_decides_without_loading_anything);
    tcase_add_loop_test(tc, a_state_in_another_format_is_an_error_not_misread, 0, 3);
    tcase_add_test(tc, keys_carry_a_ttl_and_vanish_when_idle);
    tcase_add_loop_test(tc, a_state_is_written_in_place_while_its_key_outlives_it, 0, 2);
    tcase_add_test(tc, sliding_log_members_say_their_time_and_older_members_count);
    tcase_add_test(tc, calls_for_thousands_of_permits_log_one_member_each);
    tcase_add_loop_test(tc, memory_per_key_stays_small_whatever_the_limit, 0,
                        2 * G_N_ELEMENTS(algorithms));
    tcase_add_test(tc, password_auth_works_and_a_wrong_one_fails_init);
    tcase_add_test(tc, acl_user_auth_works);
    tcase_add_test(tc, the_async_client_authenticates_and_reports_a_refused_password);
    suite_add_tcase(s, tc);

    TCase *load = tcase_create("processes");
    tcase_set_timeout(load, 120);
    tcase_add_test(load, sliding_log_shared_by_processes_never_admits_more_than_the_limit);
    tcase_add_test(load,
                   fixed_window_shared_by_processes_admits_at_most_twice_the_limit_per_window);
    tcase_add_loop_test(load, token_bucket_and_gcra_shared_by_processes_keep_their_rate, 0, 2);
    tcase_add_test(load, concurrency_shared_by_processes_never_has_more_in_flight);
    suite_add_tcase(s, load);

    TCase *faults = tcase_create("faults");
    tcase_set_timeout(faults, 60);
    tcase_add_test(faults, a_hung_server_costs_a_timeout_then_the_breaker_answers_at_once);
    tcase_add_test(faults, a_restarted_server_is_used_again_without_help);
    tcase_add_test(faults, on_error_local_decides_in_process_while_redis_is_away);
    suite_add_tcase(s, faults);

    int status = fixture_run(s);
    test_redis_stop(secured);
    return status;
}
