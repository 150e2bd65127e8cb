/* SPDX-License-Identifier: MIT */
/* bench_redis's sluice_acquire_async row: one thread iterating a GMainContext that keeps many
 * decisions in flight, recording the latency of each. */
#include <string.h>
#include <sys/resource.h>

#include <gio/gio.h>
#include <sluice/sluice.h>

#include "bench_redis.h"
#include "timing.h"

typedef struct {
    const char *limit;
    GMainContext *context;
    gint64 deadline_ns;
    guint32 *latency_ns;
    gsize capacity, calls;
    guint64 denied, errors;
    guint in_flight;
    gint64 end_ns;
} async_run;

typedef struct {
    async_run *run;
    gint64 t0;
} async_call;

static void async_start(async_call *c);

static void async_done(GObject *source, GAsyncResult *result, gpointer data)
{
    async_call *c = data;
    async_run *run = c->run;
    (void)source;
    int verdict = sluice_acquire_finish(result, NULL, NULL);
    gint64 t = bench_now_ns();
    run->denied += verdict == SLUICE_DENIED;
    run->errors += verdict == SLUICE_FAILED;
    if (run->calls < run->capacity)
        run->latency_ns[run->calls++] = (guint32)MIN(t - c->t0, (gint64)G_MAXUINT32);
    run->end_ns = MAX(run->end_ns, t);
    if (t < run->deadline_ns && run->calls < run->capacity)
        async_start(c);
    else
        run->in_flight--;
}

static void async_start(async_call *c)
{
    c->t0 = bench_now_ns();
    sluice_acquire_async(c->run->limit, NULL, 1, NULL, async_done, c);
}

/* Each completion starts the next, until the deadline. */
gboolean measure_async(const test_redis *s, const char *limit, guint in_flight, figures *f)
{
    async_run run = {.limit = limit ? limit : LIMIT_NAME,
                     .context = g_main_context_new(),
                     .capacity = LATENCIES};
    async_call *calls = g_new0(async_call, in_flight);

    run.latency_ns = g_new(guint32, run.capacity);
    memset(run.latency_ns, 0, run.capacity * sizeof(guint32)); /* fault the pages in now */
    g_main_context_push_thread_default(run.context);
    /* the first call opens this context's connection */
    run.deadline_ns = 0;
    run.in_flight = 1;
    calls[0].run = &run;
    async_start(&calls[0]);
    while (run.in_flight > 0)
        g_main_context_iteration(run.context, TRUE);
    run.calls = run.denied = run.errors = 0;

    gint64 cpu0 = bench_rusage_ns(RUSAGE_SELF), server0 = bench_process_cpu_ns(s->pid),
           start = bench_now_ns();
    run.deadline_ns = start + RUN_NS;
    run.end_ns = start;
    run.in_flight = in_flight;
    for (guint i = 0; i < in_flight; i++) {
        calls[i].run = &run;
        async_start(&calls[i]);
    }
    while (run.in_flight > 0)
        g_main_context_iteration(run.context, TRUE);
    gint64 cpu = bench_rusage_ns(RUSAGE_SELF) - cpu0, server1 = bench_process_cpu_ns(s->pid);

    g_main_context_pop_thread_default(run.context);
    g_main_context_unref(run.context);
    figures_of(f, run.latency_ns, run.calls, (double)(run.end_ns - start), cpu, server0, server1);
    g_free(run.latency_ns);
    g_free(calls);
    if (run.denied || run.errors)
        printf("  warning: %" G_GUINT64_FORMAT " calls denied and %" G_GUINT64_FORMAT
               " failed of %zu; the figure is not that of an allowed decision\n",
               run.denied, run.errors, run.calls);
    return !run.denied && !run.errors;
}
