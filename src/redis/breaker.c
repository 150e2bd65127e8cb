/* SPDX-License-Identifier: MIT */
/* The circuit breaker of a remote backend: stop calling a dead server for a while.
 *
 * Closed: every call goes out. After SLUICE__BREAKER_FAILURES consecutive failures
 * it opens: calls fail at once for a pause (50 ms, doubling up to 500 ms); when the
 * pause is over one caller makes a trial call, which closes it on success or
 * reopens it for a longer pause. Calls that were already out when it opened fail
 * too (each within its own deadline) but leave the pause as it is: only a failed
 * trial lengthens it, so a server that comes back is tried again within the
 * longest pause. The closed path reads one atomic integer, and a refused call
 * takes no lock either: threads that pile up on a dead server never queue behind
 * each other. */
#include "redis/breaker.h"

#include <string.h>

#include <sluice/error.h>

/* Distinct failure texts kept for refusals; past this many the last one stays. */
#define MAX_SEEN 64

void sluice__breaker_init(sluice__breaker *b, const char *what)
{
    g_mutex_init(&b->lock);
    b->open = 0;
    b->failures = 0;
    b->open_until = 0;
    b->backoff_us = 0;
    b->trial = 0;
    b->what = what;
    b->last = NULL;
    b->seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

void sluice__breaker_clear(sluice__breaker *b)
{
    g_mutex_clear(&b->lock);
    g_clear_pointer(&b->seen, g_hash_table_unref);
    b->last = NULL;
}

static gint64 open_until(sluice__breaker *b)
{
    return __atomic_load_n(&b->open_until, __ATOMIC_ACQUIRE);
}

/* With the lock held: refuse calls for backoff_us from now. */
static void pause_calls(sluice__breaker *b)
{
    __atomic_store_n(&b->open_until, g_get_monotonic_time() + b->backoff_us, __ATOMIC_RELEASE);
    g_atomic_int_set(&b->trial, 0);
    g_atomic_int_set(&b->open, 1);
}

gboolean sluice__breaker_allow(sluice__breaker *b, gboolean *trial)
{
    *trial = FALSE;
    if (G_LIKELY(!g_atomic_int_get(&b->open)))
        return TRUE;
    if (g_get_monotonic_time() < open_until(b))
        return FALSE;
    *trial = g_atomic_int_compare_and_exchange(&b->trial, 0, 1);
    return *trial || !g_atomic_int_get(&b->open);
}

void sluice__breaker_success(sluice__breaker *b)
{
    if (G_LIKELY(!g_atomic_int_get(&b->open)) && g_atomic_int_get(&b->failures) == 0)
        return;
    g_mutex_lock(&b->lock);
    gboolean was_open = b->open;
    g_atomic_int_set(&b->failures, 0);
    b->backoff_us = 0;
    g_atomic_int_set(&b->trial, 0);
    g_atomic_int_set(&b->open, 0);
    g_mutex_unlock(&b->lock);
    if (was_open)
        g_message("%s answers again: deciding there", b->what);
}

/* With the lock held: why, kept until the breaker is cleared. */
static const char *intern(sluice__breaker *b, const char *why)
{
    gpointer kept = g_hash_table_lookup(b->seen, why);
    if (kept)
        return kept;
    if (g_hash_table_size(b->seen) >= MAX_SEEN)
        return g_atomic_pointer_get(&b->last);
    char *copy = g_strdup(why);
    g_hash_table_insert(b->seen, copy, copy);
    return copy;
}

void sluice__breaker_failure(sluice__breaker *b, gboolean trial, const char *why)
{
    gsize n = strlen(b->what);
    if (strncmp(why, b->what, n) == 0 && strncmp(why + n, ": ", 2) == 0)
        why += n + 2; /* "redis HOST:PORT: EVALSHA: timed out" -> "EVALSHA: timed out" */
    gint opened = 0;
    g_mutex_lock(&b->lock);
    g_atomic_pointer_set(&b->last, intern(b, why));
    if (b->open && trial) { /* the trial failed: pause longer */
        b->backoff_us = MIN(2 * b->backoff_us, SLUICE__BREAKER_MAX_US);
        pause_calls(b);
    } else if (!b->open && g_atomic_int_add(&b->failures, 1) + 1 >= SLUICE__BREAKER_FAILURES) {
        b->backoff_us = SLUICE__BREAKER_FIRST_US;
        pause_calls(b);
        opened = g_atomic_int_get(&b->failures);
    } /* else open and not the trial: a call that went out before it opened */
    g_mutex_unlock(&b->lock);
    if (opened)
        g_warning("%s failed %d times in a row (%s): on_error decides until it answers", b->what,
                  opened, why);
}

void sluice__breaker_refuse(sluice__breaker *b, GError **error)
{
    gint64 left = open_until(b) - g_get_monotonic_time();
    left = MAX(0, left);
    const char *last = g_atomic_pointer_get(&b->last);
    g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND,
                "%s: failing (%s); next try in %" G_GINT64_FORMAT " ms", b->what, last ? last : "?",
                (left + 999) / 1000);
}

gboolean sluice__breaker_is_open(sluice__breaker *b)
{
    return g_atomic_int_get(&b->open) != 0;
}
