/* SPDX-License-Identifier: MIT */
/* sluice acquire: one decision of a limit, as a decorated call would get it. */
#include <stdio.h>

#include "cli.h"

#define COMMAND "acquire"

static const cli_spec spec = {
    COMMAND,
    "NAME",
    1,
    1,
    TRUE,
    "Asks the limit NAME of a keyfile for permits once, and prints the decision.",
    "Prints allowed=1 limit=5 remaining=4 retry_after_ms=-1 reset_after_ms=2000,\n"
    "or with --json {\"allowed\":true,\"limit\":5,...}. The permits are taken as a\n"
    "decorated call would take them (the rule's wait applies, in real time), and\n"
    "concurrency permits are held until their lease expires (with backend = shm,\n"
    "until this command exits: its process holds them). With backend = memory\n"
    "the limit lives in this process only, so the answer is a first call's.\n\n"
    "Exit status: 0 allowed, 1 denied, 2 bad arguments or keyfile, 3 the backend failed.",
};

int cli_acquire(char **argv)
{
    g_auto(GStrv) args = argv;
    g_autofree char *path = NULL, *key = NULL;
    gint64 permits = 1, wait_ms = G_MININT64; /* G_MININT64: the rule's wait */
    gboolean json = FALSE;
    const GOptionEntry entries[] = {
        CLI_OPTION_KEY(key),
        {"permits", 'p', 0, G_OPTION_ARG_INT64, &permits,
         "How many permits to ask for (default: 1; 0 peeks)", "N"},
        {"wait", 'w', 0, G_OPTION_ARG_INT64, &wait_ms,
         "Wait up to MS for the permits instead of the rule's wait", "MS"},
        {"json", 'j', 0, G_OPTION_ARG_NONE, &json, "Print one JSON object", NULL},
        G_OPTION_ENTRY_NULL,
    };
    int rc = cli_parse(&spec, entries, &args, &path);
    if (rc >= 0)
        return rc;
    const char *name = args[1];
    sluice_rule_info rule;
    if ((rc = cli_open(COMMAND, path, name, &rule)) >= 0)
        return rc;

    g_autoptr(GError) error = NULL;
    sluice_decision d;
    int r = wait_ms == G_MININT64 ? sluice_acquire(name, key, permits, &d, &error)
                                  : sluice_acquire_wait(name, key, permits, wait_ms, &d, &error);
    if (r == SLUICE_FAILED)
        return cli_fail(COMMAND, error);
    g_autoptr(GString) out = g_string_new(NULL);
    if (json) {
        g_string_append_c(out, '{');
        cli_append_json_decision(out, &d, TRUE);
        g_string_append_c(out, '}');
    } else {
        cli_append_decision(out, &d, TRUE);
    }
    puts(out->str);
    return d.allowed ? CLI_EXIT_OK : CLI_EXIT_NO;
}
