/* SPDX-License-Identifier: MIT */
/* The rule for a limit's name, written once: the keyfile's [limit:NAME] groups, the
 * API's name arguments and the decorating macros' names all follow it. */
#ifndef SLUICE_LIMIT_NAME_H
#define SLUICE_LIMIT_NAME_H

#include <glib.h>

typedef enum {
    SLUICE__NAME_OK,
    SLUICE__NAME_MISSING,  /* NULL                                   */
    SLUICE__NAME_EMPTY,    /* ""                                     */
    SLUICE__NAME_TOO_LONG, /* more than SLUICE__MAX_NAME_BYTES bytes */
    SLUICE__NAME_NOT_UTF8, /* not valid UTF-8                        */
} sluice__name_problem;

/* What, if anything, keeps name from being a limit's: reads no further than
 * SLUICE__MAX_NAME_BYTES + 1 bytes. */
sluice__name_problem sluice__limit_name_check(const char *name);

#endif
