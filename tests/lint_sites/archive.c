/* SPDX-License-Identifier: MIT */
/* The member of lint_sites' archive that the program calls: its site must be read. */
#include <sluice/sluice.h>

int export_report(int id);

static int export_busy(int id)
{
    return -id;
}

RATE_LIMITED_FUNCTION(int, export_report, (int id), (id),
                      "report"
                      ".export",
                      export_busy, NULL)
{
    return id;
}
