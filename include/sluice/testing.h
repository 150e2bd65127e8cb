/* SPDX-License-Identifier: MIT */
/** @file
 * Test-only hooks: injected backend failures and a look inside the memory backend.
 * For sluice's own tests and for tests of programs that use it; not for production.
 * (The virtual clock is a supported API: <sluice/clock.h>.) */
#ifndef SLUICE_TESTING_H
#define SLUICE_TESTING_H

#include <glib.h>
#include <sluice/clock.h>
#include <sluice/export.h>

G_BEGIN_DECLS

/** Makes the next `count` backend calls fail with SLUICE_ERROR_BACKEND and
 * `message`, as a broken backend would, so the on_error policies and error
 * callbacks can be tested on any backend. count 0 clears it. */
SLUICE_API void sluice_testing_fail_backend(guint count, const char *message);

/** How many per-key states the memory backend keeps for the limit `name` (states
 * back to full capacity are swept out as the table grows). */
SLUICE_API gsize sluice_testing_memory_keys(const char *name);

G_END_DECLS

#endif
