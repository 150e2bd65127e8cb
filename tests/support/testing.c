/* SPDX-License-Identifier: MIT */
/* The test-only hooks of tests/support/testing.h, on the library's internals. */
#include "testing.h"

#include <sluice/sluice.h>

#include "arguments.h"
#include "inject.h"
#include "registry.h"

void sluice_testing_fail_backend(guint count, const char *message)
{
    sluice__inject_failures(count, message);
}

gsize sluice_testing_memory_keys(const char *name)
{
    return sluice__check_name(name, NULL) ? sluice__registry_memory_keys(name) : 0;
}

gsize sluice_testing_keys_held(const char *name)
{
    sluice_zone_info z;
    if (!sluice_zone_get(&z, NULL)) /* not shm */
        return sluice_testing_memory_keys(name);
    guint bands = sluice_rule_bands(name, NULL, 0, NULL);
    return bands > 0 ? (gsize)z.keys / bands : 0;
}
