/* SPDX-License-Identifier: MIT */
/* bench_redis's threads calling sluice_acquire, or hiredis directly (the reference rows): each
 * records the latency of every call into an array allocated before the run. */
#include <string.h>
#include <sys/resource.h>

#include <hiredis/hiredis.h>
#include <sluice/sluice.h>

#include "bench_redis.h"
#include "timing.h"

/* What the threads of one run share. */
typedef struct {
    GMutex lock;
    GCond cond;
    guint ready;        /* threads that made their first call and wait */
    gboolean go;        /* set with deadline_ns: start */
    gint64 deadline_ns; /* on the monotonic clock */
} race;

typedef struct {
    race *race;
    call_kind kind;
    const char *limit;        /* sluice: the limit called */
    const test_redis *server; /* hiredis: where to connect */
    char **evalsha;           /* hiredis: the command sluice sends */
    guint32 *latency_ns;      /* capacity entries, allocated and touched before the run */
    gsize capacity;
    gsize calls;
    guint64 denied, errors;
    gint64 end_ns;
} worker;

/* One call of the worker's kind: SLUICE_ALLOWED, SLUICE_DENIED or SLUICE_FAILED. */
static int call_once(const worker *w, redisContext *ctx, int argc)
{
    static const char *ping[] = {"PING"};
    sluice_decision d;

    if (w->kind == CALL_SLUICE)
        return sluice_acquire(w->limit, NULL, 1, &d, NULL);
    if (w->kind == CALL_SLUICE_PREFETCH)
        return sluice_acquire(PREFETCH_NAME, NULL, 1, &d, NULL);
    redisReply *r = w->kind == CALL_HIREDIS_PING
                        ? redisCommandArgv(ctx, 1, ping, NULL)
                        : redisCommandArgv(ctx, argc, (const char **)(void *)w->evalsha, NULL);
    int verdict = SLUICE_FAILED;
    if (r && w->kind == CALL_HIREDIS_PING)
        verdict = r->type == REDIS_REPLY_STATUS ? SLUICE_ALLOWED : SLUICE_FAILED;
    else if (r && r->type == REDIS_REPLY_INTEGER) /* token_bucket's common path: the bucket */
        verdict = r->integer > 0 ? SLUICE_ALLOWED : SLUICE_DENIED;
    if (r)
        freeReplyObject(r);
    return verdict;
}

/* Calls in a loop until the deadline (or until its latency array is full), recording
 * the latency of every call. Nothing is allocated in the loop but what the call
 * itself allocates (sluice's or hiredis' own work). */
static gpointer work(gpointer p)
{
    worker *w = p;
    race *r = w->race;
    gboolean sluice = w->kind == CALL_SLUICE || w->kind == CALL_SLUICE_PREFETCH;
    redisContext *ctx = sluice ? NULL : bench_connect(w->server);
    int argc = w->evalsha ? (int)g_strv_length(w->evalsha) : 0;

    if (sluice || ctx)
        call_once(w, ctx, argc); /* opens the connection: its own, or sluice's shared one */
    g_mutex_lock(&r->lock);
    r->ready++;
    g_cond_broadcast(&r->cond);
    while (!r->go)
        g_cond_wait(&r->cond, &r->lock);
    gint64 deadline = r->deadline_ns;
    g_mutex_unlock(&r->lock);

    gint64 t = bench_now_ns();
    gsize n = 0;
    guint64 denied = 0, errors = 0;
    while (t < deadline && n < w->capacity && (ctx || sluice)) {
        int verdict = call_once(w, ctx, argc);
        gint64 t1 = bench_now_ns();
        w->latency_ns[n++] = (guint32)MIN(t1 - t, (gint64)G_MAXUINT32);
        denied += verdict == SLUICE_DENIED;
        errors += verdict == SLUICE_FAILED;
        t = t1;
    }
    w->calls = n;
    w->denied = denied;
    w->errors = errors;
    w->end_ns = t;
    if (ctx)
        redisFree(ctx);
    else if (!sluice)
        w->errors = 1; /* no connection */
    return NULL;
}

gboolean measure_threads(const test_redis *s, call_kind kind, const char *limit, char **evalsha,
                         guint threads, figures *f)
{
    race r = {.ready = 0, .go = FALSE};
    worker w[THREADS_MANY];
    GThread *t[THREADS_MANY];
    gsize capacity = LATENCIES / threads;

    g_assert(threads >= 1 && threads <= THREADS_MANY);
    g_mutex_init(&r.lock);
    g_cond_init(&r.cond);
    for (guint i = 0; i < threads; i++) {
        w[i] = (worker){&r,       kind,    limit ? limit : LIMIT_NAME,
                        s,        evalsha, g_new(guint32, capacity),
                        capacity, 0,       0,
                        0,        0};
        memset(w[i].latency_ns, 0, capacity * sizeof(guint32)); /* fault the pages in now */
        t[i] = g_thread_new("bench", work, &w[i]);
    }
    g_mutex_lock(&r.lock);
    while (r.ready < threads)
        g_cond_wait(&r.cond, &r.lock);
    gint64 cpu0 = bench_rusage_ns(RUSAGE_SELF), server0 = bench_process_cpu_ns(s->pid),
           start = bench_now_ns();
    r.deadline_ns = start + RUN_NS;
    r.go = TRUE;
    g_cond_broadcast(&r.cond);
    g_mutex_unlock(&r.lock);

    gint64 end = start;
    gsize calls = 0;
    guint64 denied = 0, errors = 0;
    gboolean full = FALSE;
    for (guint i = 0; i < threads; i++) {
        g_thread_join(t[i]);
        end = MAX(end, w[i].end_ns);
        calls += w[i].calls;
        denied += w[i].denied;
        errors += w[i].errors;
        full |= w[i].calls == w[i].capacity;
    }
    gint64 cpu = bench_rusage_ns(RUSAGE_SELF) - cpu0, server1 = bench_process_cpu_ns(s->pid);
    double elapsed = (double)(end - start);

    guint32 *all = g_new(guint32, MAX(calls, 1));
    gsize n = 0;
    for (guint i = 0; i < threads; i++) {
        memcpy(all + n, w[i].latency_ns, w[i].calls * sizeof(guint32));
        n += w[i].calls;
        g_free(w[i].latency_ns);
    }
    figures_of(f, all, n, elapsed, cpu, server0, server1);
    g_free(all);
    g_mutex_clear(&r.lock);
    g_cond_clear(&r.cond);

    if (kind == CALL_SLUICE_PREFETCH)
        full = FALSE; /* in process most calls are so fast that the arrays end the run */
    if (full)
        printf("  warning: a thread filled its %zu latencies before the end of the run\n",
               capacity);
    if (denied || errors)
        printf("  warning: %" G_GUINT64_FORMAT " calls denied and %" G_GUINT64_FORMAT
               " failed of %zu; the figure is not that of an allowed decision\n",
               denied, errors, calls);
    return !full && !denied && !errors;
}
