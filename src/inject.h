/* SPDX-License-Identifier: MIT */
/* Test-only failure injection (sluice_testing_fail_backend): the next backend calls
 * fail before they reach the backend. */
#ifndef SLUICE_INJECT_H
#define SLUICE_INJECT_H

#include <glib.h>
#include <sluice/error.h>

/* Backend calls still to fail (atomic; sluice__inject_failures sets it). */
extern gint sluice__failures_to_inject;

/* The next count backend calls fail with SLUICE_ERROR_BACKEND and message (NULL:
 * "injected failure"). */
void sluice__inject_failures(guint count, const char *message);

/* The message of the failures asked for (interned: never freed). */
const char *sluice__injected_message(void);

/* TRUE (and *error) when a test asked for this backend call to fail: on the path of
 * every decision, one load when none was asked for. */
static inline gboolean sluice__injected_failure(GError **error)
{
    gint n;
    do {
        n = g_atomic_int_get(&sluice__failures_to_inject);
        if (G_LIKELY(n <= 0))
            return FALSE;
    } while (!g_atomic_int_compare_and_exchange(&sluice__failures_to_inject, n, n - 1));
    g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND, "%s", sluice__injected_message());
    return TRUE;
}

#endif
