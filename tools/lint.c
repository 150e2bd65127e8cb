/* sluice lint: checks keyfiles as sluice_init would, listing every problem. */
#include <stdio.h>

#include "cli.h"

#define COMMAND "lint"

static const cli_spec spec = {
    COMMAND,
    "FILE…",
    1,
    -1,
    FALSE,
    "Checks sluice keyfiles without loading them.",
    "Prints \"FILE: ok\" for a valid keyfile; otherwise every problem, one per line\n"
    "in file order, as \"FILE: [GROUP] KEY = VALUE: what is expected\". Nothing is\n"
    "connected to.\n\n"
    "Exit status: 0 every file is valid, 1 a file has problems, 2 a file cannot be read.",
};

int cli_lint(char **argv)
{
    g_auto(GStrv) args = argv;
    int rc = cli_parse(&spec, NULL, &args, NULL);
    if (rc >= 0)
        return rc;
    rc = CLI_EXIT_OK;
    for (char **path = args + 1; *path; path++) {
        g_autoptr(GError) error = NULL;
        if (sluice_config_check(*path, &error)) {
            printf("%s: ok\n", *path);
        } else if (g_error_matches(error, SLUICE_ERROR_DOMAIN, SLUICE_ERROR_CONFIG)) {
            printf("%s\n", error->message);
            rc = MAX(rc, CLI_EXIT_NO);
        } else {
            {
                int failed = cli_fail(COMMAND, error);
                rc = MAX(rc, failed);
            }
        }
    }
    return rc;
}
