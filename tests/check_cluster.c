/* SPDX-License-Identifier: MIT */
/* sluice on a real Redis Cluster: processes sharing per-key limits over every master,
 * a master killed while threads decide (with and without full coverage), and slots
 * moved between masters under load. Each test starts its own Cluster. */
#include "fixture.h"

#include <gio/gio.h>

#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis/cluster_slots.h"
#include "redis/key.h"
#include "redis_cluster.h"

#define TIMEOUT_MS 150 /* a healthy master, starved of CPU on a loaded machine, can miss 50 ms */
#define SLACK_MS   10  /* a call takes at most timeout + this */

/* The slot of the keys of `name` for `key` as sluice writes them (the hash tag is
 * the same under every algorithm's prefix). */
static guint slot_of(const char *name, const char *key)
{
    g_auto(sluice__redis_keys) k = {NULL, NULL};
    sluice__redis_keys_build(&k, "sluice:fw:", name, key);
    return sluice__cluster_key_slot(k.state, strlen(k.state));
}

/* The master (index) that serves slot in a fresh test Cluster of `masters`. */
static int first_master(guint slot, int masters)
{
    for (int m = 0; m < masters; m++)
        if (slot < (guint)((m + 1) * SLUICE__CLUSTER_SLOTS / masters))
            return m;
    return masters - 1;
}

static void init_on(const test_cluster *c, const char *on_error, int timeout_ms, const char *rules)
{
    g_autofree char *url = test_cluster_url(c);
    g_autofree char *contents = g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\n"
                                                "timeout = %dms\non_error = %s\nreload = false\n%s",
                                                url, timeout_ms, on_error, rules);
    g_autofree char *path = fixture_write_keyfile(contents);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
}

/* ---- cross-process ------------------------------------------------------------------ */

#define PROCESSES    4
#define THREADS      4
#define SHARED_KEYS  32
#define SHARED_LIMIT 20

typedef struct {
    gint admitted[SHARED_KEYS];
    gint errors;
} tally;

typedef struct {
    tally *t;
    guint seed;
} worker;

static gpointer share(gpointer p)
{
    worker *w = p;
    GRand *rand = g_rand_new_with_seed(w->seed);
    for (int i = 0; i < 400; i++) {
        int k = g_rand_int_range(rand, 0, SHARED_KEYS);
        g_autofree char *key = g_strdup_printf("user-%d", k);
        sluice_decision d;
        g_autoptr(GError) error = NULL;
        int r = sluice_acquire("shared", key, 1, &d, &error);
        if (r == SLUICE_ALLOWED)
            g_atomic_int_inc(&w->t->admitted[k]);
        else if (r == SLUICE_FAILED)
            g_atomic_int_inc(&w->t->errors);
    }
    g_rand_free(rand);
    return NULL;
}

START_TEST(processes_share_per_key_limits_over_every_master)
{
    test_cluster *c = test_cluster_start(NULL);
    g_autofree char *rules = g_strdup_printf(
        "[limit:shared]\nalgorithm = fixed_window\nlimit = %d\nwindow = 1h\n", SHARED_LIMIT);
    int on_master[3] = {0};
    for (int k = 0; k < SHARED_KEYS; k++) {
        g_autofree char *key = g_strdup_printf("user-%d", k);
        on_master[first_master(slot_of("shared", key), 3)]++;
    }
    ck_assert_msg(on_master[0] && on_master[1] && on_master[2], "keys on %d/%d/%d", on_master[0],
                  on_master[1], on_master[2]);

    tally *t = mmap(NULL, sizeof *t, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(t != MAP_FAILED);
    memset(t, 0, sizeof *t);
    GPid children[PROCESSES];
    for (int p = 0; p < PROCESSES; p++) { /* forked before any thread of ours */
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            init_on(c, "deny", 2000, rules); /* answers, not timing: a loaded machine */
            worker w[THREADS];
            GThread *threads[THREADS];
            for (int i = 0; i < THREADS; i++) {
                w[i] = (worker){t, (guint)(p * THREADS + i + 1)};
                threads[i] = g_thread_new("share", share, &w[i]);
            }
            for (int i = 0; i < THREADS; i++)
                g_thread_join(threads[i]);
            sluice_shutdown();
            _exit(0);
        }
        children[p] = pid;
    }
    for (int p = 0; p < PROCESSES; p++) {
        int status;
        ck_assert_int_eq(waitpid(children[p], &status, 0), children[p]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: %d", p, status);
    }
    ck_assert_int_eq(t->errors, 0);
    for (int k = 0; k < SHARED_KEYS; k++) /* 6400 calls over 32 keys: every key fills up */
        ck_assert_msg(t->admitted[k] == SHARED_LIMIT, "user-%d admitted %d of %d", k,
                      t->admitted[k], SHARED_LIMIT);
    for (int m = 0; m < 3; m++)
        ck_assert_int_gt(test_cluster_keys(c, c->node[m]), 0);
    munmap(t, sizeof *t);
    test_cluster_stop(c);
}
END_TEST

/* ---- a master killed while threads decide ------------------------------------------ */

#define DECIDERS 4
#define KEYS     24

typedef struct {
    const test_cluster *c;
    char *keys[KEYS];
    int master_of[KEYS]; /* at start */
    int victim;          /* the master killed */
    gint stop;
    /* what the threads saw, under lock */
    GMutex lock;
    gint64 calls, errors_elsewhere, errors_on_victim, slowest_us, broke_policy;
    gint64 timeouts_elsewhere; /* of errors_elsewhere: the healthy master did not answer */
    gint64 starved_us;         /* how long the healthy masters waited for a CPU meanwhile */
    gint64 first_ok_after_promotion_us; /* monotonic, on the victim's slots; 0: none yet */
    gint64 promoted_at;                 /* monotonic; 0 until the replica is master */
    char *first_error_elsewhere;
    char *exposition_open; /* sluice_stats_prometheus() once the victim's breaker was open */
} failover;

/* How long the server waited for a CPU while runnable (µs; /proc/PID/schedstat). */
static gint64 server_wait_us(const test_redis *server)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/schedstat", (int)server->pid);
    g_autofree char *text = NULL;
    if (server->pid == 0 || !g_file_get_contents(path, &text, NULL, NULL))
        return 0;
    g_auto(GStrv) fields = g_strsplit(text, " ", 3);
    return fields[0] && fields[1] ? g_ascii_strtoll(fields[1], NULL, 10) / 1000 : 0;
}

/* The healthy masters' waits for a CPU, summed. */
static gint64 healthy_wait_us(const failover *f)
{
    gint64 sum = 0;
    for (int m = 0; m < f->c->masters; m++)
        if (m != f->victim)
            sum += server_wait_us(f->c->node[m]);
    return sum;
}

static gpointer decide(gpointer p)
{
    failover *f = p;
    guint i = 0;
    while (!g_atomic_int_get(&f->stop)) {
        int k = (int)(i++ % KEYS);
        sluice_decision d = {0};
        g_autoptr(GError) error = NULL;
        fixture_stamp sent = fixture_stamp_now();
        int r = sluice_acquire("api", f->keys[k], 1, &d, &error);
        fixture_stamp received = fixture_stamp_now();
        gint64 took = fixture_stamp_took_us(sent, received);
        gboolean on_victim = f->master_of[k] == f->victim;
        g_mutex_lock(&f->lock);
        f->calls++;
        f->slowest_us = MAX(f->slowest_us, took);
        if (r == SLUICE_FAILED && d.allowed) /* on_error = deny */
            f->broke_policy++;
        if (r == SLUICE_FAILED && !on_victim) {
            f->errors_elsewhere++;
            f->timeouts_elsewhere += error && g_str_has_suffix(error->message, "timed out");
            if (!f->first_error_elsewhere)
                f->first_error_elsewhere = g_strdup(error ? error->message : "?");
        }
        if (r == SLUICE_FAILED && on_victim)
            f->errors_on_victim++;
        if (r == SLUICE_ALLOWED && on_victim && f->promoted_at && !f->first_ok_after_promotion_us)
            f->first_ok_after_promotion_us = received.now_us;
        g_mutex_unlock(&f->lock);
        g_usleep(500);
    }
    return NULL;
}

/* Kills master `victim` of a 3+3 Cluster while DECIDERS threads decide on KEYS keys
 * spread over the masters (on_error = deny); returns when the replica has served a
 * decision (or resume_within_us + 0.5 s), and checks that no call broke the policy
 * or took more than the timeout + SLACK_MS, and that decisions on its slots resumed
 * within resume_within_us of the replica saying it is master. full:
 * cluster-require-full-coverage yes (every master answers CLUSTERDOWN meanwhile). */
static void kill_a_master(failover *f, gboolean full, gint64 resume_within_us)
{
    test_cluster_options o = {
        .masters = 3, .replicas = 1, .node_timeout_ms = 500, .partial = !full};
    test_cluster *c = test_cluster_start(&o);
    f->c = c;
    f->victim = 1;
    g_mutex_init(&f->lock);
    for (int k = 0, n = 0; k < KEYS; n++) { /* KEYS / 3 keys on each master */
        g_autofree char *key = g_strdup_printf("k%d", n);
        int m = first_master(slot_of("api", key), 3);
        int on_m = 0;
        for (int j = 0; j < k; j++)
            on_m += f->master_of[j] == m;
        if (on_m < KEYS / 3) {
            f->keys[k] = g_steal_pointer(&key);
            f->master_of[k] = m;
            k++;
        }
    }
    init_on(c, "deny", TIMEOUT_MS,
            "[limit:api]\nalgorithm = fixed_window\nlimit = 1000000000\nwindow = 1h\n");
    GThread *threads[DECIDERS];
    gint64 waited = healthy_wait_us(f);
    for (int i = 0; i < DECIDERS; i++)
        threads[i] = g_thread_new("decide", decide, f);
    g_usleep(300000);
    test_redis *replica = c->node[3 + f->victim];
    test_redis_kill(c->node[f->victim]);
    gint64 killed = g_get_monotonic_time();
    g_autofree char *victim_open = g_strdup_printf(
        "sluice_breaker_open{node=\"redis 127.0.0.1:%d\"} 1\n", c->node[f->victim]->port);
    while (!test_cluster_is_master(c, replica) && g_get_monotonic_time() - killed < 10000000) {
        if (!f->exposition_open) {
            char *text = sluice_stats_prometheus();
            if (strstr(text, victim_open))
                f->exposition_open = text;
            else
                g_free(text);
        }
        g_usleep(2000);
    }
    g_mutex_lock(&f->lock);
    f->promoted_at = g_get_monotonic_time();
    g_mutex_unlock(&f->lock);
    while (g_get_monotonic_time() - f->promoted_at < resume_within_us + 500000) {
        g_mutex_lock(&f->lock);
        gboolean resumed = f->first_ok_after_promotion_us != 0;
        g_mutex_unlock(&f->lock);
        if (resumed)
            break;
        g_usleep(5000);
    }
    g_usleep(200000);
    g_atomic_int_set(&f->stop, 1);
    for (int i = 0; i < DECIDERS; i++)
        g_thread_join(threads[i]);
    f->starved_us = healthy_wait_us(f) - waited;
    sluice_shutdown();
    g_print("failover (%s coverage): replica master %.0f ms after the kill; decisions on its "
            "slots resumed %.0f ms after that; %" G_GINT64_FORMAT " calls, %" G_GINT64_FORMAT
            " failed on its slots, %" G_GINT64_FORMAT " elsewhere; slowest %.1f ms; the live "
            "masters waited %.0f ms for a CPU\n",
            full ? "full" : "partial", (f->promoted_at - killed) / 1000.0,
            f->first_ok_after_promotion_us
                ? (f->first_ok_after_promotion_us - f->promoted_at) / 1000.0
                : -1.0,
            f->calls, f->errors_on_victim, f->errors_elsewhere, f->slowest_us / 1000.0,
            f->starved_us / 1000.0);
    ck_assert_msg(test_cluster_is_master(c, replica), "the replica did not take over in 10 s");
    ck_assert_int_eq(f->broke_policy, 0);
    ck_assert_msg(f->slowest_us <= (TIMEOUT_MS + SLACK_MS) * 1000 * fixture_time_scale(),
                  "a call took %.1f ms", f->slowest_us / 1000.0);
    ck_assert_msg(f->first_ok_after_promotion_us &&
                      f->first_ok_after_promotion_us - f->promoted_at <=
                          resume_within_us * fixture_time_scale(),
                  "decisions on the dead master's slots did not resume within %.1f s",
                  resume_within_us / 1e6);
    ck_assert_int_gt(f->errors_on_victim, 0); /* the outage was seen */
    /* before the replica took over, the dead master's breaker was open and no other */
    ck_assert_msg(f->exposition_open, "the gauge never showed %s", victim_open);
    for (int m = 0; m < 3; m++) {
        g_autofree char *gauge =
            g_strdup_printf("sluice_breaker_open{node=\"redis 127.0.0.1:%d\"} %d\n",
                            c->node[m]->port, m == f->victim);
        ck_assert_msg(strstr(f->exposition_open, gauge), "no %s in:\n%s", gauge,
                      f->exposition_open);
    }
    g_free(f->exposition_open);
}

START_TEST(a_dead_master_costs_only_its_slots_and_its_replica_takes_over_within_a_second)
{
    static failover f;
    kill_a_master(&f, FALSE, G_USEC_PER_SEC);
    /* a live master that did not answer in time because it was not given a CPU (a
     * loaded machine: other suites) is the machine's doing; any other failure there,
     * or a timeout while it had its CPU, is sluice's */
    gboolean starved = f.starved_us >= TIMEOUT_MS * 1000;
    ck_assert_msg(f.errors_elsewhere == (starved ? f.timeouts_elsewhere : 0),
                  "%" G_GINT64_FORMAT " calls on other masters failed (%" G_GINT64_FORMAT
                  " timed out; the masters waited %.0f ms for a CPU): %s",
                  f.errors_elsewhere, f.timeouts_elsewhere, f.starved_us / 1000.0,
                  f.first_error_elsewhere);
    test_cluster_stop(test_unconst(f.c));
}
END_TEST

START_TEST(with_full_coverage_every_call_follows_on_error_until_the_failover_ends)
{
    static failover f;
    kill_a_master(&f, TRUE, 5 * G_USEC_PER_SEC); /* each node rejoins when it sees it */
    /* every master refuses with CLUSTERDOWN meanwhile: calls everywhere fail, bounded,
     * by the policy; all resume after */
    g_print("full coverage: %" G_GINT64_FORMAT " calls on the live masters' slots failed: %s\n",
            f.errors_elsewhere, f.first_error_elsewhere ? f.first_error_elsewhere : "none");
    test_cluster_stop(test_unconst(f.c));
}
END_TEST

/* ---- resharding under load ---------------------------------------------------------- */

typedef struct {
    char *keys[KEYS];
    gint admitted[KEYS];
    gint errors;
    gint stop;
    char *first_error;
    GMutex lock;
} reshard;

#define RESHARD_LIMIT 400

static gpointer decide_while_moving(gpointer p)
{
    reshard *r = p;
    guint i = g_random_int();
    while (!g_atomic_int_get(&r->stop)) {
        int k = (int)(i++ % KEYS);
        sluice_decision d;
        g_autoptr(GError) error = NULL;
        int res = sluice_acquire("moving", r->keys[k], 1, &d, &error);
        if (res == SLUICE_ALLOWED)
            g_atomic_int_inc(&r->admitted[k]);
        if (res == SLUICE_FAILED) {
            g_mutex_lock(&r->lock);
            r->errors++;
            if (!r->first_error)
                r->first_error = g_strdup(error->message);
            g_mutex_unlock(&r->lock);
        }
    }
    return NULL;
}

static char *id_of(const test_cluster *c, int node)
{
    redisReply *r = test_cluster_command(c, c->node[node], "CLUSTER MYID");
    char *id = g_strdup(r->str);
    freeReplyObject(r);
    return id;
}

/* Starts moving slot from master `from` to master `to` as redis-cli --cluster reshard
 * does: IMPORTING, MIGRATING, then each of its keys MIGRATEd, one at a time. The
 * source answers ASK for them from then on. */
static void migrate_slot(const test_cluster *c, guint slot, int from, int to)
{
    g_autofree char *from_id = id_of(c, from), *to_id = id_of(c, to);
    redisReply *r =
        test_cluster_command(c, c->node[to], "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "%s", r ? r->str : "?");
    freeReplyObject(r);
    r = test_cluster_command(c, c->node[from], "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "%s", r ? r->str : "?");
    freeReplyObject(r);
    for (;;) {
        redisReply *keys =
            test_cluster_command(c, c->node[from], "CLUSTER GETKEYSINSLOT %u 10", slot);
        size_t n = keys->elements;
        for (size_t i = 0; i < n; i++) {
            r = test_cluster_command(c, c->node[from], "MIGRATE 127.0.0.1 %d %s 0 5000",
                                     c->node[to]->port, keys->element[i]->str);
            ck_assert_msg(r && r->type != REDIS_REPLY_ERROR, "MIGRATE: %s", r ? r->str : "?");
            freeReplyObject(r);
            g_usleep(2000); /* a window where the slot is half moved */
        }
        freeReplyObject(keys);
        if (n == 0)
            break;
    }
}

/* Ends the move: master `to` owns slot, node by node. */
static void give_slot(const test_cluster *c, guint slot, int to)
{
    g_autofree char *to_id = id_of(c, to);
    for (int m = 0; m < c->masters; m++) {
        redisReply *r =
            test_cluster_command(c, c->node[m], "CLUSTER SETSLOT %u NODE %s", slot, to_id);
        ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "%s", r ? r->str : "?");
        freeReplyObject(r);
    }
}

static void move_slot(const test_cluster *c, guint slot, int from, int to)
{
    migrate_slot(c, slot, from, to);
    give_slot(c, slot, to);
}

/* ---- a map gone stale ---------------------------------------------------------------- */

static int async_code;
static sluice_decision async_decision;

static void async_done(GObject *source, GAsyncResult *res, gpointer p)
{
    (void)source;
    g_autoptr(GError) error = NULL;
    async_code = sluice_acquire_finish(res, &async_decision, &error);
    ck_assert_msg(async_code != SLUICE_FAILED, "%s", error ? error->message : "?");
    *(gboolean *)p = TRUE;
}

/* One blocking and one asynchronous decision of limit name on key; the remaining
 * permits each saw. */
static void decide_on(const char *name, const char *key, gint64 *blocking, gint64 *async)
{
    sluice_decision d;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_acquire(name, key, 1, &d, &error) == SLUICE_ALLOWED, "%s %s: %s", name,
                  key, error ? error->message : "denied");
    *blocking = d.remaining;
    gboolean done = FALSE;
    sluice_acquire_async(name, key, 1, NULL, async_done, &done);
    while (!done)
        g_main_context_iteration(NULL, TRUE);
    ck_assert_int_eq(async_code, SLUICE_ALLOWED);
    *async = async_decision.remaining;
}

static void decide_both(const char *key, gint64 *blocking, gint64 *async)
{
    decide_on("api", key, blocking, async);
}

static int master_index(const test_cluster *c, guint slot)
{
    test_redis *owner = test_cluster_master_of(c, slot);
    for (int m = 0; m < c->masters; m++)
        if (c->node[m] == owner)
            return m;
    ck_abort_msg("no master serves slot %u", slot);
    return -1;
}

START_TEST(a_stale_map_follows_moved_and_ask_on_both_apis)
{
    test_cluster *c = test_cluster_start(NULL);
    /* sliding_log writes both keys of a call: the ASK target, importing the slot, runs a
     * script only when every key it names is there (else TRYAGAIN) */
    init_on(c, "deny", 2000, "[limit:api]\nalgorithm = sliding_log\nlimit = 10\nwindow = 1h\n");
    gint64 blocking, async;
    decide_both("moved", &blocking, &async);
    ck_assert_int_eq(async, 8);
    decide_both("asked", &blocking, &async);
    ck_assert_int_eq(async, 8);

    /* "moved": its slot goes to another master; the map still names the old one */
    guint slot = slot_of("api", "moved");
    int from = master_index(c, slot);
    move_slot(c, slot, from, (from + 1) % 3);
    decide_both("moved", &blocking, &async);
    ck_assert_int_eq(blocking, 7); /* the state moved with the slot */
    ck_assert_int_eq(async, 6);

    /* "asked": its keys are migrated, the slot not yet given: the old master ASKs */
    slot = slot_of("api", "asked");
    from = master_index(c, slot);
    migrate_slot(c, slot, from, (from + 1) % 3);
    decide_both("asked", &blocking, &async);
    ck_assert_int_eq(blocking, 7);
    ck_assert_int_eq(async, 6);
    ck_assert_int_eq(test_cluster_keys(c, c->node[from]), 0);
    give_slot(c, slot, (from + 1) % 3);
    decide_both("asked", &blocking, &async);
    ck_assert_int_eq(async, 4);
    sluice_shutdown();
    test_cluster_stop(c);
}
END_TEST

/* The number after `field` in node's INFO section, 0 when it is absent. */
static gint64 info_number(const test_cluster *c, int node, const char *section, const char *field)
{
    redisReply *r = test_cluster_command(c, c->node[node], "INFO %s", section);
    ck_assert_msg(r && r->type == REDIS_REPLY_STRING, "INFO %s: no answer", section);
    const char *at = strstr(r->str, field);
    gint64 n = at ? g_ascii_strtoll(at + strlen(field), NULL, 10) : 0;
    freeReplyObject(r);
    return n;
}

/* How many TRYAGAIN node has answered. */
static gint64 tryagains(const test_cluster *c, int node)
{
    return info_number(c, node, "errorstats", "errorstat_TRYAGAIN:count=");
}

START_TEST(a_slot_being_migrated_runs_calls_that_need_no_seq_key_on_its_new_master)
{
    test_cluster *c = test_cluster_start(NULL);
    /* the algorithms that write one key a call name only it: once it is migrated, the
     * old master ASKs and the new one runs the call (a second key named, absent on
     * both, made the new one answer TRYAGAIN until the move ended) */
    static const char *const names[] = {"fixed_window", "sliding_window", "token_bucket", "gcra"};
    GString *rules = g_string_new(NULL);
    for (guint i = 0; i < G_N_ELEMENTS(names); i++)
        g_string_append_printf(rules, "[limit:%s]\nalgorithm = %s\nlimit = 10\nwindow = 1h\n",
                               names[i], names[i]);
    init_on(c, "deny", 2000, rules->str);
    g_string_free(rules, TRUE);
    gint64 blocking, async;
    for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
        decide_on(names[i], "moving", &blocking, &async);
        ck_assert_int_eq(async, 8);
        guint slot = slot_of(names[i], "moving");
        int from = master_index(c, slot), to = (from + 1) % 3;
        migrate_slot(c, slot, from, to); /* its key moved, the slot not yet given */
        gint64 before = tryagains(c, from) + tryagains(c, to);
        decide_on(names[i], "moving", &blocking, &async);
        ck_assert_int_eq(blocking, 7); /* the state moved with the key */
        ck_assert_int_eq(async, 6);
        ck_assert_int_eq(tryagains(c, from) + tryagains(c, to), before);
        give_slot(c, slot, to);
        decide_on(names[i], "moving", &blocking, &async);
        ck_assert_int_eq(async, 4);
    }
    sluice_shutdown();
    test_cluster_stop(c);
}
END_TEST

#define ASKED_CALLS 10

/* Connections node has accepted, this one included. */
static gint64 connections_received(const test_cluster *c, int node)
{
    return info_number(c, node, "stats", "total_connections_received:");
}

/* A Cluster, sluice on it with one limit `api` of algorithm, and one call admitted on key. */
static test_cluster *start_with_api(const char *algorithm, int limit, const char *key)
{
    test_cluster *c = test_cluster_start(NULL);
    g_autofree char *rule =
        g_strdup_printf("[limit:api]\nalgorithm = %s\nlimit = %d\nwindow = 1h\n", algorithm, limit);
    init_on(c, "deny", 2000, rule);
    ck_assert_int_eq(sluice_acquire("api", key, 1, NULL, NULL), SLUICE_ALLOWED);
    return c;
}

START_TEST(asked_calls_go_on_the_targets_shared_connection_each_after_asking)
{
    test_cluster *c = start_with_api("fixed_window", 100, "asked");
    guint slot = slot_of("api", "asked");
    int from = master_index(c, slot), to = (from + 1) % 3;
    for (int k = 0;; k++) { /* a call on the target: its shared connection is open */
        g_autofree char *key = g_strdup_printf("on-%d", k);
        if (master_index(c, slot_of("api", key)) == to) {
            ck_assert_int_eq(sluice_acquire("api", key, 1, NULL, NULL), SLUICE_ALLOWED);
            break;
        }
    }
    migrate_slot(c, slot, from, to); /* its key moved, the slot not yet given: ASK */
    gint64 connections = connections_received(c, to);
    gint64 asking = test_redis_command_calls(c->node[to], "asking");
    for (int i = 0; i < ASKED_CALLS; i++) {
        sluice_decision d;
        g_autoptr(GError) error = NULL;
        ck_assert_msg(sluice_acquire("api", "asked", 1, &d, &error) == SLUICE_ALLOWED, "%s",
                      error ? error->message : "denied");
        ck_assert_int_eq(d.remaining, 98 - i); /* the state moved with the key */
    }
    /* one ASKING a call; no connection of sluice's: only the three INFOs after the first */
    ck_assert_int_eq(test_redis_command_calls(c->node[to], "asking") - asking, ASKED_CALLS);
    ck_assert_int_eq(connections_received(c, to) - connections, 3);
    sluice_shutdown();
    test_cluster_stop(c);
}
END_TEST

/* ---- sluice_shutdown during a TRYAGAIN pause -------------------------------------------- */

#define PAUSED_CALLS 16

static gint paused_done, paused_failed;

static void paused_call_done(GObject *source, GAsyncResult *res, gpointer p)
{
    (void)source;
    (void)p;
    g_autoptr(GError) error = NULL;
    paused_failed += sluice_acquire_finish(res, NULL, &error) == SLUICE_FAILED;
    paused_done++;
}

START_TEST(calls_in_a_tryagain_pause_fail_at_shutdown_and_touch_nothing_after)
{
    test_cluster *c = start_with_api("concurrency", 100, "half");
    /* the slot half moved and left so: the state key on the importing master, the
     * :seq key on the migrating one (concurrency's calls name both); each answers the call's two
     * keys with TRYAGAIN (Redis 7: some but not all of them here), so the calls go round pause
     * after pause of TRY_AGAIN_PAUSE_MS until their timeout */
    guint slot = slot_of("api", "half");
    int from = master_index(c, slot), to = (from + 1) % 3;
    g_autofree char *from_id = id_of(c, from), *to_id = id_of(c, to);
    freeReplyObject(
        test_cluster_command(c, c->node[to], "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id));
    freeReplyObject(
        test_cluster_command(c, c->node[from], "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id));
    redisReply *keys = test_cluster_command(c, c->node[from], "CLUSTER GETKEYSINSLOT %u 10", slot);
    ck_assert_int_eq(keys->elements, 2);
    for (size_t i = 0; i < keys->elements; i++)
        if (!g_str_has_suffix(keys->element[i]->str, ":seq"))
            freeReplyObject(test_cluster_command(c, c->node[from], "MIGRATE 127.0.0.1 %d %s 0 5000",
                                                 c->node[to]->port, keys->element[i]->str));
    freeReplyObject(keys);
    ck_assert_int_eq(test_cluster_keys(c, c->node[from]), 1);

    /* many calls out at once, most of them in a pause at any moment (a pause is 2 ms,
     * a round trip a fraction of that) */
    paused_done = paused_failed = 0;
    for (int i = 0; i < PAUSED_CALLS; i++)
        sluice_acquire_async("api", "half", 1, NULL, paused_call_done, NULL);
    gint64 until = g_get_monotonic_time() + 50000;
    while (g_get_monotonic_time() < until)
        g_main_context_iteration(NULL, FALSE);
    ck_assert_int_eq(paused_done, 0);
    sluice_shutdown();
    /* each fails now, not at its timeout (2 s): a pause left behind would fire on the
     * freed backend (ASan sees it) and its call would end only then */
    until = g_get_monotonic_time() + 200000;
    while (g_get_monotonic_time() < until)
        g_main_context_iteration(NULL, FALSE);
    ck_assert_int_eq(paused_done, PAUSED_CALLS);
    ck_assert_int_eq(paused_failed, PAUSED_CALLS);
    test_cluster_stop(c);
}
END_TEST

START_TEST(slots_moved_under_load_fail_no_call_and_admit_no_more)
{
    test_cluster *c = test_cluster_start(NULL);
    static reshard r;
    g_mutex_init(&r.lock);
    for (int k = 0; k < KEYS; k++)
        r.keys[k] = g_strdup_printf("r%d", k);
    g_autofree char *rules = g_strdup_printf(
        "[limit:moving]\nalgorithm = sliding_log\nlimit = %d\nwindow = 1h\n", RESHARD_LIMIT);
    g_autofree char *url = test_cluster_url(c);
    g_autofree char *contents = g_strdup_printf(
        "[sluice]\nbackend = redis\nredis = %s\ntimeout = 2s\non_error = deny\nreload = false\n%s",
        url, rules);
    g_autofree char *path = fixture_write_keyfile(contents);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    GThread *threads[DECIDERS];
    for (int i = 0; i < DECIDERS; i++)
        threads[i] = g_thread_new("decide", decide_while_moving, &r);
    g_usleep(100000);
    /* every key's slot goes to the next master, and the first 8 back again */
    for (int round = 0; round < 2; round++)
        for (int k = 0; k < (round ? 8 : KEYS); k++) {
            guint slot = slot_of("moving", r.keys[k]);
            test_redis *owner = test_cluster_master_of(c, slot);
            int from = 0;
            while (c->node[from] != owner)
                from++;
            move_slot(c, slot, from, (from + 1) % 3);
        }
    g_atomic_int_set(&r.stop, 1);
    for (int i = 0; i < DECIDERS; i++)
        g_thread_join(threads[i]);
    sluice_shutdown();
    gint total = 0;
    for (int k = 0; k < KEYS; k++) {
        ck_assert_msg(r.admitted[k] <= RESHARD_LIMIT, "%s admitted %d of %d", r.keys[k],
                      r.admitted[k], RESHARD_LIMIT);
        total += r.admitted[k];
    }
    g_print("resharding: %d admitted over %d keys while %d slots moved; %d calls failed\n", total,
            KEYS, KEYS + 8, r.errors);
    ck_assert_msg(r.errors == 0, "%d calls failed: %s", r.errors, r.first_error);
    ck_assert_int_gt(total, 0);
    test_cluster_stop(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("cluster");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, processes_share_per_key_limits_over_every_master);
    tcase_add_test(tc,
                   a_dead_master_costs_only_its_slots_and_its_replica_takes_over_within_a_second);
    tcase_add_test(tc, with_full_coverage_every_call_follows_on_error_until_the_failover_ends);
    tcase_add_test(tc, slots_moved_under_load_fail_no_call_and_admit_no_more);
    tcase_add_test(tc, a_stale_map_follows_moved_and_ask_on_both_apis);
    tcase_add_test(tc, asked_calls_go_on_the_targets_shared_connection_each_after_asking);
    tcase_add_test(tc, calls_in_a_tryagain_pause_fail_at_shutdown_and_touch_nothing_after);
    tcase_add_test(tc, a_slot_being_migrated_runs_calls_that_need_no_seq_key_on_its_new_master);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
