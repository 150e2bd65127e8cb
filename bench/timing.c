/* SPDX-License-Identifier: MIT */
/* What every benchmark times with: the clocks, CPU time, the machine's load, and the
 * quantiles of what it measured. */
#include "timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

gint64 bench_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

gint64 bench_now_ns(void)
{
    return bench_clock_ns(CLOCK_MONOTONIC);
}

gint64 bench_rusage_ns(int who)
{
    struct rusage u;
    getrusage(who, &u);
    return ((gint64)u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000000 +
           ((gint64)u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1000;
}

gint64 bench_process_cpu_ns(GPid pid)
{
    char path[64];
    g_autofree char *text = NULL;
    unsigned long long user, system;

    g_snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return -1;
    const char *p = strrchr(text, ')'); /* after the command name, which may hold spaces */
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &user,
                     &system) != 2)
        return -1;
    return (gint64)((user + system) * 1000000000ull / (unsigned long long)sysconf(_SC_CLK_TCK));
}

char *bench_load_average(void)
{
    g_autofree char *all = NULL;
    g_file_get_contents("/proc/loadavg", &all, NULL, NULL);
    g_auto(GStrv) fields = g_strsplit(all ? all : "? ? ?", " ", 4);
    return g_strjoin(" ", fields[0], fields[1] ? fields[1] : "?",
                     fields[1] && fields[2] ? fields[2] : "?", NULL);
}

static int compare_guint32(const void *a, const void *b)
{
    guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
    return (x > y) - (x < y);
}

void bench_sort_u32(guint32 *values, gsize n)
{
    qsort(values, n, sizeof *values, compare_guint32);
}

guint32 bench_quantile(const guint32 *sorted, gsize n, double q)
{
    gsize i = (gsize)(q * (double)n + 0.999999);
    return sorted[MIN(MAX(i, 1), n) - 1];
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(const double *values, guint n)
{
    g_autofree double *sorted = g_memdup2(values, n * sizeof *values);
    qsort(sorted, n, sizeof *sorted, compare_double);
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

double bench_min(const double *values, guint n)
{
    double m = values[0];
    for (guint i = 1; i < n; i++)
        m = MIN(m, values[i]);
    return m;
}

double bench_max(const double *values, guint n)
{
    double m = values[0];
    for (guint i = 1; i < n; i++)
        m = MAX(m, values[i]);
    return m;
}

void bench_batches_run(bench_batch_fn fn, gpointer data, guint batch, gint64 round_ns,
                       bench_batches *out)
{
    GArray *batches = g_array_sized_new(FALSE, FALSE, sizeof(guint32), 1 << 18);
    gint64 cpu0 = bench_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    gint64 t0 = bench_clock_ns(CLOCK_MONOTONIC), t = t0, last;
    guint64 calls = 0, admitted = 0;
    do {
        last = t;
        admitted += fn(data, calls, batch);
        calls += batch;
        t = bench_clock_ns(CLOCK_MONOTONIC);
        guint32 batch_ns = (guint32)MIN(t - last, G_MAXUINT32);
        g_array_append_val(batches, batch_ns);
    } while (t - t0 < round_ns);
    out->cpu_ns = bench_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    bench_sort_u32((guint32 *)batches->data, batches->len);
    out->typical_ns = bench_quantile((guint32 *)batches->data, batches->len, 0.5) / (double)batch;
    g_array_free(batches, TRUE);
    out->calls = calls;
    out->admitted = admitted;
    out->elapsed_ns = t - t0;
}
