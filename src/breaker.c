/* The circuit breaker of a remote backend: stop calling a dead server for a while.
 *
 * Closed: every call goes out. After SLUICE__BREAKER_FAILURES consecutive failures
 * it opens: calls fail at once for a pause (50 ms, doubling up to 1 s); when the
 * pause is over one caller makes a trial call, which closes it on success or
 * reopens it for a longer pause. The closed path reads one atomic integer. */
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

gboolean sluice__breaker_allow(sluice__breaker *b)
{
    if (G_LIKELY(!g_atomic_int_get(&b->open)))
        return TRUE;
    gboolean allow = FALSE;
    g_mutex_lock(&b->lock);
    if (!b->trial && g_get_monotonic_time() >= b->open_until) {
        b->trial = TRUE;
        allow = TRUE;
    }
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

void sluice__breaker_failure(sluice__breaker *b, const char *why)
{
    g_mutex_lock(&b->lock);
    g_atomic_int_inc(&b->failures);
    if (b->open || b->failures >= SLUICE__BREAKER_FAILURES) {
        b->backoff_us = b->backoff_us ? MIN(2 * b->backoff_us, SLUICE__BREAKER_MAX_US)
                                      : SLUICE__BREAKER_FIRST_US;
        b->open_until = g_get_monotonic_time() + b->backoff_us;
        b->trial = FALSE;
        if (!b->open)
            g_warning("%s failed %d times in a row (%s): on_error decides until it answers",
                      b->what, b->failures, why);
        g_atomic_int_set(&b->open, 1);
    }
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
