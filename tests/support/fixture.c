/* SPDX-License-Identifier: MIT */
/* What the check suites share: keyfiles in temporary files and an injected clock. */
#include "fixture.h"

#include "tls_certs.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static gint64 fake_now;
static guint sleeps;

static gint64 clock_now(gpointer user_data)
{
    (void)user_data;
    return fake_now;
}

static void clock_sleep(gint64 until_us, gpointer user_data)
{
    (void)user_data;
    sleeps++;
    if (until_us > fake_now)
        fake_now = until_us;
}

static GPtrArray *written; /* keyfiles to remove when the process exits */

static void remove_written(void)
{
    for (guint i = 0; written && i < written->len; i++)
        g_unlink(g_ptr_array_index(written, i));
}

char *fixture_write_keyfile(const char *contents)
{
    GError *error = NULL;
    char *path = NULL;
    int fd = g_file_open_tmp("sluice-test-XXXXXX.ini", &path, &error);
    ck_assert_msg(fd >= 0, "cannot create a temporary keyfile: %s", error ? error->message : "");
    close(fd);
    ck_assert(g_file_set_contents(path, contents, -1, NULL));
    if (!written) {
        written = g_ptr_array_new_with_free_func(g_free);
        atexit(remove_written);
    }
    g_ptr_array_add(written, g_strdup(path));
    return path;
}

static test_redis *redis;
static test_cluster *cluster;
static test_sentinel *sentinel;

/* SLUICE_TEST_BACKEND is topology, or topology_tls. */
static gboolean backend_is(const char *topology)
{
    const char *backend = g_getenv("SLUICE_TEST_BACKEND");
    gsize n = strlen(topology);
    return backend && strncmp(backend, topology, n) == 0 &&
           (backend[n] == '\0' || strcmp(backend + n, "_tls") == 0);
}

gboolean fixture_on_cluster(void)
{
    return backend_is("cluster");
}

gboolean fixture_on_sentinel(void)
{
    return backend_is("sentinel");
}

gboolean fixture_on_redis(void)
{
    return g_strcmp0(g_getenv("SLUICE_TEST_BACKEND"), "redis") == 0 || fixture_on_cluster() ||
           fixture_on_sentinel() || fixture_on_tls();
}

gboolean fixture_on_tls(void)
{
    const char *backend = g_getenv("SLUICE_TEST_BACKEND");
    return backend && g_str_has_suffix(backend, "tls");
}

test_cluster *fixture_cluster(void)
{
    return cluster;
}

test_sentinel *fixture_sentinel(void)
{
    return sentinel;
}

test_redis *fixture_redis(void)
{
    return redis;
}

gboolean fixture_on_shm(void)
{
    return g_strcmp0(g_getenv("SLUICE_TEST_BACKEND"), "shm") == 0;
}

static void remove_zone(void)
{
    sluice_zone_remove(fixture_zone_name(), NULL);
}

const char *fixture_zone_name(void)
{
    static char name[64];
    static pid_t named;
    if (named != getpid()) { /* each test is a process of its own */
        if (named == 0)
            atexit(remove_zone);
        named = getpid();
        g_snprintf(name, sizeof name, "test-%d", (int)named);
    }
    return name;
}

char *fixture_contents(const char *contents)
{
    if (fixture_on_shm()) /* a test's own [sluice] comes after, its values last */
        return g_strdup_printf("[sluice]\nbackend = shm\nshm = %s\nshm_size = 8M\n%s",
                               fixture_zone_name(), contents);
    if (!redis && !cluster)
        return g_strdup(contents);
    /* GKeyFile merges a second [sluice] group of the test's into this one, its
     * values last. A call's timeout covers its connect too: on a loaded machine
     * 50 ms is not always enough, and these suites test answers, not timing.
     * The denial cache is off: these suites pin down the backend's own answers
     * field by field, and a cached denial reports `remaining` as the backend said
     * it (docs/algorithms.md); check_denial_cache turns it on. Under TLS the
     * servers are reached with rediss:// (+cluster, +sentinel) on their TLS
     * ports, trusting the test CA. */
    gboolean tls = fixture_on_tls();
    g_autofree char *ca = tls ? test_tls_file("ca.pem") : NULL;
    g_autofree char *url = sentinel  ? test_sentinel_url(sentinel)
                           : cluster ? test_cluster_url(cluster)
                           : tls     ? test_tls_url(redis)
                                     : test_redis_url(redis);
    g_autofree char *trust = ca ? g_strdup_printf("tls_ca_file = %s\n", ca) : g_strdup("");
    /* 2 s a call, stretched as the suites' bounds are under sanitizers and valgrind */
    return g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\n%stimeout = %" G_GINT64_FORMAT
                           "s\ndenial_cache = false\n%s",
                           url, trust, 2 * fixture_time_scale(), contents);
}

void fixture_flush(void)
{
    if (fixture_on_shm())
        remove_zone();
    if (redis) {
        test_redis_resume(redis); /* a test that failed while it was paused */
        redisReply *r = test_redis_command(redis, "FLUSHALL");
        ck_assert_ptr_nonnull(r);
        freeReplyObject(r);
    }
    for (int m = 0; cluster && m < cluster->masters; m++) {
        redisReply *r = test_cluster_command(cluster, cluster->node[m], "FLUSHALL");
        ck_assert_ptr_nonnull(r);
        freeReplyObject(r);
    }
}

gint64 fixture_keys(void)
{
    gint64 keys = 0;
    if (redis) {
        redisReply *r = test_redis_command(redis, "DBSIZE");
        ck_assert_msg(r && r->type == REDIS_REPLY_INTEGER, "DBSIZE: no answer");
        keys = r->integer;
        freeReplyObject(r);
    }
    for (int m = 0; cluster && m < cluster->masters; m++) {
        gint64 n = test_cluster_keys(cluster, cluster->node[m]);
        ck_assert_msg(n >= 0, "cluster master %d does not answer DBSIZE", m);
        keys += n;
    }
    return keys;
}

redisReply *fixture_command(const char *key, const char *format, ...)
{
    test_redis *node = redis ? redis : cluster ? test_cluster_master_of_key(cluster, key) : NULL;
    ck_assert_msg(node, "no server holds %s", key);
    va_list ap;
    va_start(ap, format);
    redisReply *r = test_redis_vcommand(node, format, ap);
    va_end(ap);
    ck_assert_msg(r, "port %d did not answer", node->port);
    return r;
}

/* Every server of the suite (its redis-server, or each master of its Cluster). */
static void each_server(void (*f)(test_redis *))
{
    if (redis)
        f(redis);
    for (int m = 0; cluster && m < cluster->masters; m++)
        f(cluster->node[m]);
}

void fixture_pause(void)
{
    each_server(test_redis_pause);
}

void fixture_resume(void)
{
    each_server(test_redis_resume);
}

void fixture_init(const char *contents)
{
    fixture_flush();
    g_autofree char *with_backend = fixture_contents(contents);
    g_autofree char *path = fixture_write_keyfile(with_backend);
    g_autoptr(GError) error = NULL;
    gboolean ok = sluice_init(path, &error);
    ck_assert_msg(ok, "sluice_init: %s", error ? error->message : "?");
    g_unlink(path);
}

void fixture_clock_start(gint64 start_us)
{
    fake_now = start_us;
    sleeps = 0;
    sluice_clock_set(clock_now, clock_sleep, NULL);
}

void fixture_clock_set(gint64 now_us)
{
    fake_now = now_us;
}

void fixture_clock_advance_ms(gint64 ms)
{
    fake_now += ms * 1000;
}

gint64 fixture_clock_now(void)
{
    return fake_now;
}

gint64 fixture_time_scale(void)
{
    const char *v = g_getenv("SLUICE_TEST_TIME_SCALE");
    gint64 scale = v ? g_ascii_strtoll(v, NULL, 10) : 1;
    return scale >= 1 ? scale : 1;
}

guint fixture_clock_sleeps(void)
{
    return sleeps;
}

static void close_fd(gpointer p)
{
    close(GPOINTER_TO_INT(p) - 1);
}

static GPrivate schedstat_fd = G_PRIVATE_INIT(close_fd); /* fd + 1; 0: not open */

static gint64 read_cpu_wait_us(void)
{
    int fd = GPOINTER_TO_INT(g_private_get(&schedstat_fd)) - 1;
    if (fd < 0) {
        fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return 0;
        g_private_set(&schedstat_fd, GINT_TO_POINTER(fd + 1));
    }
    char text[128];
    ssize_t n = pread(fd, text, sizeof text - 1, 0); /* "run_ns wait_ns slices\n" */
    if (n <= 0)
        return 0;
    text[n] = '\0';
    char *rest;
    g_ascii_strtoll(text, &rest, 10);
    return g_ascii_strtoll(rest, NULL, 10) / 1000;
}

/* Steal time: while this virtual machine had work for a CPU, the hypervisor ran
 * something else. No thread sees it as waiting (it looks like running), so a
 * thread samples /proc/stat's steal, summed over the CPUs, every 2 ms; its unit
 * is the kernel's tick (USER_HZ), so it counts up in steps of 10 ms. */
static gsize stolen_us; /* atomic (g_atomic_pointer_*: gsize is pointer-sized) */

static gint64 read_steal_us(int fd)
{
    char text[256]; /* "cpu  user nice system idle iowait irq softirq steal ..." */
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    char *p = text + 3;
    gint64 steal = 0;
    for (int field = 0; field < 8; field++)
        steal = g_ascii_strtoll(p, &p, 10);
    return steal * (G_USEC_PER_SEC / sysconf(_SC_CLK_TCK));
}

static gpointer sample_steal(gpointer data)
{
    int fd = GPOINTER_TO_INT(data);
    for (;;) {
        g_atomic_pointer_set(&stolen_us, (gsize)read_steal_us(fd));
        g_usleep(2000);
    }
    return NULL;
}

static gint64 steal_us(void)
{
    static gsize started;
    if (g_once_init_enter(&started)) {
        int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            g_atomic_pointer_set(&stolen_us, (gsize)read_steal_us(fd));
            g_thread_unref(g_thread_new("fixture-steal", sample_steal, GINT_TO_POINTER(fd)));
        }
        g_once_init_leave(&started, 1);
    }
    return (gint64)g_atomic_pointer_get(&stolen_us);
}

void fixture_thread_clock(gint64 *now_us, gint64 *cpu_wait_us)
{
    /* a preemption (most likely as a system call returns) between reading the
     * clock and the wait would count on one side only: read until none did */
    gint64 before = read_cpu_wait_us(), after;
    for (int i = 0; i < 100; i++, before = after) {
        *now_us = g_get_monotonic_time();
        after = read_cpu_wait_us();
        if (after == before)
            break;
    }
    *cpu_wait_us = after + steal_us();
}

fixture_stamp fixture_stamp_now(void)
{
    fixture_stamp s;
    fixture_thread_clock(&s.now_us, &s.cpu_wait_us);
    return s;
}

gint64 fixture_stamp_took_us(fixture_stamp from, fixture_stamp to)
{
    return (to.now_us - from.now_us) - (to.cpu_wait_us - from.cpu_wait_us);
}

/* GCC 12's ThreadSanitizer runtime does not hold its own locks across fork() (its
 * stack depot, its deadlock detector: LLVM's runtime holds them since 2024, PR
 * 96600), so a child forked while other threads are inside it can spin forever on
 * one of them at its first lock, whatever the program does (seen once in CI, then not
 * in 150 runs of check_threads). Under TSan the children exit at once: TSan still
 * checks the parent's side, sluice's pthread_atfork handlers taking its locks while
 * threads decide; the children's decisions are checked by the other runs. */
#if defined(__SANITIZE_THREAD__)
#define CHILDREN_CHECK FALSE
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHILDREN_CHECK FALSE
#endif
#endif
#ifndef CHILDREN_CHECK
#define CHILDREN_CHECK TRUE
#endif

typedef struct {
    const char *name;
    gint stop;
} deciders;

static gpointer keep_deciding(gpointer data)
{
    deciders *d = data;
    while (!g_atomic_int_get(&d->stop))
        sluice_acquire(d->name, NULL, 1, NULL, NULL);
    return NULL;
}

int fixture_fork_children(const char *deciding, int children, gint64 pause_us,
                          gboolean (*check)(void))
{
    deciders d = {deciding, 0};
    GThread *threads[4];
    for (guint i = 0; i < G_N_ELEMENTS(threads); i++)
        threads[i] = g_thread_new("decider", keep_deciding, &d);
    gint *verdict =
        mmap(NULL, sizeof(gint), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(verdict != MAP_FAILED);
    for (int c = 0; c < children; c++) {
        g_usleep(pause_us);
        g_atomic_int_set(verdict, 0);
        pid_t child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0 && !CHILDREN_CHECK) {
            g_atomic_int_set(verdict, 1);
            _exit(0);
        }
        if (child == 0) {
            signal(SIGALRM, SIG_DFL); /* check's inherited handler would kill the test */
            alarm(10 * fixture_time_scale());
            g_atomic_int_set(verdict, check() ? 1 : 2);
            _exit(0);
        }
        int status;
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        int v = g_atomic_int_get(verdict);
        ck_assert_msg(v == 1, "child %d: %s (%s %d)", c,
                      v == 2 ? "a wrong answer" : "stuck, or died",
                      WIFEXITED(status) ? "exit" : "signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    munmap(verdict, sizeof(gint));
    g_atomic_int_set(&d.stop, 1);
    for (guint i = 0; i < G_N_ELEMENTS(threads); i++)
        g_thread_join(threads[i]);
    return CHILDREN_CHECK ? children : 0;
}

/* On a Cluster: decisions on 32 keys leave keys on every master (the suite's keys
 * spread too, but each test flushes them). FALSE, and why, when a master holds none. */
static gboolean keys_spread_over_every_master(void)
{
    const char *keyfile = "[limit:spread]\nalgorithm = fixed_window\nlimit = 5\nwindow = 1m\n";
    g_autofree char *contents = fixture_contents(keyfile);
    g_autofree char *path = NULL;
    g_autoptr(GError) error = NULL;
    int fd = g_file_open_tmp("sluice-test-XXXXXX.ini", &path, &error); /* no ck_*: no test runs */
    if (fd >= 0)
        close(fd);
    if (fd < 0 || !g_file_set_contents(path, contents, -1, &error)) {
        g_printerr("fixture: cannot write a keyfile: %s\n", error->message);
        return FALSE;
    }
    gboolean ok = sluice_init(path, &error);
    g_unlink(path);
    if (!ok) {
        g_printerr("fixture: sluice_init on the cluster: %s\n", error->message);
        return FALSE;
    }
    for (int i = 0; i < 32; i++) {
        g_autofree char *key = g_strdup_printf("user-%d", i);
        sluice_decision d;
        if (sluice_acquire("spread", key, 1, &d, &error) != SLUICE_ALLOWED) {
            g_printerr("fixture: a decision on the cluster failed: %s\n",
                       error ? error->message : "denied");
            sluice_shutdown();
            return FALSE;
        }
    }
    sluice_shutdown();
    gboolean every = TRUE;
    for (int m = 0; m < cluster->masters; m++) {
        gint64 keys = test_cluster_keys(cluster, cluster->node[m]);
        g_print("cluster master %d (port %d) holds %" G_GINT64_FORMAT " keys\n", m,
                cluster->node[m]->port, keys);
        every = every && keys > 0;
    }
    return every;
}

int fixture_run(Suite *suite)
{
    SRunner *runner = srunner_create(suite);
    if (fixture_on_cluster()) { /* 3 masters; the forked tests inherit it */
        const test_cluster_options options = {.tls = fixture_on_tls()};
        cluster = test_cluster_start(&options);
    } else if (fixture_on_sentinel()) {
        /* the master stays the master: a test that pauses it for a while (a hung
         * server) does not make the Sentinels fail over */
        const test_sentinel_options slow = {.down_after_ms = 10000, .tls = fixture_on_tls()};
        sentinel = test_sentinel_start(&slow);
        redis = sentinel->node[0];
    } else if (fixture_on_tls()) { /* the certificates and the server, for the forked tests */
        redis = test_tls_start("server", "optional");
    } else if (fixture_on_redis()) {
        redis = test_redis_start(NULL); /* the forked tests inherit it */
    }
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    if (cluster && !keys_spread_over_every_master()) {
        g_printerr("fixture: a master of the cluster holds no key\n");
        failed++;
    }
    if (sentinel)
        test_sentinel_stop(sentinel); /* and its master, `redis` */
    else
        test_redis_stop(redis);
    redis = NULL;
    sentinel = NULL;
    test_cluster_stop(cluster);
    cluster = NULL;
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

typedef struct {
    void (*wake)(void);
} waker;

static gpointer wake_later(gpointer data)
{
    g_usleep(100000);
    ((waker *)data)->wake();
    return NULL;
}

void fixture_waiter_woken_by(void (*wake)(void))
{
    sluice_clock_set(NULL, NULL, NULL);
    fixture_init("[limit:slots]\nalgorithm = concurrency\nlimit = 1\nwindow = 1m\n");
    ck_assert_int_eq(sluice_acquire("slots", NULL, 1, NULL, NULL), SLUICE_ALLOWED);
    waker w = {wake};
    gint64 start = g_get_monotonic_time(); /* before the waker's 100 ms begin */
    GThread *t = g_thread_new("wake", wake_later, &w);
    ck_assert_int_eq(sluice_acquire_wait("slots", NULL, 1, 5000, NULL, NULL), SLUICE_ALLOWED);
    gint64 waited = g_get_monotonic_time() - start;
    g_thread_join(t);
    ck_assert_int_ge(waited, 90000);
    ck_assert_int_lt(waited, 2000000);
    sluice_shutdown();
}

void fixture_refused(const char *contents, const char *message)
{
    g_autofree char *path = fixture_write_keyfile(contents);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(!sluice_init(path, &error), "accepted: %s", contents);
    ck_assert_msg(g_str_has_suffix(error->message, message), "%s", error->message);
}
