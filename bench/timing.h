/* SPDX-License-Identifier: MIT */
/* What every benchmark times with: the clocks, CPU time, the machine's load, and the
 * quantiles of what it measured. */
#ifndef SLUICE_BENCH_TIMING_H
#define SLUICE_BENCH_TIMING_H

#include <glib.h>
#include <time.h>

/* clock_gettime(id) in ns. */
gint64 bench_clock_ns(clockid_t id);
/* CLOCK_MONOTONIC in ns. */
gint64 bench_now_ns(void);
/* The user + system CPU time of getrusage(who) (RUSAGE_SELF: every thread of this process;
 * RUSAGE_CHILDREN: its reaped children), in ns. */
gint64 bench_rusage_ns(int who);
/* The user + system CPU time another process has used so far (all its threads, from
 * /proc/PID/stat), in ns; -1 when unknown. */
gint64 bench_process_cpu_ns(GPid pid);

/* The load average now: /proc/loadavg's first three fields ("1.20 0.90 0.75"), "?" for
 * what cannot be read. g_free it. */
char *bench_load_average(void);

/* Sorts n values in place, for bench_quantile. */
void bench_sort_u32(guint32 *values, gsize n);
/* The q-quantile (0 < q <= 1) of n > 0 sorted values: the smallest value that at least q * n
 * values do not exceed (q = 0.5: the median, the lower of the two middle values). */
guint32 bench_quantile(const guint32 *sorted, gsize n, double q);
/* The median of n > 0 values (the mean of the two middle ones when n is even), the smallest,
 * the largest. The values are left as they are. */
double bench_median(const double *values, guint n);
double bench_min(const double *values, guint n);
double bench_max(const double *values, guint n);

/* What a thread's timed batches did (bench_batches_run). */
typedef struct {
    guint64 calls, admitted;
    gint64 elapsed_ns; /* on the monotonic clock                                  */
    gint64 cpu_ns;     /* on a CPU: less than elapsed when preempted or asleep     */
    double typical_ns; /* per call, in the median batch                           */
} bench_batches;

/* Makes `batch` calls, the done-th call of the thread's run onwards; returns how many
 * were admitted. */
typedef guint64 (*bench_batch_fn)(gpointer data, guint64 done, guint batch);

/* Calls fn in batches of `batch` calls until round_ns has passed on the monotonic
 * clock, timing every batch: the median batch is what a call costs when the thread
 * is not preempted (a batch lasts a few microseconds, a time slice milliseconds). */
void bench_batches_run(bench_batch_fn fn, gpointer data, guint batch, gint64 round_ns,
                       bench_batches *out);

#endif
