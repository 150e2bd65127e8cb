/* SPDX-License-Identifier: MIT */
/* The member of lint_sites' archive that nothing calls: not linked, so no site read. */
#include <sluice/sluice.h>

int never_linked(void);

static int nothing(void)
{
    return 0;
}

RATE_LIMITED_FUNCTION(int, never_linked, (void), (), "never.linked", nothing, NULL)
{
    return 1;
}
