/* SPDX-License-Identifier: MIT */
/* bench_shm: the shm backend's per-key decision next to the memory backend's, on one
 * thread, on two threads and in two processes, each on keys of its own; and the bytes
 * of zone a key takes; beside them, the ideal per-key zone in one process and in two.
 *
 * The cases run interleaved round by round (load from elsewhere falls on all alike):
 * the ideal per-key zone, one process and two; per key on the memory backend, one
 * thread; on shm, one thread, two threads, one process, two processes (forked, each
 * attaching to the zone itself). A round calls
 * sluice_acquire on a per-key fixed_window that never says no, in batches of BATCH
 * calls for at least ROUND_NS; a figure is the best of ROUNDS rounds (the median of the
 * rounds in brackets). It prints one table (figure, value, target, PASS/MISS) and exits
 * 0 whatever the figures are, 1 when sluice cannot be set up. Run it with scripts/bench;
 * bench/README.md explains the figures. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>
#include <sluice/sluice.h>

#include "children.h"
#include "setup.h"
#include "timing.h"

#define ROUNDS   5
#define ROUND_NS (300 * G_GINT64_CONSTANT(1000000)) /* each round runs at least 0.3 s */
#define BATCH    1024                               /* calls between two clock reads */
#define KEYS     1000                               /* the keys, split among the callers */
#define CALLERS  2                                  /* threads or processes at most */

#define TARGET_VS_MEMORY 1.5  /* shm, one thread: ns/call over the memory backend's, at most */
#define TARGET_THREADS   1.6  /* shm, 2 threads on keys of their own / 1 thread, at least */
#define TARGET_PROCESSES 1.7  /* shm, 2 processes on keys of their own / 1 process, at least */
#define TARGET_BYTES     64.0 /* zone bytes per key state, at most */
#define ON_CPU_MIN       0.9  /* below this share a row is marked: its callers waited */

/* The two keyfiles: the same per-key limit, on each backend. */
#define LIMIT                                                                                      \
    "[limit:bench.keyed]\nalgorithm = fixed_window\nlimit = 1125899906842624\nwindow = 1s\n"       \
    "per_key = true\n"
static const char memory_keyfile[] = "[sluice]\nbackend = memory\nreload = false\n" LIMIT;
static char *shm_keyfile, *zone;

static char *keys[KEYS];

typedef struct {
    guint first, n; /* its keys: keys[first .. first + n) */
    gint *ready;    /* atomic: callers waiting for the start */
    gint *start;    /* atomic: set when every caller is ready */
    bench_batches *out;
    gboolean ideal; /* on the ideal per-key zone, not sluice */
} caller;

/* ---- the ideal per-key zone -------------------------------------------------------- */

/* The least a per-key limit shared by processes needs: one mapping that every process
 * writes (made before they fork), a cell a key found by its hash, and per decision one
 * clock read and one atomic add on the key's count. Its two-process rows show what
 * this machine gives two processes that write one mapping, each on keys of its own. */
#define IDEAL_CELLS 4096 /* a power of two, over four times KEYS */

typedef struct {
    char key[40];                           /* NUL-terminated; empty: a free cell */
    gint64 window_start;                    /* the key's fixed window, 1 s         */
    gint64 count;                           /* atomic                              */
} __attribute__((aligned(128))) ideal_cell; /* lines fetched in pairs: a pair of its own */

static ideal_cell *ideal_zone;

/* key's cell, made when the key has none (before the processes fork: none races). */
static ideal_cell *ideal_find(const char *key)
{
    guint at = g_str_hash(key) & (IDEAL_CELLS - 1);
    while (ideal_zone[at].key[0] && strcmp(ideal_zone[at].key, key) != 0)
        at = (at + 1) & (IDEAL_CELLS - 1);
    if (!ideal_zone[at].key[0])
        g_strlcpy(ideal_zone[at].key, key, sizeof ideal_zone[at].key);
    return &ideal_zone[at];
}

/* A batch of ideal decisions on the caller's keys in turn. */
static guint64 ideal_batch(gpointer p, guint64 done, guint batch)
{
    caller *c = p;
    guint64 admitted = 0;
    for (guint i = 0, k = (guint)(done % c->n); i < batch; i++) {
        ideal_cell *cell = ideal_find(keys[c->first + k]);
        gint64 now = sluice_clock_now();
        if (now - cell->window_start >= G_USEC_PER_SEC) { /* one process has the key */
            cell->window_start = now;
            __atomic_store_n(&cell->count, 0, __ATOMIC_RELAXED);
        }
        admitted += __atomic_fetch_add(&cell->count, 1, __ATOMIC_ACQ_REL) <
                    G_GINT64_CONSTANT(1125899906842624); /* the limit, 2^50 */
        if (++k == c->n)
            k = 0;
    }
    return admitted;
}

/* A batch of sluice_acquire on the caller's keys in turn. */
static guint64 keys_batch(gpointer p, guint64 done, guint batch)
{
    caller *c = p;
    guint64 admitted = 0;
    for (guint i = 0, k = (guint)(done % c->n); i < batch; i++) {
        admitted +=
            sluice_acquire("bench.keyed", keys[c->first + k], 1, NULL, NULL) == SLUICE_ALLOWED;
        if (++k == c->n)
            k = 0;
    }
    return admitted;
}

/* Calls sluice_acquire on the caller's keys in turn, in timed batches, until ROUND_NS
 * has passed: the median batch is what a call costs when the caller is not preempted. */
static gpointer call_keys(gpointer p)
{
    caller *c = p;
    g_atomic_int_inc(c->ready);
    while (!g_atomic_int_get(c->start))
        ; /* spin: the callers start within a few hundred ns of each other */
    bench_batches_run(c->ideal ? ideal_batch : keys_batch, c, BATCH, ROUND_NS, c->out);
    return NULL;
}

/* One round's figures. */
typedef struct {
    double ns_per_call;   /* per caller: a call in the median batch */
    double calls_per_sec; /* all callers together                   */
    double on_cpu;        /* share of the round they were on a CPU   */
    guint64 not_admitted; /* must stay 0: the limit never says no   */
} sample;

static sample sum(const bench_batches *t, guint n)
{
    sample s = {0, 0, 0, 0};
    for (guint i = 0; i < n; i++) {
        s.ns_per_call += t[i].typical_ns / n;
        s.calls_per_sec += (double)t[i].calls * 1e9 / (double)t[i].elapsed_ns;
        s.on_cpu += (double)t[i].cpu_ns / (double)t[i].elapsed_ns / n;
        s.not_admitted += t[i].calls - t[i].admitted;
    }
    return s;
}

/* A round of `threads` threads of this process on keyfile, each on keys of its own. */
static sample threads_round(const char *keyfile, guint threads)
{
    caller c[CALLERS];
    bench_batches t[CALLERS];
    GThread *th[CALLERS];
    gint ready = 0, start = 0;
    g_autoptr(GError) error = NULL;
    if (!bench_init(keyfile, &error))
        g_error("bench_shm: %s", error->message);
    for (guint i = 0; i < threads; i++) {
        c[i] = (caller){i * (KEYS / threads), KEYS / threads, &ready, &start, &t[i], FALSE};
        th[i] = g_thread_new("bench", call_keys, &c[i]);
    }
    while (g_atomic_int_get(&ready) < (gint)threads)
        g_thread_yield();
    g_atomic_int_set(&start, 1);
    for (guint i = 0; i < threads; i++)
        g_thread_join(th[i]);
    sluice_shutdown();
    return sum(t, threads);
}

/* What the processes of processes_round share. */
typedef struct {
    gint ready, start, failed;
    guint processes;
    gboolean ideal;
    bench_batches t[CALLERS];
} shared_round;

/* Process i of a round: attaches (not to the ideal zone, which it has), then calls its
 * keys with the others. */
static int process_calls(guint i, gpointer data)
{
    shared_round *s = data;
    guint n = KEYS / s->processes;
    caller c = {i * n, n, &s->ready, &s->start, &s->t[i], s->ideal};
    if (s->ideal) {
        call_keys(&c);
        return 0;
    }
    if (!bench_init(shm_keyfile, NULL)) {
        g_atomic_int_inc(&s->failed);
        g_atomic_int_inc(&s->ready);
        return 1;
    }
    call_keys(&c);
    sluice_shutdown();
    return 0;
}

/* A round of `processes` processes on the zone (ideal: on the ideal per-key zone),
 * forked before any attaches (this process is not attached while it forks), each with
 * one thread on keys of its own; they start together once every one has attached. */
static sample processes_round(guint processes, gboolean ideal)
{
    shared_round *s =
        mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_assert(s != MAP_FAILED);
    *s = (shared_round){.processes = processes, .ideal = ideal};
    pid_t pids[CALLERS];
    children_fork(processes, 60, process_calls, s, pids);
    while (g_atomic_int_get(&s->ready) < (gint)processes)
        g_usleep(100);
    g_atomic_int_set(&s->start, 1);
    children_wait(processes, pids);
    if (s->failed)
        g_error("bench_shm: a process could not attach to the zone");
    sample r = sum(s->t, processes);
    munmap(s, sizeof *s);
    return r;
}

/* ---- the table ----------------------------------------------------------------- */

enum { IDEAL_1, IDEAL_2, MEMORY_1, SHM_1, SHM_THREADS_2, SHM_PROCESS_1, SHM_PROCESSES_2, CASES };

static const struct {
    const char *figure;
    guint callers;
} cases[CASES] = {
    {"ideal per-key zone (baseline), 1 process", 1},
    {"ideal per-key zone, 2 processes, 500 each", 2},
    {"per key, memory backend, 1 thread", 1},
    {"per key, shm, 1 thread", 1},
    {"per key, shm, 2 threads, 500 keys each", 2},
    {"per key, shm, 1 process", 1},
    {"per key, shm, 2 processes, 500 keys each", 2},
};

static sample run_case(guint k)
{
    switch (k) {
    case IDEAL_1:
        return processes_round(1, TRUE);
    case IDEAL_2:
        return processes_round(2, TRUE);
    case MEMORY_1:
        return threads_round(memory_keyfile, 1);
    case SHM_1:
        return threads_round(shm_keyfile, 1);
    case SHM_THREADS_2:
        return threads_round(shm_keyfile, 2);
    case SHM_PROCESS_1:
        return processes_round(1, FALSE);
    default:
        return processes_round(2, FALSE);
    }
}

static guint targets, misses, marked;

#define ROW_FORMAT "%-44s %7s %9s %9s %10s %7s %9s %6s\n"

/* A figure against its target (target 0: shown, not counted). */
static void print_target(const char *figure, double value, double median, gboolean at_most,
                         double target, gboolean off_cpu, const char *unit)
{
    gboolean pass = at_most ? value <= target : value >= target;
    char v[32], m[32], t[32] = "-", result[16] = "";
    g_snprintf(v, sizeof v, "%.2f%s", value, unit);
    m[0] = '\0';
    if (median >= 0)
        g_snprintf(m, sizeof m, "(%.2f%s)", median, unit);
    if (target > 0) {
        g_snprintf(t, sizeof t, "%s %.1f%s", at_most ? "<=" : ">=", target, unit);
        g_snprintf(result, sizeof result, "%s%s", pass ? "PASS" : "MISS", off_cpu ? "*" : "");
        targets++;
        misses += !pass;
    }
    printf(ROW_FORMAT, figure, "", v, m, "", "", t, result);
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: bench_shm\n");
        return 2;
    }
    zone = g_strdup_printf("bench-%d", (int)getpid());
    shm_keyfile = g_strdup_printf("[sluice]\nbackend = shm\nshm = %s\nshm_size = 64M\n"
                                  "reload = false\n" LIMIT,
                                  zone);
    for (guint i = 0; i < KEYS; i++)
        keys[i] = g_strdup_printf("user-%04u", i);
    g_autoptr(GError) error = NULL;
    sluice_zone_remove(zone, NULL);
    if (!bench_init(shm_keyfile, &error)) {
        fprintf(stderr, "bench_shm: %s\n", error->message);
        return 1;
    }
    sluice_zone_info z;
    gboolean zone_ok = sluice_zone_get(&z, NULL);
    sluice_shutdown();
    ideal_zone = mmap(NULL, IDEAL_CELLS * sizeof(ideal_cell), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ideal_zone == MAP_FAILED) {
        fprintf(stderr, "bench_shm: no shared mapping for the ideal zone\n");
        return 1;
    }
    for (guint i = 0; i < KEYS; i++)
        ideal_find(keys[i]); /* every key's cell, before any process forks */

    bench_print_version("shm (and memory)");
    g_autofree char *load = bench_load_average();
    printf("ns/call: the best of %d rounds of >= %.1f s (the median round in brackets); "
           "a per-key fixed_window, limit 2^50 per 1s, %d keys; load average %s\n\n",
           ROUNDS, ROUND_NS / 1e9, KEYS, load);
    printf(ROW_FORMAT, "figure", "callers", "ns/call", "(median)", "calls/s", "on-CPU", "target",
           "result");
    printf(ROW_FORMAT, "------", "-------", "-------", "--------", "-------", "------", "------",
           "------");

    double ns[CASES][ROUNDS], per_sec[CASES][ROUNDS], on_cpu[CASES][ROUNDS];
    guint64 not_admitted = 0;
    for (guint k = 0; k < CASES; k++)
        run_case(k); /* warm-up: makes the keys' states */
    for (guint i = 0; i < ROUNDS; i++)
        for (guint k = 0; k < CASES; k++) {
            sample s = run_case(k);
            ns[k][i] = s.ns_per_call;
            per_sec[k][i] = s.calls_per_sec;
            on_cpu[k][i] = s.on_cpu;
            not_admitted += s.not_admitted;
        }
    gboolean off[CASES];
    for (guint k = 0; k < CASES; k++) {
        char callers[8], n[32], m[32], rate[32], cpu[16];
        off[k] = bench_median(on_cpu[k], ROUNDS) < ON_CPU_MIN;
        marked += off[k];
        g_snprintf(callers, sizeof callers, "%u", cases[k].callers);
        g_snprintf(n, sizeof n, "%.2f", bench_min(ns[k], ROUNDS));
        g_snprintf(m, sizeof m, "(%.2f)", bench_median(ns[k], ROUNDS));
        g_snprintf(rate, sizeof rate, "%.2f M", bench_max(per_sec[k], ROUNDS) / 1e6);
        g_snprintf(cpu, sizeof cpu, "%.0f%%%s", 100 * bench_median(on_cpu[k], ROUNDS),
                   off[k] ? "*" : "");
        printf(ROW_FORMAT, cases[k].figure, callers, n, m, rate, cpu, "-", "");
    }

    /* the ratios: of the best rounds, and (in brackets) the median of each round's */
    static const struct {
        const char *figure;
        guint of, to;
        gboolean ns, at_most;
        double target;
    } ratios[] = {
        {"ideal zone, 2 processes / 1 process (calls/s)", IDEAL_2, IDEAL_1, FALSE, FALSE, 0},
        {"shm / memory backend, 1 thread (ns/call)", SHM_1, MEMORY_1, TRUE, TRUE, TARGET_VS_MEMORY},
        {"shm, 2 threads / 1 thread (calls/s)", SHM_THREADS_2, SHM_1, FALSE, FALSE, TARGET_THREADS},
        {"shm, 2 processes / 1 process (calls/s)", SHM_PROCESSES_2, SHM_PROCESS_1, FALSE, FALSE,
         TARGET_PROCESSES},
    };
    for (guint r = 0; r < G_N_ELEMENTS(ratios); r++) {
        double(*v)[ROUNDS] = ratios[r].ns ? ns : per_sec;
        guint a = ratios[r].of, b = ratios[r].to;
        double best = ratios[r].ns ? bench_min(v[a], ROUNDS) / bench_min(v[b], ROUNDS)
                                   : bench_max(v[a], ROUNDS) / bench_max(v[b], ROUNDS);
        double each[ROUNDS];
        for (guint i = 0; i < ROUNDS; i++)
            each[i] = v[a][i] / v[b][i];
        print_target(ratios[r].figure, best, bench_median(each, ROUNDS), ratios[r].at_most,
                     ratios[r].target, off[a] || off[b], "x");
    }
    if (zone_ok)
        print_target("zone bytes per key state (size / capacity)",
                     (double)z.size / (double)z.capacity, -1, TRUE, TARGET_BYTES, FALSE, "");
    else
        printf("zone bytes per key state: the zone could not be read\n");
    if (not_admitted)
        printf("  warning: %" G_GUINT64_FORMAT " calls were not admitted\n", not_admitted);

    g_free(load);
    load = bench_load_average();
    printf("\n%u of %u targets missed; load average at the end %s\n", misses, targets, load);
    if (marked)
        printf("* on-CPU under %.0f%%: the callers were off the CPU for part of the rounds, "
               "preempted by\n  other processes; a ratio marked * compares rows whose callers "
               "were not on the CPUs\n  together: rerun on an idle machine\n",
               100 * ON_CPU_MIN);
    sluice_zone_remove(zone, NULL);
    munmap(ideal_zone, IDEAL_CELLS * sizeof(ideal_cell));
    for (guint i = 0; i < KEYS; i++)
        g_free(keys[i]);
    g_free(shm_keyfile);
    g_free(zone);
    return 0;
}
