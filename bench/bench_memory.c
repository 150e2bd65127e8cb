/* bench_memory: how fast the memory backend decides, on one and two threads, and
 * what a decorated call whose name has no rule costs next to a plain call.
 *
 * Prints one table (figure, value, target, PASS/MISS). Every figure is the median
 * of ROUNDS rounds, each of which calls the operation for at least ROUND_NS on a
 * monotonic clock. It exits 0 whatever the figures are (a benchmark, not a test)
 * and 1 when sluice cannot be set up. Run it with scripts/bench. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <sluice/sluice.h>

#ifndef SLUICE_BENCH_BUILD_TYPE
#define SLUICE_BENCH_BUILD_TYPE "unknown"
#endif

#define ROUNDS      5
#define ROUND_NS    (300 * G_GINT64_CONSTANT(1000000)) /* each round runs at least 0.3 s */
#define BATCH       1024                               /* calls between two clock reads */
#define KEYS        1000                               /* rotating keys of the per-key case */
#define THREADS_MAX 2

#define TARGET_ALLOWED_NS 100.0 /* an allowed decision on one thread */
#define TARGET_NO_RULE_NS 5.0   /* what a name with no rule adds to a call */

/* The keyfile the benchmark runs on, written to a temporary file. The limits are
 * so large (2^50 per second) that every decision is an admission. */
static const char keyfile[] = "# written by bench_memory: limits that never say no\n"
                              "[sluice]\n"
                              "backend = memory\n"
                              "\n"
                              "[limit:bench.allowed]\n"
                              "algorithm = fixed_window\n"
                              "limit = 1125899906842624\n"
                              "window = 1s\n"
                              "per_key = false\n"
                              "\n"
                              "[limit:bench.keyed]\n"
                              "algorithm = fixed_window\n"
                              "limit = 1125899906842624\n"
                              "window = 1s\n"
                              "per_key = true\n";

/* Keeps results alive so that the compiler cannot drop or hoist a call. */
static volatile gint64 sink;

static char *keys[KEYS];

/* ---- the decorated functions and their plain twin ----------------------------- */

/* Not inlined, not cloned, not analysed by the caller: every call is a real call. */
#if defined(__clang__)
#define BENCH_OPAQUE __attribute__((noinline))
#else
#define BENCH_OPAQUE __attribute__((noipa))
#endif

/* degrade callbacks: 0 says "not admitted" to the loop that counts */
static int denied_int(int x)
{
    (void)x;
    return 0;
}

/* An allowed decision through the definition form. */
BENCH_OPAQUE int bench_allowed_fn(int x);
RATE_LIMITED_FUNCTION(int, bench_allowed_fn, (int x), (x), "bench.allowed", denied_int, NULL)
{
    (void)x;
    return 1;
}

/* An allowed decision through the guard form, with one of KEYS keys. */
BENCH_OPAQUE static int bench_keyed_guard(const char *key)
{
    RATE_LIMITED_KEY("bench.keyed", key, return 0);
    return 1;
}

/* The plain function: the body the decorated ones below share, undecorated. */
BENCH_OPAQUE static int bench_plain(int x)
{
    sink += x;
    return 1;
}

/* The same body, decorated (definition form) with a name the keyfile does not have. */
BENCH_OPAQUE int bench_norule_fn(int x);
RATE_LIMITED_FUNCTION(int, bench_norule_fn, (int x), (x), "bench.norule", denied_int, NULL)
{
    sink += x;
    return 1;
}

/* The same body, decorated (guard form) with a name the keyfile does not have. */
BENCH_OPAQUE static int bench_norule_guard(int x)
{
    RATE_LIMITED("bench.norule.guard", return 0);
    sink += x;
    return 1;
}

/* ---- operations: each makes n calls and returns how many were admitted --------- */

typedef guint64 (*bench_op)(guint64 first, guint n);

static guint64 op_acquire(guint64 first, guint n)
{
    guint64 admitted = 0;
    sluice_decision d;
    (void)first;
    for (guint i = 0; i < n; i++)
        admitted += sluice_acquire("bench.allowed", NULL, 1, &d, NULL) == SLUICE_ALLOWED;
    return admitted;
}

static guint64 op_allowed_fn(guint64 first, guint n)
{
    guint64 admitted = 0;
    for (guint i = 0; i < n; i++)
        admitted += (guint64)bench_allowed_fn((int)i);
    (void)first;
    return admitted;
}

static guint64 op_keyed_guard(guint64 first, guint n)
{
    guint64 admitted = 0;
    guint k = (guint)(first % KEYS);
    for (guint i = 0; i < n; i++) {
        admitted += (guint64)bench_keyed_guard(keys[k]);
        if (++k == KEYS)
            k = 0;
    }
    return admitted;
}

static guint64 op_plain(guint64 first, guint n)
{
    guint64 admitted = 0;
    (void)first;
    for (guint i = 0; i < n; i++)
        admitted += (guint64)bench_plain((int)i);
    return admitted;
}

static guint64 op_norule_fn(guint64 first, guint n)
{
    guint64 admitted = 0;
    (void)first;
    for (guint i = 0; i < n; i++)
        admitted += (guint64)bench_norule_fn((int)i);
    return admitted;
}

static guint64 op_norule_guard(guint64 first, guint n)
{
    guint64 admitted = 0;
    (void)first;
    for (guint i = 0; i < n; i++)
        admitted += (guint64)bench_norule_guard((int)i);
    return admitted;
}

/* ---- timing ------------------------------------------------------------------- */

static gint64 now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct {
    bench_op op;
    guint64 first; /* where this thread starts in the key rotation */
    gint *ready;   /* atomic: threads that are waiting for the start */
    gint *start;   /* atomic: set when every thread is ready         */
    guint64 calls;
    guint64 admitted;
    gint64 elapsed_ns;
} worker;

/* Calls the operation in batches until ROUND_NS has passed. */
static gpointer work(gpointer p)
{
    worker *w = p;
    g_atomic_int_inc(w->ready);
    while (!g_atomic_int_get(w->start))
        ; /* spin: both threads start within a few hundred ns */
    gint64 t0 = now_ns(), t;
    guint64 calls = 0, admitted = 0;
    do {
        admitted += w->op(w->first + calls, BATCH);
        calls += BATCH;
        t = now_ns();
    } while (t - t0 < ROUND_NS);
    w->calls = calls;
    w->admitted = admitted;
    w->elapsed_ns = t - t0;
    return NULL;
}

/* One round's figures. */
typedef struct {
    double ns_per_call;   /* per thread: what one call costs its caller */
    double calls_per_sec; /* all threads together                        */
    guint64 not_admitted; /* must stay 0: the limits never say no        */
} sample;

/* One round of op on `threads` threads. */
static sample run_round(bench_op op, guint threads)
{
    worker w[THREADS_MAX];
    GThread *t[THREADS_MAX];
    gint ready = 0, start = 0;
    sample s = {0, 0, 0};

    g_assert(threads >= 1 && threads <= THREADS_MAX);
    for (guint i = 0; i < threads; i++) {
        w[i] = (worker){op, (guint64)i * (KEYS / THREADS_MAX), &ready, &start, 0, 0, 0};
        t[i] = g_thread_new("bench", work, &w[i]);
    }
    while (g_atomic_int_get(&ready) < (gint)threads)
        g_thread_yield();
    g_atomic_int_set(&start, 1);
    for (guint i = 0; i < threads; i++) {
        g_thread_join(t[i]);
        s.ns_per_call += (double)w[i].elapsed_ns / (double)w[i].calls / threads;
        s.calls_per_sec += (double)w[i].calls * 1e9 / (double)w[i].elapsed_ns;
        s.not_admitted += w[i].calls - w[i].admitted;
    }
    return s;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *values, guint n)
{
    double sorted[ROUNDS];
    memcpy(sorted, values, n * sizeof *values);
    qsort(sorted, n, sizeof *sorted, compare_double);
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

static double best(const double *values, guint n)
{
    double b = values[0];
    for (guint i = 1; i < n; i++)
        b = MIN(b, values[i]);
    return b;
}

/* ---- the table ---------------------------------------------------------------- */

static guint misses;

static void print_header(void)
{
    printf("%-46s %7s %12s %10s %14s %10s %6s\n", "figure", "threads", "ns/call", "(best)",
           "calls/s", "target", "result");
    printf("%-46s %7s %12s %10s %14s %10s %6s\n", "------", "-------", "-------", "------",
           "-------", "------", "------");
}

/* target < 0: no target, the figure is for information. */
static void print_row(const char *figure, guint threads, double ns, double best_ns, double per_sec,
                      double target)
{
    char target_text[32] = "-", per_sec_text[32] = "-";
    const char *result = "";
    if (target >= 0) {
        g_snprintf(target_text, sizeof target_text, "< %.0f ns", target);
        result = ns < target ? "PASS" : "MISS";
        misses += ns >= target;
    }
    if (per_sec > 0)
        g_snprintf(per_sec_text, sizeof per_sec_text, "%.2f M", per_sec / 1e6);
    printf("%-46s %7u %12.2f %10.2f %14s %10s %6s\n", figure, threads, ns, best_ns, per_sec_text,
           target_text, result);
    fflush(stdout);
}

/* Measures op on `threads` threads and prints its row. */
static void measure(const char *figure, bench_op op, guint threads, double target)
{
    double ns[ROUNDS], per_sec[ROUNDS];
    guint64 not_admitted = 0;

    run_round(op, threads); /* warm-up: binds guards, creates the keys' states */
    for (guint r = 0; r < ROUNDS; r++) {
        sample s = run_round(op, threads);
        ns[r] = s.ns_per_call;
        per_sec[r] = s.calls_per_sec;
        not_admitted += s.not_admitted;
    }
    print_row(figure, threads, median(ns, ROUNDS), best(ns, ROUNDS), median(per_sec, ROUNDS),
              target);
    if (not_admitted)
        printf("  warning: %" G_GUINT64_FORMAT " calls were not admitted; the figure is not "
               "that of an allowed decision\n",
               not_admitted);
}

/* The plain call and the two no-rule forms, interleaved round by round so that
 * drift in the machine's speed affects all three alike; the overheads are the
 * medians of the per-round differences. */
static void measure_no_rule(void)
{
    double plain[ROUNDS], fn[ROUNDS], guard[ROUNDS], fn_diff[ROUNDS], guard_diff[ROUNDS];

    run_round(op_plain, 1);
    run_round(op_norule_fn, 1);
    run_round(op_norule_guard, 1);
    for (guint r = 0; r < ROUNDS; r++) {
        plain[r] = run_round(op_plain, 1).ns_per_call;
        fn[r] = run_round(op_norule_fn, 1).ns_per_call;
        guard[r] = run_round(op_norule_guard, 1).ns_per_call;
        fn_diff[r] = fn[r] - plain[r];
        guard_diff[r] = guard[r] - plain[r];
    }
    print_row("plain call, undecorated (baseline)", 1, median(plain, ROUNDS), best(plain, ROUNDS),
              1e9 / median(plain, ROUNDS), -1);
    print_row("no rule: RATE_LIMITED_FUNCTION call", 1, median(fn, ROUNDS), best(fn, ROUNDS),
              1e9 / median(fn, ROUNDS), -1);
    print_row("no rule: RATE_LIMITED guard call", 1, median(guard, ROUNDS), best(guard, ROUNDS),
              1e9 / median(guard, ROUNDS), -1);
    print_row("no rule: added by RATE_LIMITED_FUNCTION", 1, median(fn_diff, ROUNDS),
              best(fn_diff, ROUNDS), 0, TARGET_NO_RULE_NS);
    print_row("no rule: added by RATE_LIMITED guard", 1, median(guard_diff, ROUNDS),
              best(guard_diff, ROUNDS), 0, TARGET_NO_RULE_NS);
}

/* ---- main --------------------------------------------------------------------- */

static char *write_keyfile(GError **error)
{
    char *path = NULL;
    int fd = g_file_open_tmp("sluice-bench-XXXXXX.ini", &path, error);
    if (fd < 0)
        return NULL;
    close(fd);
    if (!g_file_set_contents(path, keyfile, -1, error)) {
        g_unlink(path);
        g_free(path);
        return NULL;
    }
    return path;
}

int main(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = write_keyfile(&error);
    if (!path) {
        fprintf(stderr, "bench_memory: cannot write the keyfile: %s\n", error->message);
        return 1;
    }
    gboolean ok = sluice_init(path, &error);
    g_unlink(path);
    if (!ok) {
        fprintf(stderr, "bench_memory: sluice_init failed: %s\n", error->message);
        return 1;
    }
    for (guint i = 0; i < KEYS; i++)
        keys[i] = g_strdup_printf("user-%04u", i);

    printf("sluice %d.%d.%d, memory backend, build type %s, %ld CPUs online\n",
           SLUICE_VERSION_MAJOR, SLUICE_VERSION_MINOR, SLUICE_VERSION_MICRO,
           SLUICE_BENCH_BUILD_TYPE, sysconf(_SC_NPROCESSORS_ONLN));
    printf("each figure: median of %d rounds of >= %.1f s (best round in brackets); "
           "rule: fixed_window, limit 2^50 per 1s\n\n",
           ROUNDS, ROUND_NS / 1e9);
    print_header();

    static const struct {
        const char *figure;
        bench_op op;
    } allowed[] = {
        {"allowed: sluice_acquire(name, NULL, 1)", op_acquire},
        {"allowed: RATE_LIMITED_FUNCTION call", op_allowed_fn},
        {"allowed: RATE_LIMITED_KEY guard, 1000 keys", op_keyed_guard},
    };
    for (guint threads = 1; threads <= THREADS_MAX; threads++)
        for (guint i = 0; i < G_N_ELEMENTS(allowed); i++)
            measure(allowed[i].figure, allowed[i].op, threads,
                    threads == 1 ? TARGET_ALLOWED_NS : -1);
    measure_no_rule();

    printf("\n%u of %u targets missed\n", misses, (guint)G_N_ELEMENTS(allowed) + 2);
    printf("sink %" G_GINT64_FORMAT "\n", (gint64)sink);

    sluice_shutdown();
    for (guint i = 0; i < KEYS; i++)
        g_free(keys[i]);
    return 0;
}
