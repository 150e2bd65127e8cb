/* SPDX-License-Identifier: MIT */
/* bench_memory: how fast the memory backend decides, on one and two threads, how a
 * hot limit (two threads on one shared state) scales next to the ideal exact shared
 * limit, and what a decorated call whose name has no rule costs next to a plain call.
 *
 * Prints one table (figure, value, target, PASS/MISS). Every figure is the best of
 * ROUNDS rounds, shown with the median round; a round calls the operation in batches of BATCH calls
 * for at least ROUND_NS on the monotonic clock, and its ns/call is that of its median batch. It
 * exits 0 whatever the figures are (a benchmark, not a test) and 1 when sluice cannot be set up.
 * Run it with scripts/bench; bench/README.md explains the figures. */
#include <stdio.h>
#include <string.h>

#include <glib.h>
#include <sluice/sluice.h>

#include "memory_ops.h"
#include "setup.h"
#include "timing.h"

#define ROUNDS      7
#define ROUND_NS    (300 * G_GINT64_CONSTANT(1000000)) /* each round runs at least 0.3 s */
#define BATCH       1024                               /* calls between two clock reads */
#define THREADS_MAX 2

#define TARGET_ALLOWED_NS  50.0  /* an allowed decision on one thread */
#define TARGET_KEYED_NS    100.0 /* the same with one of MEMORY_OPS_KEYS keys */
#define TARGET_HOT_RATIO   0.8   /* 2 threads on one limit / the ideal exact shared limit */
#define TARGET_PREFETCH    1.5   /* prefetch: 2 threads / 1 thread */
#define TARGET_KEYED_RATIO 1.6   /* per key, keys of its own: 2 threads / 1 thread */
#define TARGET_NO_RULE_NS  5.0   /* what a name with no rule adds to a call */

/* ---- one round: the operation on one or more threads, timed ------------------ */

typedef struct {
    bench_op op;
    guint64 first;       /* where this thread starts in the key rotation */
    guint share, shares; /* its keys: the share-th of `shares` runs of them */
    gint *ready;         /* atomic: threads that are waiting for the start */
    gint *start;         /* atomic: set when every thread is ready         */
    bench_batches out;
} worker;

/* The operation's calls from where the thread is in the key rotation. */
static guint64 op_batch(gpointer p, guint64 done, guint batch)
{
    worker *w = p;
    return w->op(w->first + done, batch);
}

/* Calls the operation in timed batches until ROUND_NS has passed. */
static gpointer work(gpointer p)
{
    worker *w = p;
    memory_ops_keys_share(w->share, w->shares);
    g_atomic_int_inc(w->ready);
    while (!g_atomic_int_get(w->start))
        ; /* spin: the threads start within a few hundred ns of each other */
    bench_batches_run(op_batch, w, BATCH, ROUND_NS, &w->out);
    return NULL;
}

/* One round's figures. */
typedef struct {
    double ns_per_call;   /* per thread: a call in the median batch      */
    double calls_per_sec; /* all threads together                        */
    double on_cpu;        /* share of the round the threads were on a CPU */
    guint64 not_admitted; /* must stay 0: the limits never say no        */
} sample;

/* One round of op on `threads` threads; own_keys: each thread on keys of its own (a
 * per-key operation), else every thread on all the keys, starting apart. */
static sample run_round(bench_op op, guint threads, gboolean own_keys)
{
    worker w[THREADS_MAX];
    GThread *t[THREADS_MAX];
    gint ready = 0, start = 0;
    sample s = {0, 0, 0, 0};

    g_assert(threads >= 1 && threads <= THREADS_MAX);
    for (guint i = 0; i < threads; i++) {
        w[i] = (worker){op,
                        own_keys ? 0 : (guint64)i * (MEMORY_OPS_KEYS / THREADS_MAX),
                        own_keys ? i : 0,
                        own_keys ? threads : 1,
                        &ready,
                        &start,
                        {0}};
        t[i] = g_thread_new("bench", work, &w[i]);
    }
    while (g_atomic_int_get(&ready) < (gint)threads)
        g_thread_yield();
    g_atomic_int_set(&start, 1);
    for (guint i = 0; i < threads; i++) {
        g_thread_join(t[i]);
        const bench_batches *b = &w[i].out;
        s.ns_per_call += b->typical_ns / threads;
        s.calls_per_sec += (double)b->calls * 1e9 / (double)b->elapsed_ns;
        s.on_cpu += (double)b->cpu_ns / (double)b->elapsed_ns / threads;
        s.not_admitted += b->calls - b->admitted;
    }
    return s;
}

/* ---- the table ----------------------------------------------------------------- */

#define ON_CPU_MIN 0.9 /* below this share a row is marked: its threads waited */

static guint targets, misses, marked;
static const char *only; /* argv[1]: measure only the figures whose name contains it */

static gboolean wanted(const char *figure)
{
    return !only || strstr(figure, only) != NULL;
}

/* The rounds of one figure. */
typedef struct {
    double ns[ROUNDS];      /* per call, per thread */
    double per_sec[ROUNDS]; /* all threads          */
    double on_cpu[ROUNDS];
} rounds;

static void record(rounds *r, guint i, const sample *s)
{
    r->ns[i] = s->ns_per_call;
    r->per_sec[i] = s->calls_per_sec;
    r->on_cpu[i] = s->on_cpu;
}

/* One line of the table. */
typedef struct {
    const char *figure;
    guint threads;
    double ns;        /* the figure: the best round           */
    double median_ns; /* the median round                      */
    double per_sec;   /* calls/s in the best round; 0: none    */
    double on_cpu;    /* median share                          */
    double target;    /* ns; < 0: none, for information        */
} row;

static row summarize(const char *figure, guint threads, const rounds *r, double target)
{
    return (row){figure,
                 threads,
                 bench_min(r->ns, ROUNDS),
                 bench_median(r->ns, ROUNDS),
                 bench_max(r->per_sec, ROUNDS),
                 bench_median(r->on_cpu, ROUNDS),
                 target};
}

#define ROW_FORMAT "%-42s %7s %9s %9s %10s %7s %9s %6s\n"

static void print_header(void)
{
    printf(ROW_FORMAT, "figure", "threads", "ns/call", "(median)", "calls/s", "on-CPU", "target",
           "result");
    printf(ROW_FORMAT, "------", "-------", "-------", "--------", "-------", "------", "------",
           "------");
}

static void print_row(const row *r)
{
    char threads[16], ns[32], median_ns[32], per_sec[32] = "-", on_cpu[16], target[32] = "-";
    const char *result = "";

    g_snprintf(threads, sizeof threads, "%u", r->threads);
    g_snprintf(ns, sizeof ns, "%.2f", r->ns);
    g_snprintf(median_ns, sizeof median_ns, "(%.2f)", r->median_ns);
    if (r->per_sec > 0)
        g_snprintf(per_sec, sizeof per_sec, "%.2f M", r->per_sec / 1e6);
    g_snprintf(on_cpu, sizeof on_cpu, "%.0f%%%s", 100 * r->on_cpu,
               r->on_cpu < ON_CPU_MIN ? "*" : "");
    marked += r->on_cpu < ON_CPU_MIN;
    if (r->target >= 0) {
        g_snprintf(target, sizeof target, "< %.0f ns", r->target);
        result = r->ns < r->target ? "PASS" : "MISS";
        targets++;
        misses += r->ns >= r->target;
    }
    printf(ROW_FORMAT, r->figure, threads, ns, median_ns, per_sec, on_cpu, target, result);
    fflush(stdout);
}

/* Measures op on `threads` threads and prints its row. */
static void measure(const char *figure, bench_op op, guint threads, double target)
{
    rounds r;
    guint64 not_admitted = 0;

    if (!wanted(figure))
        return;
    run_round(op, threads, FALSE); /* warm-up: binds guards, creates the keys' states */
    for (guint i = 0; i < ROUNDS; i++) {
        sample s = run_round(op, threads, FALSE);
        record(&r, i, &s);
        not_admitted += s.not_admitted;
    }
    row line = summarize(figure, threads, &r, target);
    print_row(&line);
    if (not_admitted)
        printf("  warning: %" G_GUINT64_FORMAT " calls were not admitted; the figure is not "
               "that of an allowed decision\n",
               not_admitted);
}

/* The row of what `of` costs more than `base` a call: the difference of the best
 * rounds (the median column: the median of the differences of rounds run back to
 * back). */
static row difference(const char *figure, guint threads, const rounds *of, const rounds *base,
                      double target)
{
    rounds added;
    for (guint i = 0; i < ROUNDS; i++) {
        added.ns[i] = of->ns[i] - base->ns[i];
        added.per_sec[i] = 0;
        added.on_cpu[i] = MIN(of->on_cpu[i], base->on_cpu[i]);
    }
    row line = summarize(figure, threads, &added, target);
    line.ns = bench_min(of->ns, ROUNDS) - bench_min(base->ns, ROUNDS);
    return line;
}

/* The plain call and the two no-rule forms, interleaved round by round: what a
 * decorator adds (difference). */
static void measure_no_rule(void)
{
    static const struct {
        const char *figure, *added;
        bench_op op;
    } forms[] = {
        {"plain call, undecorated (baseline)", NULL, memory_op_plain},
        {"no rule: RATE_LIMITED_FUNCTION call", "no rule: added by RATE_LIMITED_FUNCTION",
         memory_op_norule_fn},
        {"no rule: RATE_LIMITED guard call", "no rule: added by RATE_LIMITED guard",
         memory_op_norule_guard},
    };
    rounds r[G_N_ELEMENTS(forms)];

    if (!wanted("plain call, no rule"))
        return;
    for (guint k = 0; k < G_N_ELEMENTS(forms); k++)
        run_round(forms[k].op, 1, FALSE); /* warm-up: binds the guard */
    for (guint i = 0; i < ROUNDS; i++) {
        for (guint k = 0; k < G_N_ELEMENTS(forms); k++) {
            sample s = run_round(forms[k].op, 1, FALSE);
            record(&r[k], i, &s);
        }
    }
    for (guint k = 0; k < G_N_ELEMENTS(forms); k++) {
        row line = summarize(forms[k].figure, 1, &r[k], -1);
        print_row(&line);
    }
    for (guint k = 1; k < G_N_ELEMENTS(forms); k++) {
        row line = difference(forms[k].added, 1, &r[k], &r[0], TARGET_NO_RULE_NS);
        print_row(&line);
    }
}

/* The line of a ratio of calls/s, `of` over `to`, of the best rounds (the median of
 * the ratios of rounds run back to back in brackets), with its target (none when
 * target is 0: a baseline's ratio, shown, not counted). */
static void print_ratio(const char *figure, const rounds *of, const rounds *to, double target)
{
    double best = bench_max(of->per_sec, ROUNDS) / bench_max(to->per_sec, ROUNDS);
    double each[ROUNDS];
    for (guint i = 0; i < ROUNDS; i++)
        each[i] = of->per_sec[i] / to->per_sec[i];
    gboolean pass = best >= target;
    /* threads that were not on a CPU together measured time-sharing, not contention */
    gboolean off_cpu = bench_median(of->on_cpu, ROUNDS) < ON_CPU_MIN ||
                       bench_median(to->on_cpu, ROUNDS) < ON_CPU_MIN;
    char median[32], target_text[32] = "-", result[16] = "";
    g_snprintf(median, sizeof median, "(%.2fx)", bench_median(each, ROUNDS));
    if (target > 0) {
        g_snprintf(target_text, sizeof target_text, ">= %.1fx", target);
        g_snprintf(result, sizeof result, "%s%s", pass ? "PASS" : "MISS", off_cpu ? "*" : "");
        targets++;
        misses += !pass;
    }
    printf("%-42s %7s %8.2fx %9s %10s %7s %9s %6s\n", figure, "", best, median, "", "", target_text,
           result);
}

/* One case of an interleaved measurement. */
typedef struct {
    const char *figure;
    bench_op op;
    guint threads;
    gboolean own_keys; /* run_round */
} scaling_case;

/* The cases, interleaved round by round (so that load from elsewhere falls on all
 * alike), their rows printed; r: their rounds. */
static void measure_interleaved(const scaling_case *cases, guint n, rounds *r)
{
    guint64 not_admitted = 0;
    for (guint k = 0; k < n; k++)
        run_round(cases[k].op, cases[k].threads, cases[k].own_keys); /* warm-up */
    for (guint i = 0; i < ROUNDS; i++) {
        for (guint k = 0; k < n; k++) {
            sample s = run_round(cases[k].op, cases[k].threads, cases[k].own_keys);
            record(&r[k], i, &s);
            not_admitted += s.not_admitted;
        }
    }
    for (guint k = 0; k < n; k++) {
        row line = summarize(cases[k].figure, cases[k].threads, &r[k], -1);
        print_row(&line);
    }
    if (not_admitted)
        printf("  warning: %" G_GUINT64_FORMAT " calls were not admitted\n", not_admitted);
}

/* A hot limit next to the ideal exact shared limit, and prefetch on one and two
 * threads, interleaved; the targets compare calls/s of the best rounds. */
static void measure_scaling(void)
{
    static const scaling_case cases[] = {
        {"ideal exact shared limit (baseline)", memory_op_ideal, 1, FALSE},
        {"ideal exact shared limit (baseline)", memory_op_ideal, 2, FALSE},
        {"hot limit: sluice_acquire, gcra, shared", memory_op_hot, 1, FALSE},
        {"hot limit: sluice_acquire, gcra, shared", memory_op_hot, 2, FALSE},
        {"hot limit, prefetch = 100", memory_op_prefetch, 1, FALSE},
        {"hot limit, prefetch = 100", memory_op_prefetch, 2, FALSE},
    };
    enum { IDEAL_1 = 0, IDEAL_2 = 1, HOT_1 = 2, HOT_2 = 3, PREFETCH_1 = 4, PREFETCH_2 = 5 };
    rounds r[G_N_ELEMENTS(cases)];

    if (!wanted("hot limit"))
        return;
    measure_interleaved(cases, G_N_ELEMENTS(cases), r);
    /* what sharing the line costs a call: a second thread's time, per call */
    row ideal_added = difference("a 2nd thread adds: ideal", 2, &r[IDEAL_2], &r[IDEAL_1], -1);
    row hot_added = difference("a 2nd thread adds: hot limit", 2, &r[HOT_2], &r[HOT_1], -1);
    print_row(&ideal_added);
    print_row(&hot_added);
    print_ratio("hot limit, 2 threads / ideal, 2 threads", &r[HOT_2], &r[IDEAL_2],
                TARGET_HOT_RATIO);
    print_ratio("prefetch, 2 threads / 1 thread", &r[PREFETCH_2], &r[PREFETCH_1], TARGET_PREFETCH);
}

/* A per-key limit on one thread, and on two: each on keys of its own (keys whose
 * states one thread made earlier, and keys whose states it made itself), and both on
 * every key; next to the ideal per-key store on one thread and two (keys of their
 * own, in a table each thread made), which shows what the machine gives two threads
 * that share nothing in this run; interleaved; the target compares calls/s of the
 * best rounds, of the threads on keys they made (as the ideal's are). */
static void measure_keyed(void)
{
    static const scaling_case cases[] = {
        {"ideal per-key store (baseline): 1000 keys", memory_op_keyed_ideal, 1, FALSE},
        {"ideal per-key store, 500 per thread", memory_op_keyed_ideal, 2, TRUE},
        {"per key: 1000 keys", memory_op_keyed_guard, 1, FALSE},
        {"per key: 1000 keys, 500 per thread", memory_op_keyed_guard, 2, TRUE},
        {"per key: 500 per thread, made by it", memory_op_keyed_guard_made, 2, TRUE},
        {"per key: 1000 keys, all on both threads", memory_op_keyed_guard, 2, FALSE},
    };
    enum { IDEAL_ONE = 0, IDEAL_OWN_KEYS = 1, ONE = 2, OWN_KEYS = 3, MADE_KEYS = 4 };
    rounds r[G_N_ELEMENTS(cases)];

    if (!wanted("per key"))
        return;
    measure_interleaved(cases, G_N_ELEMENTS(cases), r);
    print_ratio("ideal per key, 2 threads / 1 thread", &r[IDEAL_OWN_KEYS], &r[IDEAL_ONE], 0);
    print_ratio("per key, 2 threads / 1 thread", &r[OWN_KEYS], &r[ONE], 0);
    print_ratio("per key, 2 threads on keys they made / 1", &r[MADE_KEYS], &r[ONE],
                TARGET_KEYED_RATIO);
}

/* ---- main --------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: %s [FIGURE]   (FIGURE: measure only the figures that contain it)\n",
                argv[0]);
        return 2;
    }
    only = argc == 2 ? argv[1] : NULL;
    if (!memory_ops_init(&error)) {
        fprintf(stderr, "bench_memory: %s\n", error->message);
        return 1;
    }

    bench_print_version("memory");
    printf("ns/call: the best of %d rounds of >= %.1f s (the median round in brackets); "
           "allowed rules: fixed_window, limit 2^50 per 1s\n\n",
           ROUNDS, ROUND_NS / 1e9);
    print_header();

    static const struct {
        const char *figure;
        bench_op op;
        gboolean keyed;
    } allowed[] = {
        {"allowed: sluice_acquire(name, NULL, 1)", memory_op_acquire, FALSE},
        {"allowed: RATE_LIMITED_FUNCTION call", memory_op_allowed_fn, FALSE},
        {"allowed: RATE_LIMITED_KEY guard, 1000 keys", memory_op_keyed_guard, TRUE},
    };
    for (guint threads = 1; threads <= THREADS_MAX; threads++)
        for (guint i = 0; i < G_N_ELEMENTS(allowed); i++)
            if (threads == 1 || !allowed[i].keyed) /* 2 threads per key: measure_keyed */
                measure(allowed[i].figure, allowed[i].op, threads,
                        threads > 1        ? -1
                        : allowed[i].keyed ? TARGET_KEYED_NS
                                           : TARGET_ALLOWED_NS);
    measure_scaling();
    measure_keyed();
    measure_no_rule();

    printf("\n%u of %u targets missed\n", misses, targets);
    if (marked)
        printf("* on-CPU under %.0f%%: the threads were off the CPU for part of the rounds, "
               "preempted by\n  other processes or (2 threads) asleep on the limiter's lock; "
               "a ratio marked * compares\n  rows whose threads were not on the CPUs together: "
               "rerun on an idle machine\n",
               100 * ON_CPU_MIN);

    memory_ops_free();
    return 0;
}
