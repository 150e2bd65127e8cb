/* SPDX-License-Identifier: MIT */
/* The version of the library, from the version.h it was built with. */
#include <sluice/version.h>

const char *sluice_version(void)
{
    return SLUICE_VERSION_STRING;
}
