/* SPDX-License-Identifier: MIT */
/* The clock of every decision and of waiting callers: monotonic, or the virtual one
 * of sluice_clock_set. */
#include "clock.h"

#include <sluice/clock.h>

#include "counter_clock.h"

typedef struct {
    sluice_clock_now_func now;
    sluice_clock_sleep_func sleep;
    gpointer user_data;
} clock_hook;

/* NULL: the real clock. Hooks are set rarely and kept until exit, so a reader
 * that loaded one can use it without a lock. */
static clock_hook *hook;
static GSList
    *retired; /* hooks replaced since: still reachable, never freed (set a few times a run) */
static GMutex retired_lock;

/* sluice__clock_watch: -1 while watching for a read, its nanoseconds once made, 0
 * when not watching. */
static __thread __attribute__((tls_model("initial-exec"))) gint64 watched_ns;

gint64 sluice__clock_now(void)
{
    clock_hook *h = g_atomic_pointer_get(&hook);
    if (G_UNLIKELY(h != NULL))
        return h->now(h->user_data);
    gint64 ns = sluice__monotonic_ns(); /* what g_get_monotonic_time reads, in ns */
    if (G_UNLIKELY(watched_ns < 0))
        watched_ns = ns;
    return ns / 1000;
}

gint64 sluice_clock_now(void)
{
    return sluice__clock_now();
}

void sluice__clock_watch(void)
{
    watched_ns = -1;
}

gint64 sluice__clock_watched_ns(void)
{
    gint64 ns = watched_ns;
    watched_ns = 0;
    return ns > 0 ? ns : -1;
}

gboolean sluice__clock_injected(void)
{
    return g_atomic_pointer_get(&hook) != NULL;
}

gboolean sluice__clock_sleep_injected(gint64 until_us)
{
    clock_hook *h = g_atomic_pointer_get(&hook);
    if (!h)
        return FALSE;
    if (h->sleep)
        h->sleep(until_us, h->user_data);
    return TRUE;
}

void sluice_clock_set(sluice_clock_now_func now, sluice_clock_sleep_func sleep, gpointer user_data)
{
    clock_hook *h = NULL;
    if (now) {
        h = g_new(clock_hook, 1);
        *h = (clock_hook){now, sleep, user_data};
    }
    /* the old hook is kept: a thread may still be reading it */
    g_mutex_lock(&retired_lock);
    retired = g_slist_prepend(retired, g_atomic_pointer_exchange(&hook, h));
    g_mutex_unlock(&retired_lock);
}
