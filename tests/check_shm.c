/* SPDX-License-Identifier: MIT */
/* The shm backend's zone: its file and who may open it, processes that share it
 * (exactly, with different keyfiles, dying at any moment), and how it stays
 * bounded. The answers of each algorithm are the conformance suites' (they run
 * with SLUICE_TEST_BACKEND=shm). */
#include "children.h"
#include "fixture.h"

#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A keyfile's contents on this test's zone of `size`, with more [sluice] settings and
 * rules. g_free it. */
static char *zone_contents(const char *size, const char *sluice, const char *rules)
{
    return g_strdup_printf("[sluice]\nbackend = shm\nshm = %s\nshm_size = %s\n%s\n%s",
                           fixture_zone_name(), size, sluice, rules);
}

/* A keyfile on this test's zone of `size`, with more [sluice] settings and rules. */
static char *zone_keyfile(const char *size, const char *sluice, const char *rules)
{
    g_autofree char *contents = zone_contents(size, sluice, rules);
    return fixture_write_keyfile(contents);
}

/* Rewrites keyfile `path` on this test's zone of 1M with `rules`, and reloads it. */
static void reload_with(const char *path, const char *rules)
{
    g_autofree char *contents = zone_contents("1M", "", rules);
    ck_assert(g_file_set_contents(path, contents, -1, NULL));
    ck_assert(sluice_reload(NULL));
}

static char *zone_file(void)
{
    return g_strdup_printf("/dev/shm/sluice-%s", fixture_zone_name());
}

/* A fresh zone: none of this test's before it. */
static void no_zone(void)
{
    sluice_zone_remove(fixture_zone_name(), NULL);
}

static void init_ok(const char *path)
{
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "sluice_init: %s", error ? error->message : "");
}

/* sluice_init of path fails, with a message that contains `part`. */
static void init_refused(const char *path, const char *part)
{
    g_autoptr(GError) error = NULL;
    ck_assert_msg(!sluice_init(path, &error), "accepted %s", path);
    ck_assert_msg(strstr(error->message, part), "%s", error->message);
}

static gint64 remaining(const char *name, const char *key)
{
    sluice_decision d;
    ck_assert_int_ne(sluice_acquire(name, key, 0, &d, NULL), SLUICE_FAILED);
    return d.remaining;
}

static const char *hourly = "[limit:api]\nalgorithm = fixed_window\nlimit = 5\nwindow = 1h\n";

/* A keyfile of `hourly` on a zone of `size` just made (and left by this process). */
static char *made_zone(const char *size)
{
    no_zone();
    char *path = zone_keyfile(size, "", hourly);
    init_ok(path);
    sluice_shutdown();
    return path;
}

/* The zone's file has this mode and size. */
static void zone_file_is(guint mode, gint64 size)
{
    g_autofree char *file = zone_file();
    struct stat st;
    ck_assert_int_eq(g_stat(file, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, mode);
    ck_assert_int_eq(st.st_size, size);
}

/* ---- the file -------------------------------------------------------------------- */

START_TEST(the_zone_is_a_file_of_dev_shm_named_after_shm_that_outlives_its_processes)
{
    no_zone();
    g_autofree char *path = zone_keyfile("4M", "", hourly);
    g_autofree char *file = zone_file();
    init_ok(path);
    zone_file_is(0600, 4 << 20);
    sluice_zone_info z;
    ck_assert(sluice_zone_get(&z, NULL));
    ck_assert_str_eq(z.name, fixture_zone_name());
    ck_assert_str_eq(z.path, file);
    ck_assert_int_eq(z.size, 4 << 20);
    ck_assert_int_eq(z.keys, 0);
    ck_assert_uint_eq(z.processes, 1);
    ck_assert_int_le(z.size / z.capacity, 64); /* at most 64 bytes per key */
    ck_assert_int_eq(sluice_acquire("api", "alice", 2, NULL, NULL), SLUICE_ALLOWED);
    ck_assert(sluice_zone_get(&z, NULL));
    ck_assert_int_eq(z.keys, 1);
    g_autofree char *metrics = sluice_stats_prometheus();
    g_autofree char *gauge =
        g_strdup_printf("sluice_zone_keys{zone=\"%s\"} 1\n", fixture_zone_name());
    ck_assert_msg(strstr(metrics, gauge), "%s", metrics);
    sluice_shutdown();
    zone_file_is(0600, 4 << 20); /* it outlives the process */
    init_ok(path);
    ck_assert_int_eq(remaining("api", "alice"), 3);
    sluice_shutdown();
    ck_assert(sluice_zone_remove(fixture_zone_name(), NULL));
    struct stat st;
    ck_assert_int_ne(g_stat(file, &st), 0);
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_zone_remove(fixture_zone_name(), &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT));
}
END_TEST

START_TEST(shm_mode_0660_shares_the_zone_with_its_group)
{
    no_zone();
    g_autofree char *path = zone_keyfile("1M", "shm_mode = 0660\n", hourly);
    init_ok(path);
    zone_file_is(0660, 1 << 20);
    sluice_shutdown();
    /* a process whose keyfile says 0600 does not open a zone that others may write */
    g_autofree char *narrow = zone_keyfile("1M", "", hourly);
    init_refused(narrow, "its mode 0660 lets more in than shm_mode 0600");
}
END_TEST

START_TEST(a_zone_of_another_user_is_refused)
{
    g_autofree char *path = made_zone("1M");
    g_autofree char *file = zone_file();
    ck_assert_int_eq(chown(file, 65534, 65534), 0); /* nobody's: as root, this test can */
    init_refused(path, "belongs to another user (uid 65534), not to this process's (uid 0)");
    ck_assert_int_eq(chown(file, 0, 0), 0);
    ck_assert_int_eq(chmod(file, 0666), 0);
    init_refused(path, "its mode 0666 lets more in than shm_mode 0600");
}
END_TEST

/* Writes `length` bytes at `offset` of the zone's file. */
static void scribble(gsize offset, const void *bytes, gsize length)
{
    g_autofree char *file = zone_file();
    int fd = open(file, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, bytes, length, (off_t)offset), (ssize_t)length);
    close(fd);
}

START_TEST(a_zone_of_another_layout_version_is_refused)
{
    g_autofree char *path = made_zone("1M");
    guint32 version = 99;
    scribble(8, &version, sizeof version); /* after the 8 bytes of magic */
    init_refused(path, "made by another version of sluice (zone layout 99, this one reads 2); "
                       "remove it with sluice zone --remove");
    version = 1; /* a zone of sluice before the stripes' block filter */
    scribble(8, &version, sizeof version);
    init_refused(path, "(zone layout 1, this one reads 2)");
    scribble(0, "notazone", 8);
    init_refused(path, "not a sluice zone (no magic)");
}
END_TEST

START_TEST(a_truncated_zone_is_refused)
{
    g_autofree char *path = made_zone("2M");
    g_autofree char *file = zone_file();
    ck_assert_int_eq(truncate(file, 1 << 20), 0);
    init_refused(path, "its header says 2097152 bytes, the file has 1048576 (truncated?)");
    /* a size the header was not made for, even when the file has it */
    ck_assert_int_eq(truncate(file, 2 << 20), 0);
    guint64 size = 3 << 20;
    scribble(24, &size, sizeof size); /* the layout's size, after magic and 4 words */
    init_refused(path, "its header says 3145728 bytes, the file has 2097152 (truncated?)");
}
END_TEST

START_TEST(an_existing_zone_keeps_its_size)
{
    g_autofree char *small = made_zone("1M");
    g_autofree char *large = zone_keyfile("8M", "", hourly);
    init_ok(large);
    sluice_zone_info z;
    ck_assert(sluice_zone_get(&z, NULL));
    ck_assert_int_eq(z.size, 1 << 20);
    sluice_shutdown();
}
END_TEST

#define STARTERS 8

/* What the starters of processes_that_start_at_once share. */
typedef struct {
    gint ready, go, attached, admitted;
    const char *path;
} starting;

/* A starter: attaches to the zone the moment every starter is ready. */
static int start_at_once(guint i, gpointer data)
{
    (void)i;
    starting *s = data;
    g_atomic_int_inc(&s->ready);
    while (!g_atomic_int_get(&s->go))
        ; /* spin: they start within microseconds of each other */
    if (sluice_init(s->path, NULL)) {
        g_atomic_int_inc(&s->attached);
        if (sluice_acquire("api", "k", 1, NULL, NULL) == SLUICE_ALLOWED)
            g_atomic_int_inc(&s->admitted);
        sluice_shutdown();
    }
    return 0;
}

/* STARTERS processes attach at the same moment to a zone that is not there yet:
 * each one either makes it or waits until the one that does has made it whole;
 * every one attaches, there is one zone, and the limit is shared exactly. */
START_TEST(processes_that_start_at_once_make_one_zone)
{
    no_zone();
    g_autofree char *path = zone_keyfile("1M", "", hourly);
    starting *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(s != MAP_FAILED);
    *s = (starting){.path = path};
    pid_t pids[STARTERS];
    children_fork(STARTERS, 60, start_at_once, s, pids);
    while (g_atomic_int_get(&s->ready) < STARTERS)
        g_usleep(100);
    g_atomic_int_set(&s->go, 1);
    ck_assert_uint_eq(children_wait(STARTERS, pids), STARTERS);
    ck_assert_int_eq(s->attached, STARTERS);
    ck_assert_int_eq(s->admitted, 5); /* hourly's limit, once among them all */
    munmap(s, sizeof *s);
    zone_file_is(0600, 1 << 20);
    init_ok(path);
    ck_assert_int_eq(remaining("api", "k"), 0);
    sluice_shutdown();
}
END_TEST

/* ---- processes that share a zone -------------------------------------------------- */

/* A child that has attached with keyfile `path`, has done then() (may be NULL)
 * and waits for a byte on `hold`; returns its pid once it has. */
static pid_t attached_child(const char *path, gboolean (*then)(void), int hold[2])
{
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(hold), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char c = sluice_init(path, NULL) && (!then || then()) ? 'y' : 'n';
        (void)!write(ready[1], &c, 1);
        (void)!read(hold[0], &c, 1);
        sluice_shutdown();
        _exit(0);
    }
    char c = 0;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    ck_assert_int_eq(c, 'y');
    close(ready[0]);
    close(ready[1]);
    return pid;
}

static void let_go(pid_t pid, int hold[2])
{
    ck_assert_int_eq(write(hold[1], "x", 1), 1);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    close(hold[0]);
    close(hold[1]);
}

START_TEST(processes_with_different_rules_for_one_zone_are_told_both_values)
{
    no_zone();
    g_autofree char *five = zone_keyfile("1M", "", hourly);
    g_autofree char *ten =
        zone_keyfile("1M", "", "[limit:api]\nalgorithm = fixed_window\nlimit = 10\nwindow = 1h\n");
    g_autofree char *log =
        zone_keyfile("1M", "", "[limit:api]\nalgorithm = sliding_log\nlimit = 5\nwindow = 1h\n");
    int hold[2];
    pid_t child = attached_child(five, NULL, hold);
    init_refused(ten, "[limit:api] limit = 10 here, 5 in the zone, which another process uses");
    init_refused(log, "[limit:api] algorithm = sliding_log here, fixed_window in the zone");
    init_ok(five); /* the same rules: shared */
    sluice_zone_info z;
    ck_assert(sluice_zone_get(&z, NULL));
    ck_assert_uint_eq(z.processes, 2);
    sluice_shutdown();
    let_go(child, hold);
    /* alone, a process brings its own rules: the zone takes them */
    init_ok(ten);
    ck_assert_int_eq(sluice_acquire("api", NULL, 10, NULL, NULL), SLUICE_ALLOWED);
    sluice_shutdown();
}
END_TEST

START_TEST(reload_keeps_each_limits_state_in_the_zone)
{
    no_zone();
    fixture_clock_start(1000000);
    g_autofree char *path = zone_keyfile("1M", "", hourly);
    init_ok(path);
    ck_assert_int_eq(sluice_acquire("api", "k", 3, NULL, NULL), SLUICE_ALLOWED);
    reload_with(path, "[limit:api]\nalgorithm = fixed_window\nlimit = 6\nwindow = 1h\n");
    ck_assert_int_eq(remaining("api", "k"), 3); /* 6 - 3 */
    /* another algorithm keeps its state another way: it starts afresh */
    reload_with(path, "[limit:api]\nalgorithm = sliding_window\nlimit = 6\nwindow = 1h\n");
    ck_assert_int_eq(remaining("api", "k"), 6);
    sluice_shutdown();
}
END_TEST

/* ---- exactness across processes ---------------------------------------------------- */

#define PROCESSES 4
#define THREADS   2

typedef struct {
    const char *name, *key;
    gint64 admitted;
    gint denials_left;
} hammering;

static gpointer hammer(gpointer data)
{
    hammering *h = data;
    while (h->denials_left > 0) {
        if (sluice_acquire(h->name, h->key, 1, NULL, NULL) == SLUICE_ALLOWED)
            h->admitted++;
        else
            h->denials_left--;
    }
    return NULL;
}

/* What the processes of processes_hammer share. */
typedef struct {
    const char *path, *name, *key;
    gint64 counts[PROCESSES]; /* each one's admissions; -1 until it finished */
} hammered;

/* A process of processes_hammer: THREADS threads hammer the key. */
static int hammer_process(guint p, gpointer data)
{
    hammered *s = data;
    if (!sluice_init(s->path, NULL))
        return 1;
    hammering h[THREADS];
    GThread *threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        h[t] = (hammering){s->name, s->key, 0, 200};
        threads[t] = g_thread_new("hammer", hammer, &h[t]);
    }
    gint64 n = 0;
    for (int t = 0; t < THREADS; t++) {
        g_thread_join(threads[t]);
        n += h[t].admitted;
    }
    sluice_shutdown();
    s->counts[p] = n;
    return 0;
}

/* PROCESSES processes of THREADS threads each decide on one key of `name` until
 * each thread was denied 200 times; returns how many they admitted together. */
static gint64 processes_hammer(const char *path, const char *name, const char *key)
{
    hammered *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(s != MAP_FAILED);
    *s = (hammered){path, name, key, {0}};
    for (int p = 0; p < PROCESSES; p++)
        s->counts[p] = -1;
    pid_t pids[PROCESSES];
    children_fork(PROCESSES, 60, hammer_process, s, pids);
    ck_assert_uint_eq(children_wait(PROCESSES, pids), PROCESSES);
    gint64 total = 0;
    for (int p = 0; p < PROCESSES; p++) {
        ck_assert_msg(s->counts[p] >= 0, "process %d did not finish", p);
        total += s->counts[p];
    }
    munmap(s, sizeof *s);
    return total;
}

static const char *const exact_rules[] = {
    "[limit:x]\nalgorithm = fixed_window\nlimit = 20000\nwindow = 1h\n",
    "[limit:x]\nalgorithm = sliding_log\nlimit = 3000\nwindow = 1h\n",
    "[limit:x]\nalgorithm = sliding_window\nlimit = 20000\nwindow = 100d\n",
    "[limit:x]\nalgorithm = token_bucket\nlimit = 1\nwindow = 1d\nburst = 20000\n",
    "[limit:x]\nalgorithm = gcra\nlimit = 1\nwindow = 1d\nburst = 20000\n",
    "[limit:x]\nalgorithm = fixed_window\nlimit = 20000\nwindow = 1h\n"
    "bands = 30000/2h, 25000/1d\n",
};
static const gint64 exact_limits[] = {20000, 3000, 20000, 20000, 20000, 20000};

START_TEST(four_processes_of_two_threads_admit_exactly_the_limit_of_one_key)
{
    no_zone();
    g_autofree char *path = zone_keyfile("4M", "", exact_rules[_i]);
    gint64 total = processes_hammer(path, "x", "hot");
    ck_assert_int_eq(total, exact_limits[_i]);
}
END_TEST

/* ---- processes that die ------------------------------------------------------------- */

static const char *mixed =
    "[limit:fw]\nalgorithm = fixed_window\nlimit = 3\nwindow = 1h\n"
    "[limit:log]\nalgorithm = sliding_log\nlimit = 20\nwindow = 1h\n"
    "[limit:tb]\nalgorithm = token_bucket\nlimit = 5\nwindow = 1s\nburst = 10\n"
    "[limit:slots]\nalgorithm = concurrency\nlimit = 4\nwindow = 1h\nper_key = false\n"
    "[limit:banded]\nalgorithm = gcra\nlimit = 100\nwindow = 1s\nbands = 1000/1h\n"
    "[limit:fresh]\nalgorithm = fixed_window\nlimit = 20000\nwindow = 1h\n";

/* Decides on every limit of `mixed`, over many keys, until killed. */
static void decide_forever(const char *path)
{
    if (!sluice_init(path, NULL))
        _exit(1);
    for (guint i = 0;; i++) {
        char key[32];
        g_snprintf(key, sizeof key, "k%u", g_random_int_range(0, 5000));
        sluice_acquire("fw", key, 1, NULL, NULL);
        sluice_acquire("log", key, 1 + i % 3, NULL, NULL);
        sluice_acquire("tb", key, 1, NULL, NULL);
        sluice_acquire("banded", key, 1, NULL, NULL);
        if (sluice_acquire("slots", NULL, 1, NULL, NULL) == SLUICE_ALLOWED && i % 2)
            sluice_release("slots", NULL, 1);
        if (i % 64 == 0)
            sluice_reset("fw", key, NULL);
    }
}

/* What a survivor's threads saw while others were being killed. */
typedef struct {
    gint stop;         /* atomic: set when the killing is over            */
    gint failed;       /* atomic: calls that answered SLUICE_FAILED       */
    gint64 calls;      /* atomic: calls made                              */
    gint64 longest_us; /* atomic: the longest call, µs of real time        */
} survival;

static survival *survived;

/* Decides on every limit of `mixed` until told to stop, timing each call; gives its
 * leases back. */
static gpointer survive(gpointer data)
{
    (void)data;
    for (guint i = 0; !g_atomic_int_get(&survived->stop); i++) {
        char key[32];
        g_snprintf(key, sizeof key, "k%u", g_random_int_range(0, 5000));
        static const char *const names[] = {"fw", "log", "tb", "banded", "slots"};
        const char *name = names[i % G_N_ELEMENTS(names)];
        gint64 t0 = g_get_monotonic_time();
        int rc = sluice_acquire(name, strcmp(name, "slots") ? key : NULL, 1, NULL, NULL);
        gint64 took = g_get_monotonic_time() - t0;
        if (rc == SLUICE_ALLOWED && strcmp(name, "slots") == 0)
            sluice_release("slots", NULL, 1);
        if (rc == SLUICE_FAILED)
            g_atomic_int_inc(&survived->failed);
        __atomic_add_fetch(&survived->calls, 1, __ATOMIC_RELAXED);
        gint64 longest = __atomic_load_n(&survived->longest_us, __ATOMIC_RELAXED);
        while (took > longest &&
               !__atomic_compare_exchange_n(&survived->longest_us, &longest, took, FALSE,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
    }
    return NULL;
}

/* The survivor's threads. ThreadSanitizer sees the locks of this process only: two
 * threads of one survivor that meet in chunks other processes took and gave back
 * between them look unordered to it, so under it the survivor has one thread (the
 * threads of a process sharing the zone are the 4 x 2 test's, where it sees every
 * lock the threads meet at). */
#if defined(__SANITIZE_THREAD__)
#define SURVIVOR_THREADS 1
#else
#define SURVIVOR_THREADS THREADS
#endif

/* A process of SURVIVOR_THREADS threads that decide (survive) until survived->stop. */
static pid_t survivor(const char *path)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        alarm(120);
        if (!sluice_init(path, NULL))
            _exit(1);
        GThread *threads[SURVIVOR_THREADS];
        for (int t = 0; t < SURVIVOR_THREADS; t++)
            threads[t] = g_thread_new("survivor", survive, NULL);
        for (int t = 0; t < SURVIVOR_THREADS; t++)
            g_thread_join(threads[t]);
        sluice_shutdown();
        _exit(0);
    }
    return pid;
}

START_TEST(processes_killed_at_any_moment_leave_no_limit_stuck)
{
    no_zone();
    /* room for every log of the 5000 keys (35000 chunks at most): the pool running
     * dry is leases_of_a_killed_holder_come_back_when_the_pool_ran_dry's */
    g_autofree char *path = zone_keyfile("16M", "", mixed);
    survived =
        mmap(NULL, sizeof *survived, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(survived != MAP_FAILED);
    memset(survived, 0, sizeof *survived);
    pid_t pids[PROCESSES];
    for (int p = 0; p < PROCESSES; p++)
        if ((pids[p] = fork()) == 0)
            decide_forever(path);
    pid_t alive = survivor(path);
    /* the deaths begin once the survivor decides (its start is slow on a busy machine) */
    gint64 started_by = g_get_monotonic_time() + 10 * G_USEC_PER_SEC * fixture_time_scale();
    while (__atomic_load_n(&survived->calls, __ATOMIC_RELAXED) == 0) {
        ck_assert_int_lt(g_get_monotonic_time(), started_by);
        g_usleep(1000);
    }
    /* 60 deaths (SIGKILL) at random moments, each replaced at once */
    for (int k = 0; k < 60; k++) {
        g_usleep(g_random_int_range(1000, 20000));
        int p = g_random_int_range(0, PROCESSES);
        ck_assert_int_eq(kill(pids[p], SIGKILL), 0);
        ck_assert_int_eq(waitpid(pids[p], NULL, 0), pids[p]);
        if ((pids[p] = fork()) == 0)
            decide_forever(path);
    }
    for (int p = 0; p < PROCESSES; p++) {
        kill(pids[p], SIGKILL);
        waitpid(pids[p], NULL, 0);
    }
    /* the survivor's threads never failed, and none waited long on a dead process */
    g_atomic_int_set(&survived->stop, 1);
    int status;
    ck_assert_int_eq(waitpid(alive, &status, 0), alive);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    g_print("survivor: %" G_GINT64_FORMAT " calls during 60 deaths, the longest %" G_GINT64_FORMAT
            " us\n",
            survived->calls, survived->longest_us);
    ck_assert_int_gt(survived->calls, 1000);
    ck_assert_int_eq(survived->failed, 0);
    ck_assert_int_lt(survived->longest_us, G_USEC_PER_SEC * fixture_time_scale());
    munmap(survived, sizeof *survived);
    /* a new process decides at once on every limit */
    alarm(20);
    init_ok(path);
    gint64 start = g_get_monotonic_time(); /* no fixture_stamp: its thread would stay */
    ck_assert_int_ne(sluice_acquire("fw", "new", 1, NULL, NULL), SLUICE_FAILED);
    ck_assert_int_ne(sluice_acquire("log", "new", 1, NULL, NULL), SLUICE_FAILED);
    ck_assert_int_ne(sluice_acquire("tb", "new", 1, NULL, NULL), SLUICE_FAILED);
    ck_assert_int_ne(sluice_acquire("banded", "new", 1, NULL, NULL), SLUICE_FAILED);
    /* the dead's leases are given back: all 4 slots pass */
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(sluice_acquire_wait("slots", NULL, 1, 3000, NULL, NULL), SLUICE_ALLOWED);
    ck_assert_int_lt(g_get_monotonic_time() - start, 3 * G_USEC_PER_SEC * fixture_time_scale());
    sluice_zone_info z;
    ck_assert(sluice_zone_get(&z, NULL));
    ck_assert_int_le(z.keys, z.capacity);
    ck_assert_int_le(z.chunks_free, z.chunks);
    g_print("60 deaths, %" G_GUINT64_FORMAT " locks repaired\n", z.repairs);
    sluice_shutdown();
    alarm(0);
    /* and exactness holds on a fresh key */
    ck_assert_int_eq(processes_hammer(path, "fresh", "new"), 20000);
}
END_TEST

static gboolean take_both_slots(void)
{
    return sluice_acquire("slots", "k", 2, NULL, NULL) == SLUICE_ALLOWED;
}

START_TEST(leases_of_a_killed_holder_are_given_back_at_once)
{
    no_zone();
    g_autofree char *path =
        zone_keyfile("1M", "", "[limit:slots]\nalgorithm = concurrency\nlimit = 2\nwindow = 1h\n");
    int hold[2];
    pid_t holder = attached_child(path, take_both_slots, hold);
    init_ok(path);
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("slots", "k", 1, &d, NULL), SLUICE_DENIED); /* held */
    ck_assert_int_eq(kill(holder, SIGKILL), 0);
    ck_assert_int_eq(waitpid(holder, NULL, 0), holder);
    g_usleep(20000); /* looked at no more than every 10 ms */
    ck_assert_int_eq(sluice_acquire("slots", "k", 2, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 0);
    sluice_shutdown();
    close(hold[0]);
    close(hold[1]);
}
END_TEST

/* A child that takes one lease of [limit:slots] key "k" for each byte it reads on
 * `go`, answering 'y' (taken) or 'n' on `done`, until it is killed. */
static pid_t lease_taker(const char *path, int go[2], int done[2])
{
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(done), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        alarm(60);
        if (!sluice_init(path, NULL))
            _exit(1);
        for (char c; read(go[0], &c, 1) == 1;) {
            c = sluice_acquire("slots", "k", 1, NULL, NULL) == SLUICE_ALLOWED ? 'y' : 'n';
            (void)!write(done[1], &c, 1);
        }
        _exit(0);
    }
    return pid;
}

/* The chunk pool runs dry while two processes take leases of one key in turn: the
 * log is made room for, or squeezed, without merging one process's leases into
 * another's, so that the dead one's come back at once. */
START_TEST(leases_of_a_killed_holder_come_back_when_the_pool_ran_dry)
{
    no_zone();
    g_autofree char *path =
        zone_keyfile("1M", "",
                     "[limit:slots]\nalgorithm = concurrency\nlimit = 1000\nwindow = 1h\n"
                     "[limit:log]\nalgorithm = sliding_log\nlimit = 3\nwindow = 1h\n");
    int go[2], done[2];
    pid_t holder = lease_taker(path, go, done); /* forked before this process attaches */
    init_ok(path);
    /* every chunk held by a live sliding_log state of its own key */
    sluice_zone_info z;
    ck_assert(sluice_zone_get(&z, NULL));
    for (int i = 0; z.chunks_free > 0; i++) {
        ck_assert_int_lt(i, 100000);
        g_autofree char *key = g_strdup_printf("log%d", i);
        ck_assert_int_eq(sluice_acquire("log", key, 1, NULL, NULL), SLUICE_ALLOWED);
        ck_assert(sluice_zone_get(&z, NULL));
    }
    /* 400 leases each, in turn: a log of 800 runs, each another process's than the
     * one before it */
    for (int i = 0; i < 400; i++) {
        ck_assert_int_eq(sluice_acquire("slots", "k", 1, NULL, NULL), SLUICE_ALLOWED);
        char c = 0;
        ck_assert_int_eq(write(go[1], "x", 1), 1);
        ck_assert_int_eq(read(done[0], &c, 1), 1);
        ck_assert_int_eq(c, 'y');
    }
    ck_assert(sluice_zone_get(&z, NULL));
    ck_assert_uint_lt(z.chunks_free, 800 / 3); /* still dry: the log was made room for */
    ck_assert_int_eq(kill(holder, SIGKILL), 0);
    ck_assert_int_eq(waitpid(holder, NULL, 0), holder);
    /* the holder's 400 come back within seconds (its window is an hour) */
    gint64 start = g_get_monotonic_time();
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire_wait("slots", "k", 600, 3000, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 0);
    ck_assert_int_lt(g_get_monotonic_time() - start, 3 * G_USEC_PER_SEC * fixture_time_scale());
    sluice_shutdown();
    for (int k = 0; k < 2; k++) {
        close(go[k]);
        close(done[k]);
    }
}
END_TEST

/* The zone's process table as src/shm/layout.h lays it out (sluice__zone_proc, after
 * the header's page), 1024 slots; a slot in use is in state 1. */
#define PROCS_OFFSET 4096
#define PROCS        1024
typedef struct {
    guint32 state, pid, gen, checked_ms;
    guint64 start, attached_us;
} zone_proc;
G_STATIC_ASSERT(sizeof(zone_proc) == 32);

/* The slot of the zone's process table that pid holds, as read from the file: its
 * offset, or 0 when none. */
static off_t proc_slot_of(pid_t pid)
{
    g_autofree char *file = zone_file();
    int fd = open(file, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    off_t found = 0;
    for (guint i = 0; i < PROCS && !found; i++) {
        zone_proc p;
        off_t at = PROCS_OFFSET + (off_t)i * (off_t)sizeof p;
        ck_assert_int_eq(pread(fd, &p, sizeof p, at), (ssize_t)sizeof p);
        if (p.state == 1 && p.pid == (guint32)pid)
            found = at;
    }
    close(fd);
    return found;
}

/* A holder's pid reused by a live process (this one, which started earlier) is not
 * taken for the holder: its start time differs, and the leases come back. */
START_TEST(a_reused_pid_is_not_taken_for_the_dead_holder)
{
    no_zone();
    g_autofree char *path =
        zone_keyfile("1M", "", "[limit:slots]\nalgorithm = concurrency\nlimit = 2\nwindow = 1h\n");
    g_usleep(50000); /* the holder starts some clock ticks after this process */
    int hold[2];
    pid_t holder = attached_child(path, take_both_slots, hold);
    off_t slot = proc_slot_of(holder);
    ck_assert_int_ne(slot, 0);
    ck_assert_int_eq(kill(holder, SIGKILL), 0);
    ck_assert_int_eq(waitpid(holder, NULL, 0), holder);
    /* the holder's pid is now this process's, which is alive */
    guint32 reused = (guint32)getpid();
    g_autofree char *file = zone_file();
    int fd = open(file, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, &reused, sizeof reused, slot + offsetof(zone_proc, pid)),
                     (ssize_t)sizeof reused);
    close(fd);
    init_ok(path);
    g_usleep(20000); /* looked at no more than every 10 ms */
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("slots", "k", 2, &d, NULL), SLUICE_ALLOWED);
    sluice_shutdown();
    close(hold[0]);
    close(hold[1]);
}
END_TEST

/* Blocks of many keys in a small zone (tens to a stripe, sharing the bits of its
 * block filter): each blocked key is denied as blocked, every other key decides as
 * if there were none, and a key whose block is lifted, or ends, is free again while
 * keys that share its bit stay blocked. */
START_TEST(blocks_of_many_keys_deny_those_keys_only)
{
    no_zone();
    fixture_clock_start(1000000);
    g_autofree char *path = zone_keyfile("1M", "", hourly);
    init_ok(path);
    enum { KEYS = 2000 };
    for (int i = 0; i < KEYS; i += 2) { /* the even keys: an hour, or (i % 4) a second */
        g_autofree char *key = g_strdup_printf("k%d", i);
        ck_assert(sluice_block("api", key, i % 4 ? 1000 : 3600000, NULL));
    }
    for (int round = 0; round < 3; round++) {
        if (round == 1) /* lifted: a quarter of the hour's, by a reset */
            for (int i = 0; i < KEYS; i += 8) {
                g_autofree char *key = g_strdup_printf("k%d", i);
                ck_assert(sluice_reset("api", key, NULL));
            }
        if (round == 2)
            fixture_clock_advance_ms(1000); /* the second's have ended */
        for (int i = 0; i < KEYS; i++) {
            g_autofree char *key = g_strdup_printf("k%d", i);
            gboolean blocked = i % 2 == 0 && !(round >= 1 && i % 8 == 0) && !(round == 2 && i % 4);
            sluice_decision d;
            int rc = sluice_acquire("api", key, 1, &d, NULL);
            ck_assert_msg(rc == (blocked ? SLUICE_DENIED : SLUICE_ALLOWED) && d.blocked == blocked,
                          "round %d, %s: %d blocked %d", round, key, rc, d.blocked);
        }
    }
    sluice_shutdown();
}
END_TEST

/* ---- bounded, never full ----------------------------------------------------------------- */

/* This process's own memory (not the zone's pages it maps), kB: RssAnon. */
static gint64 own_memory_kb(void)
{
    g_autofree char *status = NULL;
    ck_assert(g_file_get_contents("/proc/self/status", &status, NULL, NULL));
    const char *line = strstr(status, "RssAnon:");
    ck_assert_ptr_nonnull(line);
    return g_ascii_strtoll(line + strlen("RssAnon:"), NULL, 10);
}

/* How many of the keys PREFIX-from .. PREFIX-(to - 1) of limit name do not have
 * `left` permits remaining (a peek each). */
static int forgotten_of(const char *name, const char *prefix, int from, int to, gint64 left)
{
    int forgotten = 0;
    for (int i = from; i < to; i++) {
        char key[32];
        g_snprintf(key, sizeof key, "%s-%d", prefix, i);
        sluice_decision d;
        sluice_acquire(name, key, 0, &d, NULL);
        forgotten += d.remaining != left;
    }
    return forgotten;
}

START_TEST(millions_of_keys_pass_through_a_small_zone_which_remembers_the_recent_ones)
{
    no_zone();
    fixture_clock_start(1000000);
    g_autofree char *path = zone_keyfile("1M", "", hourly);
    g_autofree char *file = zone_file();
    init_ok(path);
    const int keys = 2000000, recent = 2000;
    int refused = 0; /* counted, asserted once: check's asserts are slow */
    gint64 own_kb = 0;
    for (int i = 0; i < keys; i++) {
        char key[32];
        if (i == 100000) /* the zone full, everything of this process's made */
            own_kb = own_memory_kb();
        g_snprintf(key, sizeof key, "user-%d", i);
        refused += sluice_acquire("api", key, 1, NULL, NULL) != SLUICE_ALLOWED;
        fixture_clock_advance_ms(i % 2); /* 1000 s in all: every state stays live */
    }
    ck_assert_int_eq(refused, 0);
    /* no per-process index of the keys: 1.9 million more keys (16 bytes each would be
     * 30 MiB), under 4 MiB more memory (what a sanitizer's allocator keeps aside) */
    g_print("own memory: %" G_GINT64_FORMAT " kB after 100000 keys, %" G_GINT64_FORMAT
            " kB after %d\n",
            own_kb, own_memory_kb(), keys);
    ck_assert_int_lt(own_memory_kb() - own_kb, 4096);
    ck_assert_int_eq(forgotten_of("api", "user", keys - recent, keys, 4), 0);
    sluice_zone_info z;
    ck_assert(sluice_zone_get(&z, NULL));
    ck_assert_int_eq(z.size, 1 << 20);
    ck_assert_int_le(z.keys, z.capacity);
    ck_assert_uint_ge(z.evictions, (guint64)(keys - z.capacity));
    zone_file_is(0600, 1 << 20);
    sluice_shutdown();
}
END_TEST

START_TEST(a_16_mib_zone_keeps_200000_live_keys_among_millions_back_at_full_capacity)
{
    no_zone();
    fixture_clock_start(1000000);
    g_autofree char *path =
        zone_keyfile("16M", "",
                     "[limit:live]\nalgorithm = fixed_window\nlimit = 2\nwindow = 1h\n"
                     "[limit:brief]\nalgorithm = gcra\nlimit = 1\nwindow = 1ms\n");
    init_ok(path);
    const int live = 200000, per_live = 10;
    int refused = 0;
    for (int i = 0; i < live; i++) {
        char key[32];
        g_snprintf(key, sizeof key, "live-%d", i);
        refused += sluice_acquire("live", key, 1, NULL, NULL) != SLUICE_ALLOWED;
        for (int j = 0; j < per_live; j++) { /* full again 1 ms later */
            g_snprintf(key, sizeof key, "brief-%d-%d", i, j);
            refused += sluice_acquire("brief", key, 1, NULL, NULL) != SLUICE_ALLOWED;
        }
        fixture_clock_advance_ms(1);
    }
    ck_assert_int_eq(refused, 0);
    ck_assert_int_eq(forgotten_of("live", "live", 0, live, 1), 0);
    sluice_zone_info z;
    ck_assert(sluice_zone_get(&z, NULL));
    ck_assert_uint_eq(z.evictions, 0);
    ck_assert_int_le(z.size / z.capacity, 64);
    sluice_shutdown();
}
END_TEST

/* ---- the example ------------------------------------------------------------------ */

#ifdef SLUICE_PREFORK_SERVER
/* One request to the example server on port: its answer line. */
static char *ask_server(int port, const char *line)
{
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_socket_client_set_enable_proxy(client, FALSE); /* loopback: no proxy lookup thread */
    g_autoptr(GSocketConnection) c =
        g_socket_client_connect_to_host(client, "127.0.0.1", (guint16)port, NULL, NULL);
    ck_assert_ptr_nonnull(c);
    GOutputStream *out = g_io_stream_get_output_stream(G_IO_STREAM(c));
    ck_assert(g_output_stream_write_all(out, line, strlen(line), NULL, NULL, NULL));
    g_autoptr(GDataInputStream) in =
        g_data_input_stream_new(g_io_stream_get_input_stream(G_IO_STREAM(c)));
    char *answer = g_data_input_stream_read_line(in, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(answer);
    return answer;
}

/* TRUE when process pid (not this one's child) has exited: no /proc entry, or a
 * zombie its parent has not reaped yet. */
static gboolean gone(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
    g_autofree char *stat = NULL;
    if (!g_file_get_contents(path, &stat, NULL, NULL))
        return TRUE;
    const char *state = strrchr(stat, ')');
    return state && (state[2] == 'Z' || state[2] == 'X');
}

START_TEST(the_prefork_example_shares_each_limit_among_its_workers)
{
    no_zone();
    g_autofree char *path = zone_keyfile("1M", "",
                                         "[limit:api]\nalgorithm = gcra\nlimit = 5\nwindow = 1h\n"
                                         "[limit:jobs]\nalgorithm = concurrency\nlimit = 2\n"
                                         "window = 1m\nper_key = false\n");
    const char *argv[] = {
        SLUICE_PREFORK_SERVER, "--port", "0", "--workers", "3", "--config", path, NULL};
    g_autoptr(GError) error = NULL;
    g_autoptr(GSubprocess) server = g_subprocess_newv(argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE, &error);
    ck_assert_msg(server, "%s", error ? error->message : "");
    g_autoptr(GDataInputStream) out = g_data_input_stream_new(g_subprocess_get_stdout_pipe(server));
    g_autofree char *first = g_data_input_stream_read_line(out, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(first); /* listening on 127.0.0.1:PORT, 3 workers, zone ... */
    int port = atoi(strchr(first, ':') + 1);
    ck_assert_int_gt(port, 0);
    /* 5 at once for a user, whichever worker answers, then busy */
    GHashTable *workers = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    int ok = 0, busy = 0;
    for (int i = 0; i < 12; i++) {
        g_autofree char *answer = ask_server(port, "alice 0\n");
        ok += g_str_has_prefix(answer, "ok ");
        busy += g_str_has_prefix(answer, "busy ");
        char *worker = strstr(answer, "worker=");
        ck_assert_ptr_nonnull(worker);
        g_hash_table_add(workers, g_strndup(worker, strcspn(worker, " ")));
    }
    ck_assert_int_eq(ok, 5);
    ck_assert_int_eq(busy, 7);
    ck_assert_uint_ge(g_hash_table_size(workers), 2); /* answered by more than one */
    /* the state is the zone's: this process sees it */
    init_ok(path);
    ck_assert_int_eq(remaining("api", "alice"), 0);
    sluice_shutdown();
    /* a worker killed is replaced, and the limits still hold */
    GHashTableIter it;
    gpointer worker;
    g_hash_table_iter_init(&it, workers);
    ck_assert(g_hash_table_iter_next(&it, &worker, NULL));
    pid_t killed = atoi((char *)worker + strlen("worker="));
    ck_assert_int_eq(kill(killed, SIGKILL), 0);
    /* dead before the next request: one it accepted while dying would go unanswered */
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC * fixture_time_scale();
    while (!gone(killed)) {
        ck_assert_int_lt(g_get_monotonic_time(), deadline);
        g_usleep(1000);
    }
    ok = 0;
    for (int i = 0; i < 8; i++) {
        g_autofree char *answer = ask_server(port, "bob 0\n");
        ok += g_str_has_prefix(answer, "ok ");
    }
    ck_assert_int_eq(ok, 5);
    g_hash_table_unref(workers);
    g_subprocess_send_signal(server, SIGTERM);
    ck_assert(g_subprocess_wait(server, NULL, NULL));
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("shm");
    TCase *file = tcase_create("file");
    tcase_add_test(file, the_zone_is_a_file_of_dev_shm_named_after_shm_that_outlives_its_processes);
    tcase_add_test(file, shm_mode_0660_shares_the_zone_with_its_group);
    if (geteuid() == 0) /* chown needs root */
        tcase_add_test(file, a_zone_of_another_user_is_refused);
    tcase_add_test(file, a_zone_of_another_layout_version_is_refused);
    tcase_add_test(file, a_truncated_zone_is_refused);
    tcase_add_test(file, an_existing_zone_keeps_its_size);
    tcase_add_test(file, processes_that_start_at_once_make_one_zone);
    suite_add_tcase(s, file);
    TCase *shared = tcase_create("shared");
    tcase_set_timeout(shared, 120);
    tcase_add_test(shared, processes_with_different_rules_for_one_zone_are_told_both_values);
    tcase_add_test(shared, reload_keeps_each_limits_state_in_the_zone);
    tcase_add_loop_test(shared, four_processes_of_two_threads_admit_exactly_the_limit_of_one_key, 0,
                        G_N_ELEMENTS(exact_rules));
    tcase_add_test(shared, processes_killed_at_any_moment_leave_no_limit_stuck);
    tcase_add_test(shared, leases_of_a_killed_holder_are_given_back_at_once);
    tcase_add_test(shared, leases_of_a_killed_holder_come_back_when_the_pool_ran_dry);
    tcase_add_test(shared, blocks_of_many_keys_deny_those_keys_only);
    tcase_add_test(shared, a_reused_pid_is_not_taken_for_the_dead_holder);
    suite_add_tcase(s, shared);
    TCase *bounded = tcase_create("bounded");
    tcase_set_timeout(bounded, 300);
    tcase_add_test(bounded,
                   millions_of_keys_pass_through_a_small_zone_which_remembers_the_recent_ones);
    tcase_add_test(bounded,
                   a_16_mib_zone_keeps_200000_live_keys_among_millions_back_at_full_capacity);
    suite_add_tcase(s, bounded);
#ifdef SLUICE_PREFORK_SERVER
    TCase *example = tcase_create("example");
    tcase_set_timeout(example, 30); /* a server, its workers and 20 connections */
    tcase_add_test(example, the_prefork_example_shares_each_limit_among_its_workers);
    suite_add_tcase(s, example);
#endif
    return fixture_run(s);
}
