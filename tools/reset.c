/* SPDX-License-Identifier: MIT */
/* sluice reset: forgets a limit's state for one key, so that it is full again. */
#include "cli.h"

#define COMMAND "reset"

static const cli_spec spec = {
    COMMAND,
    "NAME",
    1,
    1,
    TRUE,
    "Forgets the state of the limit NAME for one key, so that it is full again.",
    "Without --key it is the state of calls without a key (the only one of a rule\n"
    "with per_key = false). On Redis the limit's keys are deleted; concurrency\n"
    "permits held are dropped. Other keys keep their state. With backend = shm it\n"
    "is reset in the zone, for every process using it. With backend = memory\n"
    "every process keeps its own limits, so there is nothing to reset from here.\n"
    "Prints nothing.\n\n"
    "Exit status: 0 done, 2 bad arguments or keyfile, 3 the backend failed.",
};

int cli_reset(char **argv)
{
    g_auto(GStrv) args = argv;
    g_autofree char *path = NULL, *key = NULL;
    const GOptionEntry entries[] = {CLI_OPTION_KEY(key), G_OPTION_ENTRY_NULL};
    int rc = cli_parse(&spec, entries, &args, &path);
    if (rc >= 0)
        return rc;
    sluice_rule_info rule;
    if ((rc = cli_open(COMMAND, path, args[1], &rule)) >= 0)
        return rc;
    g_autoptr(GError) error = NULL;
    if (!sluice_reset(args[1], key, &error))
        return cli_fail(COMMAND, error);
    return CLI_EXIT_OK;
}
