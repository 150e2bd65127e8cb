/* SPDX-License-Identifier: MIT */
/* What the failover benchmarks share: threads deciding through a master's death, and when
 * decisions on its callers resumed. */
#include "failover.h"

#include <sluice/sluice.h>

static gint next_thread;

static gpointer decide(gpointer p)
{
    failover_run *r = p;
    for (guint i = (guint)g_atomic_int_add(&next_thread, 1); !g_atomic_int_get(&r->stop); i++) {
        guint k = i % r->n_keys;
        g_autoptr(GError) error = NULL;
        gint64 sent = g_get_monotonic_time();
        int result = sluice_acquire(r->name, r->keys ? r->keys[k] : NULL, 1, NULL, &error);
        gint64 received = g_get_monotonic_time();
        g_atomic_int_inc(&r->calls);
        if (result == SLUICE_FAILED)
            g_atomic_int_inc(&r->failed);
        gboolean victim = !r->on_victim || r->on_victim[k];
        g_mutex_lock(&r->lock);
        if (result == SLUICE_FAILED && !victim && r->failed_elsewhere++ == 0)
            r->first_elsewhere = g_strdup(error ? error->message : "?");
        if (victim && r->killed && sent >= r->killed) {
            if (result == SLUICE_FAILED && !r->failing[k])
                r->failing[k] = sent;
            else if (result != SLUICE_FAILED && r->failing[k] && sent > r->failing[k] &&
                     !r->resumed)
                r->resumed = received;
        }
        g_mutex_unlock(&r->lock);
    }
    return NULL;
}

void failover_start(failover_run *r, int threads)
{
    g_assert(threads > 0 && threads <= FAILOVER_MAX_THREADS);
    if (!r->keys)
        r->n_keys = 1;
    r->failing = g_new0(gint64, r->n_keys);
    g_mutex_init(&r->lock);
    r->n_threads = threads;
    for (int i = 0; i < threads; i++)
        r->threads[i] = g_thread_new("decide", decide, r);
}

gint64 failover_killed(failover_run *r)
{
    g_mutex_lock(&r->lock);
    r->killed = g_get_monotonic_time();
    gint64 t = r->killed;
    g_mutex_unlock(&r->lock);
    return t;
}

gint64 failover_wait_resumed(failover_run *r, gint64 timeout_us)
{
    gint64 until = g_get_monotonic_time() + timeout_us, t;
    for (;;) {
        g_mutex_lock(&r->lock);
        t = r->resumed;
        g_mutex_unlock(&r->lock);
        if (t || g_get_monotonic_time() >= until)
            return t;
        g_usleep(5000);
    }
}

void failover_stop(failover_run *r)
{
    g_atomic_int_set(&r->stop, 1);
    for (int i = 0; i < r->n_threads; i++)
        g_thread_join(r->threads[i]);
    r->n_threads = 0;
}

void failover_clear(failover_run *r)
{
    g_mutex_clear(&r->lock);
    g_clear_pointer(&r->failing, g_free);
    g_clear_pointer(&r->first_elsewhere, g_free);
}
