/* The circuit breaker of a remote backend: stop calling a dead server for a while.
 *
 * Closed: every call goes out. After SLUICE__BREAKER_FAILURES consecutive failures
 * it opens: calls fail at once for a pause (50 ms, doubling up to 500 ms); when the
 * pause is over one caller makes a trial call, which closes it on success or
 * reopens it for a longer pause. Calls that were already out when it opened fail
 * too (each within its own deadline) but leave the pause as it is: only a failed
 * trial lengthens it, so a server that comes back is tried again within the
 * longest pause. The closed path reads one atomic integer. */
#include "breaker.h"

void sluice__breaker_init(sluice__breaker *b, const char *what)
{
    g_mutex_init(&b->lock);
    b->open = 0;
    b->failures = 0;
    b->open_until = 0;
    b->backoff_us = 0;
    b->trial = FALSE;
    b->what = what;
}

void sluice__breaker_clear(sluice__breaker *b)
{
    g_mutex_clear(&b->lock);
}

gboolean sluice__breaker_allow(sluice__breaker *b, gboolean *trial)
{
    *trial = FALSE;
    if (G_LIKELY(!g_atomic_int_get(&b->open)))
        return TRUE;
    g_mutex_lock(&b->lock);
    if (b->open && !b->trial && g_get_monotonic_time() >= b->open_until) {
        b->trial = TRUE;
        *trial = TRUE;
    }
    gboolean allow = *trial || !b->open;
    g_mutex_unlock(&b->lock);
    return allow;
}

void sluice__breaker_success(sluice__breaker *b)
{
    if (G_LIKELY(!g_atomic_int_get(&b->open)) && g_atomic_int_get(&b->failures) == 0)
        return;
    g_mutex_lock(&b->lock);
    if (b->open)
        g_message("%s answers again: deciding there", b->what);
    g_atomic_int_set(&b->failures, 0);
    b->backoff_us = 0;
    b->trial = FALSE;
    g_atomic_int_set(&b->open, 0);
    g_mutex_unlock(&b->lock);
}

void sluice__breaker_failure(sluice__breaker *b, gboolean trial, const char *why)
{
    g_mutex_lock(&b->lock);
    if (b->open && trial) { /* the trial failed: pause longer */
        b->backoff_us = MIN(2 * b->backoff_us, SLUICE__BREAKER_MAX_US);
        b->open_until = g_get_monotonic_time() + b->backoff_us;
        b->trial = FALSE;
    } else if (!b->open && g_atomic_int_add(&b->failures, 1) + 1 >= SLUICE__BREAKER_FAILURES) {
        b->backoff_us = SLUICE__BREAKER_FIRST_US;
        b->open_until = g_get_monotonic_time() + b->backoff_us;
        b->trial = FALSE;
        g_warning("%s failed %d times in a row (%s): on_error decides until it answers", b->what,
                  g_atomic_int_get(&b->failures), why);
        g_atomic_int_set(&b->open, 1);
    } /* else open and not the trial: a call that went out before it opened */
    g_mutex_unlock(&b->lock);
}

gint64 sluice__breaker_retry_ms(sluice__breaker *b)
{
    if (!g_atomic_int_get(&b->open))
        return 0;
    g_mutex_lock(&b->lock);
    gint64 left = MAX(0, b->open_until - g_get_monotonic_time());
    g_mutex_unlock(&b->lock);
    return (left + 999) / 1000;
}
