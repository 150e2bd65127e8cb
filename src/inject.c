/* SPDX-License-Identifier: MIT */
/* Test-only failure injection (src/inject.h). */
#include "inject.h"

gint sluice__failures_to_inject;
static const char *failure_message; /* atomic; interned: never freed, so read with no lock */

void sluice__inject_failures(guint count, const char *message)
{
    g_atomic_pointer_set(&failure_message, g_intern_string(message ? message : "injected failure"));
    g_atomic_int_set(&sluice__failures_to_inject, (gint)count);
}

const char *sluice__injected_message(void)
{
    return g_atomic_pointer_get(&failure_message);
}
