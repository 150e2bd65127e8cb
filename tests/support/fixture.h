/* SPDX-License-Identifier: MIT */
/* What the check suites share: keyfiles in temporary files and an injected clock. */
#ifndef SLUICE_TEST_FIXTURE_H
#define SLUICE_TEST_FIXTURE_H

#include <check.h>
#include <glib.h>
#include <sluice/sluice.h>

/* Writes contents to a new temporary .ini file; returns its path (g_free it). */
char *fixture_write_keyfile(const char *contents);

/* contents as fixture_init writes them: on Redis, with the suite's server as the
 * backend. g_free it. */
char *fixture_contents(const char *contents);

/* sluice_init on a keyfile with these contents; fails the test on error. When the
 * suite runs against Redis (SLUICE_TEST_BACKEND=redis or sentinel), the keyfile is
 * pointed at the suite's redis-server (timeout = 2s unless its own [sluice] says otherwise)
 * and that server is flushed first. */
void fixture_init(const char *contents);

/* Empties the suite's redis-server, or every master of its Cluster, or removes the
 * test's zone (nothing on memory). */
void fixture_flush(void);

/* SIGSTOP / SIGCONT the suite's redis-server, or every master of its Cluster: Redis
 * that hangs, and comes back. */
void fixture_pause(void);
void fixture_resume(void);

/* TRUE when SLUICE_TEST_BACKEND=shm: keyfiles name a zone of this test's own
 * (fixture_zone_name), made afresh by each fixture_init and removed when the test
 * ends. */
gboolean fixture_on_shm(void);
/* The zone of the running test: "test-PID" (/dev/shm/sluice-test-PID). */
const char *fixture_zone_name(void);

/* TRUE when SLUICE_TEST_BACKEND=redis: fixture_run starts a redis-server (or
 * =cluster, =sentinel, =tls, below). */
gboolean fixture_on_redis(void);
/* TRUE when SLUICE_TEST_BACKEND=tls, cluster_tls or sentinel_tls: the servers
 * (and Sentinels) speak TLS too (tests/support/tls_certs.h), and the keyfile of
 * fixture_contents reaches them with rediss:// (rediss+cluster://,
 * rediss+sentinel://) and tls_ca_file. */
gboolean fixture_on_tls(void);
/* The suite's redis-server (NULL on memory and on a Cluster; with Sentinel, the
 * master). */
#include "redis_server.h"
test_redis *fixture_redis(void);
/* How many keys the suite's Redis holds: DBSIZE of its server, or the sum over the
 * masters of its Cluster. Fails the test when one does not answer. */
gint64 fixture_keys(void);
/* Runs one command (printf-style) on the server that holds key: the suite's server,
 * or on a Cluster the master of the key's slot. The reply (freeReplyObject it); fails
 * the test when none answers. */
redisReply *fixture_command(const char *key, const char *format, ...) G_GNUC_PRINTF(2, 3);
/* TRUE when SLUICE_TEST_BACKEND=cluster: fixture_run starts a Redis Cluster of 3
 * masters, keyfiles point at it (fixture_on_redis is TRUE too), and after the suite
 * it checks that decisions on a few dozen keys leave keys on every master. */
#include "redis_cluster.h"
gboolean fixture_on_cluster(void);
/* The suite's Cluster (NULL unless on a Cluster). */
test_cluster *fixture_cluster(void);
/* TRUE when SLUICE_TEST_BACKEND=sentinel: fixture_run starts a master, its replica
 * and three Sentinels (tests/support/redis_sentinel.h), keyfiles name the master through
 * them (redis+sentinel://), and fixture_on_redis is TRUE too. */
#include "redis_sentinel.h"
gboolean fixture_on_sentinel(void);
/* The suite's Sentinels and their servers (NULL unless on Sentinel). */
test_sentinel *fixture_sentinel(void);

/* Installs a fake clock reading start_us. Waiting callers advance it instead of
 * sleeping. */
void fixture_clock_start(gint64 start_us);
void fixture_clock_set(gint64 now_us);
void fixture_clock_advance_ms(gint64 ms);
gint64 fixture_clock_now(void);
/* How many times a waiting caller slept on the fake clock, and until when last. */
guint fixture_clock_sleeps(void);

/* How many times slower than normal the suite runs: $SLUICE_TEST_TIME_SCALE (a
 * whole number, 1 when unset; `scripts/test --valgrind` sets it). Bounds on real
 * time that a slow-down stretches are multiplied by it. */
gint64 fixture_time_scale(void);

/* The monotonic time (µs) and how long this thread has waited for a CPU while it
 * was runnable (µs, the run-queue delay of /proc/thread-self/schedstat; 0 where
 * the kernel does not say) plus the machine's steal time (a virtual machine's
 * CPUs held by the hypervisor, /proc/stat, in 10 ms steps, over all CPUs), read
 * together: no wait falls between the two. A time bound measured on a loaded
 * machine subtracts the wait: the library did not wait then, the scheduler did. */
void fixture_thread_clock(gint64 *now_us, gint64 *cpu_wait_us);

/* A moment on this thread's clock (fixture_thread_clock), and the time from one to
 * another less what the scheduler held the thread meanwhile: the bound a call's
 * time is held to on a loaded machine. */
typedef struct {
    gint64 now_us, cpu_wait_us;
} fixture_stamp;
fixture_stamp fixture_stamp_now(void);
gint64 fixture_stamp_took_us(fixture_stamp from, fixture_stamp to);

/* Starts 4 threads that decide on the limit `deciding` (one permit at a time)
 * and, while they do, forks `children` children one after another, pause_us
 * apart; then stops and joins the threads. Each child runs check() (which must start no thread:
 * TSan forbids it after a multi-threaded fork) and reports through shared memory, not its exit
 * status (under valgrind a child exits 1 for the memory only the parent's threads reached). A child
 * stuck for 10 s (× fixture_time_scale()) dies of SIGALRM. Fails the test at the first child whose
 * check failed or that did not finish. Under ThreadSanitizer the children exit without check(): its
 * runtime can hang a child of a multi-threaded fork (fixture.c). Returns how many children ran
 * check(): `children`, or 0 under ThreadSanitizer. */
int fixture_fork_children(const char *deciding, int children, gint64 pause_us,
                          gboolean (*check)(void));

/* On the real clock: holds the one permit of [limit:slots] (concurrency, limit 1),
 * calls wake() on a thread 100 ms later, and asserts that sluice_acquire_wait for
 * a permit (timeout 5 s) passes after 90 ms to 2 s: wake() woke it. */
void fixture_waiter_woken_by(void (*wake)(void));

/* Runs a suite and returns the process exit status (0: every test passed). */
int fixture_run(Suite *suite);

/* sluice_init of a keyfile with these contents fails, and its message ends with
 * `message` (the file's path comes before it). */
void fixture_refused(const char *contents, const char *message);

/* Asserts every field of a decision. */
#define ck_assert_decision(d, a, l, rem, retry, reset)                                             \
    do {                                                                                           \
        ck_assert_int_eq((d).allowed, (a));                                                        \
        ck_assert_int_eq((d).limit, (l));                                                          \
        ck_assert_int_eq((d).remaining, (rem));                                                    \
        ck_assert_int_eq((d).retry_after_ms, (retry));                                             \
        ck_assert_int_eq((d).reset_after_ms, (reset));                                             \
    } while (0)

/* Runs `call`, which decides into d_ and sets e_ on error, and asserts its return code
 * (SLUICE_ALLOWED when allowed, else SLUICE_DENIED), that no error was set, and every field
 * of the decision. */
#define ck_decided(call, allowed, limit, remaining, retry, reset)                                  \
    do {                                                                                           \
        sluice_decision d_ = {0};                                                                  \
        GError *e_ = NULL;                                                                         \
        int rc_ = (call);                                                                          \
        ck_assert_msg(e_ == NULL, "%s: %s", #call, e_ ? e_->message : "");                         \
        ck_assert_int_eq(rc_, ((allowed) ? SLUICE_ALLOWED : SLUICE_DENIED));                       \
        ck_assert_decision(d_, (allowed), (limit), (remaining), (retry), (reset));                 \
    } while (0)

/* One sluice_acquire, asserted as ck_decided does. */
#define ck_acquire(name, key, permits, ...)                                                        \
    ck_decided(sluice_acquire((name), (key), (permits), &d_, &e_), __VA_ARGS__)

/* The same for sluice_acquire_wait with timeout_ms. */
#define ck_acquire_wait(name, key, permits, timeout_ms, ...)                                       \
    ck_decided(sluice_acquire_wait((name), (key), (permits), (timeout_ms), &d_, &e_), __VA_ARGS__)

/* ck_acquire at now_us on the fake clock. */
#define ck_acquire_at(now_us, name, key, permits, allowed, limit, remaining, retry, reset)         \
    do {                                                                                           \
        fixture_clock_set(now_us);                                                                 \
        ck_acquire(name, key, permits, allowed, limit, remaining, retry, reset);                   \
    } while (0)

#endif
