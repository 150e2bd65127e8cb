/* SPDX-License-Identifier: MIT */
/* The asynchronous API: one decision as a GTask on the caller's main context.
 *
 * A request asks the engine without blocking (sluice__engine_ask_async), and when
 * the rule lets it wait it sleeps on a timeout source of the caller's context,
 * never on a thread: a concurrency waiter is also woken when permits are given
 * back. Under a virtual clock it advances the clock instead of waiting, as the
 * blocking API does, so tests get exact answers. */
#include <sluice/async.h>
#include <sluice/error.h>

#include "arguments.h"
#include "async.h"
#include "clock.h"
#include "engine.h"
#include "override.h"

/* One decision in progress: the task's data, touched only on the task's context
 * (waiting_for_release also under release_lock). */
typedef struct {
    sluice__limiter *limiter;
    const sluice__rule *rule;
    char *key;
    gint64 permits;
    gint64 wait_us, deadline; /* deadline: monotonic µs, when wait_us > 0 */
    guint64 seen;             /* releases seen before the last ask (concurrency) */
    gint64 start;             /* for the stats */
    gboolean waited, finished;
    gboolean asking; /* an ask is in flight */
    gint epoch;      /* sluice_shutdowns before it started */
    GSource *timer;  /* the pending retry, or the reservation's due time */
    GSource *cancel; /* fires on the task's context when cancelled */
    gboolean waiting_for_release;
    sluice_decision decision;
} request;

static gint epoch;             /* atomic: bumped by sluice_shutdown; a request of an older
                                * epoch must not touch its limiter or rule again */
static GMutex release_lock;    /* guards release_waiters */
static GList *release_waiters; /* GTask * (a reference each): concurrency waiters */

static void request_free(gpointer p)
{
    request *r = p;
    g_free(r->key);
    g_free(r);
}

static void step(GTask *task);
/* TRUE (and the task completed with an error) when sluice_shutdown ran since the
 * request started: its limiter and rule are gone. */
static gboolean outlived(GTask *task);

/* ---- waking concurrency waiters when permits are given back --------------------- */

static gboolean retry_now(gpointer task)
{
    request *r = g_task_get_task_data(task);
    if (!r->finished && !r->asking && !outlived(task))
        step(task);
    return G_SOURCE_REMOVE;
}

void sluice__async_fork_lock(void)
{
    g_mutex_lock(&release_lock);
}

void sluice__async_fork_unlock(void)
{
    g_mutex_unlock(&release_lock);
}

/* The engine's release hook: every waiter retries on its own context. */
static void released(void)
{
    g_mutex_lock(&release_lock);
    GList *waiters = g_steal_pointer(&release_waiters);
    for (GList *l = waiters; l; l = l->next)
        ((request *)g_task_get_task_data(l->data))->waiting_for_release = FALSE;
    g_mutex_unlock(&release_lock);
    for (GList *l = waiters; l; l = l->next) {
        GTask *task = l->data;
        GSource *idle = g_idle_source_new();
        g_source_set_callback(idle, retry_now, task, g_object_unref); /* takes the ref */
        g_source_attach(idle, g_task_get_context(task));
        g_source_unref(idle);
    }
    g_list_free(waiters);
}

static void wait_for_release(GTask *task)
{
    static gsize hooked;
    if (g_once_init_enter(&hooked)) {
        sluice__engine_on_release(released);
        g_once_init_leave(&hooked, 1);
    }
    request *r = g_task_get_task_data(task);
    g_mutex_lock(&release_lock);
    gboolean missed = sluice__engine_releases() != r->seen;
    if (!missed) {
        release_waiters = g_list_prepend(release_waiters, g_object_ref(task));
        r->waiting_for_release = TRUE;
    }
    g_mutex_unlock(&release_lock);
    if (missed) /* a release came while we asked: ask again at once */
        retry_now(task);
}

static void stop_waiting_for_release(GTask *task)
{
    request *r = g_task_get_task_data(task);
    g_mutex_lock(&release_lock);
    GList *link = r->waiting_for_release ? g_list_find(release_waiters, task) : NULL;
    if (link)
        release_waiters = g_list_delete_link(release_waiters, link);
    r->waiting_for_release = FALSE;
    g_mutex_unlock(&release_lock);
    if (link)
        g_object_unref(task);
}

/* Removes the request's timer and cancellation sources from its context. */
static void drop_sources(request *r)
{
    if (r->timer) {
        g_source_destroy(r->timer);
        g_clear_pointer(&r->timer, g_source_unref);
    }
    if (r->cancel) {
        g_source_destroy(r->cancel);
        g_clear_pointer(&r->cancel, g_source_unref);
    }
}

/* ---- finishing ------------------------------------------------------------------- */

/* Completes the task once: with `outcome` (failure NULL) or with failure. */
static void finish(GTask *task, sluice__outcome outcome, GError *failure)
{
    request *r = g_task_get_task_data(task);
    if (outlived(task)) {
        g_clear_error(&failure);
        return;
    }
    r->finished = TRUE;
    drop_sources(r);
    stop_waiting_for_release(task);
    if (failure && failure->domain == G_IO_ERROR) { /* cancelled: no decision was made */
        r->decision = sluice__engine_refused();
        g_task_return_error(task, failure);
        return;
    }
    int code = sluice__engine_count(r->limiter, NULL, outcome, r->waited, r->start);
    if (failure)
        g_task_return_error(task, failure);
    else
        g_task_return_int(task, code);
}

static gboolean outlived(GTask *task)
{
    request *r = g_task_get_task_data(task);
    if (r->finished || r->epoch == g_atomic_int_get(&epoch))
        return FALSE;
    r->finished = TRUE;
    drop_sources(r);
    r->decision = sluice__engine_refused();
    g_task_return_new_error(task, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED,
                            "sluice_shutdown was called before the decision was made");
    return TRUE;
}

void sluice__async_shutdown(void)
{
    g_atomic_int_inc(&epoch);
    released(); /* waiters retry on their contexts, and find themselves outlived */
}

static gboolean cancelled(GCancellable *cancellable, gpointer task)
{
    (void)cancellable;
    request *r = g_task_get_task_data(task);
    if (!r->finished)
        finish(task, SLUICE__OUTCOME_ERROR,
               g_error_new_literal(G_IO_ERROR, G_IO_ERROR_CANCELLED, "the decision was cancelled"));
    return G_SOURCE_REMOVE;
}

/* ---- asking and waiting ---------------------------------------------------------- */

static gboolean timer_fired(gpointer task)
{
    request *r = g_task_get_task_data(task);
    g_clear_pointer(&r->timer, g_source_unref);
    if (r->finished || outlived(task))
        return G_SOURCE_REMOVE;
    if (r->decision.allowed) /* a reservation that is now due */
        finish(task, SLUICE__OUTCOME_ALLOWED, NULL);
    else
        step(task);
    return G_SOURCE_REMOVE;
}

/* Runs timer_fired at monotonic time `until` (a virtual clock: advances it and runs
 * it from an idle). */
static void wake_at(GTask *task, gint64 until)
{
    request *r = g_task_get_task_data(task);
    GSource *source;
    if (sluice__clock_sleep_injected(until)) {
        source = g_idle_source_new();
    } else {
        gint64 us = MAX(0, until - sluice__clock_now());
        source = g_timeout_source_new((guint)MIN(G_MAXUINT, (us + 999) / 1000));
    }
    g_source_set_callback(source, timer_fired, g_object_ref(task), g_object_unref);
    g_source_attach(source, g_task_get_context(task));
    r->timer = source;
    r->waited = TRUE;
}

static void asked(const sluice__verdict *v, GError *failure, gpointer task)
{
    request *r = g_task_get_task_data(task);
    r->asking = FALSE;
    if (outlived(task)) {
        g_clear_error(&failure);
        g_object_unref(task);
        return;
    }
    if (r->finished) { /* cancelled meanwhile: give back what came too late */
        if (!failure && v->leased > 0)
            sluice__engine_release(r->limiter, r->key, v->leased, SLUICE__CALL_IGNORED);
        g_clear_error(&failure);
        g_object_unref(task);
        return;
    }
    sluice__outcome outcome = sluice__engine_settle(r->limiter, r->rule, v, &r->decision);
    gint64 until;
    sluice__next next = failure ? SLUICE__NEXT_FINISH
                                : sluice__engine_next(r->rule, v, r->wait_us, r->deadline,
                                                      sluice__clock_now, &until);
    if (next == SLUICE__NEXT_FINISH) {
        finish(task, failure ? SLUICE__OUTCOME_ERROR : outcome, failure);
    } else {
        wake_at(task, until);
        if (next == SLUICE__NEXT_RELEASE)
            wait_for_release(task);
    }
    g_object_unref(task);
}

static void step(GTask *task)
{
    request *r = g_task_get_task_data(task);
    if (r->timer) {
        g_source_destroy(r->timer);
        g_clear_pointer(&r->timer, g_source_unref);
    }
    stop_waiting_for_release(task);
    gint64 reserve_us =
        sluice__engine_reserve_us(r->rule, r->wait_us, r->deadline, sluice__clock_now);
    r->seen = sluice__engine_releases();
    r->asking = TRUE;
    sluice__engine_ask_async(r->limiter, r->rule, r->key, r->permits, reserve_us,
                             g_task_get_context(task), asked, g_object_ref(task));
}

void sluice_acquire_async(const char *name, const char *key, gint64 permits,
                          GCancellable *cancellable, GAsyncReadyCallback callback,
                          gpointer user_data)
{
    GTask *task = g_task_new(NULL, cancellable, callback, user_data);
    g_task_set_source_tag(task, sluice_acquire_async);
    request *r = g_new0(request, 1);
    g_task_set_task_data(task, r, request_free);

    GError *error = NULL;
    sluice__limiter *limiter;
    if (!sluice__find(name, key, permits, &limiter, &error)) {
        r->decision = sluice__engine_refused();
        g_task_return_error(task, error);
        g_object_unref(task);
        return;
    }
    const sluice__rule *rule = limiter ? sluice__limiter_rule(limiter) : NULL;
    if (!rule) {
        sluice__engine_unlimited(&r->decision);
        g_task_return_int(task, SLUICE_ALLOWED); /* delivered from an idle */
        g_object_unref(task);
        return;
    }
    r->limiter = limiter;
    r->epoch = g_atomic_int_get(&epoch);
    r->key = rule->per_key ? g_strdup(key) : NULL;
    r->rule = rule = sluice__rule_for_key(rule, r->key);
    r->permits = permits;
    r->wait_us = rule->shadow ? 0 : rule->wait_us;
    r->deadline = r->wait_us > 0 ? sluice__clock_now() + r->wait_us : 0;
    r->start = sluice__engine_timing_start();
    if (cancellable) {
        r->cancel = g_cancellable_source_new(cancellable);
        g_source_set_callback(r->cancel, G_SOURCE_FUNC(cancelled), g_object_ref(task),
                              g_object_unref);
        g_source_attach(r->cancel, g_task_get_context(task));
    }
    sluice__verdict v;
    if (G_UNLIKELY(sluice__override_decides(rule, &v)))
        finish(task, sluice__engine_settle(limiter, rule, &v, &r->decision), NULL);
    else
        step(task);
    g_object_unref(task);
}

int sluice_acquire_finish(GAsyncResult *result, sluice_decision *out, GError **error)
{
    if (!result || !g_task_is_valid(result, NULL) ||
        g_task_get_source_tag(G_TASK(result)) != sluice_acquire_async) {
        if (out)
            *out = sluice__engine_refused();
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT,
                            "result is not the GAsyncResult of sluice_acquire_async");
        return SLUICE_FAILED;
    }
    request *r = g_task_get_task_data(G_TASK(result));
    GError *failure = NULL;
    gssize code = g_task_propagate_int(G_TASK(result), &failure);
    if (out)
        *out = r->decision;
    if (failure) {
        if (out && g_error_matches(failure, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            out->allowed = FALSE;
        g_propagate_error(error, failure);
        return SLUICE_FAILED;
    }
    return (int)code;
}
