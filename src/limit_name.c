/* SPDX-License-Identifier: MIT */
/* The rule for a limit's name: 1 to SLUICE__MAX_NAME_BYTES bytes of UTF-8. */
#include "limit_name.h"

#include <string.h>

#include "value.h"

sluice__name_problem sluice__limit_name_check(const char *name)
{
    if (!name)
        return SLUICE__NAME_MISSING;
    gsize n = strnlen(name, SLUICE__MAX_NAME_BYTES + 1);
    if (n == 0)
        return SLUICE__NAME_EMPTY;
    if (n > SLUICE__MAX_NAME_BYTES)
        return SLUICE__NAME_TOO_LONG;
    if (!g_utf8_validate(name, (gssize)n, NULL))
        return SLUICE__NAME_NOT_UTF8;
    return SLUICE__NAME_OK;
}
