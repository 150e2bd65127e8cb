/* SPDX-License-Identifier: MIT */
/* Test-only hooks of sluice's own suites: injected backend failures and a look
 * inside the memory backend (and the shm zone). They are in no installed library and no installed
 * header: the suites that use them link sluice_internal (tests/CMakeLists.txt), the
 * library's objects with tests/support/testing.c. A program tests itself with the
 * virtual clock (<sluice/clock.h>) and a backend that is down (docs/api.md). */
#ifndef SLUICE_TESTING_H
#define SLUICE_TESTING_H

#include <glib.h>

/* Makes the next `count` backend calls fail with SLUICE_ERROR_BACKEND and
 * `message`, as a broken backend would, so the on_error policies and error
 * callbacks can be tested on any backend. count 0 clears it. */
void sluice_testing_fail_backend(guint count, const char *message);

/* How many per-key states the memory backend keeps for the limit `name` (states
 * back to full capacity are swept out as the table grows). */
gsize sluice_testing_memory_keys(const char *name);

/* The per-key states the in-process backend holds for the limit `name`: the memory
 * backend's (sluice_testing_memory_keys), or with backend = shm the zone's states
 * over the rule's bands, for a keyfile whose one per-key limit is `name`. */
gsize sluice_testing_keys_held(const char *name);

#endif
