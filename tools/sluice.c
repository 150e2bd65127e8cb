/* SPDX-License-Identifier: MIT */
/* The sluice command: lint, try, replay, inspect and reset the limits of a keyfile. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct {
    const char *name;
    const char *summary;
    cli_command_func run;
} command;

static const command commands[] = {
    {"lint", "check a keyfile; list every problem", cli_lint},
    {"acquire", "ask a limit for permits once and print the decision", cli_acquire},
    {"status", "show the state of limits without consuming anything", cli_status},
    {"reset", "forget a limit's state, so that it is full again", cli_reset},
    {"block", "deny every call of a key for a while, on every process", cli_block},
    {"penalize", "take permits of a key without a call, so that it waits longer", cli_penalize},
    {"replay", "replay a traffic trace against a keyfile in virtual time", cli_replay},
    {"zone", "show what a keyfile's shared-memory zone holds, or remove it", cli_zone},
};

static const command *find_command(const char *name)
{
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void usage(FILE *out)
{
    fputs("Usage:\n  sluice COMMAND [OPTION…] [ARGUMENT…]\n  sluice COMMAND --help\n\n"
          "Lint, try, replay, inspect, reset and block the rate limits of a sluice keyfile.\n\n"
          "Commands:\n",
          out);
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fputs("\nOptions:\n  -h, --help     Show this help and exit\n"
          "  --version      Show the version and exit\n\n"
          "Exit status: 0 done (acquire: allowed; lint: valid), 1 acquire denied or lint\n"
          "found problems, 2 bad arguments, keyfile or trace, 3 the backend failed.\n"
          "See sluice(1).\n",
          out);
}

/* Library messages (domain "sluice") are for logs: the command says what failed
 * itself, so it keeps only warnings and worse. */
static void log_handler(const char *domain, GLogLevelFlags level, const char *message,
                        gpointer user_data)
{
    (void)domain;
    (void)user_data;
    if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
        fprintf(stderr, "sluice: %s\n", message);
}

static int run(const command *c, int argc, char **argv)
{
    g_autofree char *prgname = g_strdup_printf("sluice %s", c->name);
    g_set_prgname(prgname); /* the usage line of its --help */
    char **args = g_new0(char *, argc + 1);
    args[0] = g_strdup(prgname);
    for (int i = 1; i < argc; i++)
        args[i] = g_strdup(argv[i]);
    int rc = c->run(args); /* it owns args */
    sluice_shutdown();
    return rc;
}

int main(int argc, char **argv)
{
    g_log_set_handler("sluice", G_LOG_LEVEL_MASK | G_LOG_FLAG_FATAL | G_LOG_FLAG_RECURSION,
                      log_handler, NULL);
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *first = argv[1];
    if (strcmp(first, "-h") == 0 || strcmp(first, "--help") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(first, "--version") == 0) {
        printf("sluice %s\n", sluice_version());
        return CLI_EXIT_OK;
    }
    if (strcmp(first, "help") == 0) {
        if (argc == 2) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        const command *c = find_command(argv[2]);
        if (!c) {
            fprintf(stderr, "sluice: no command '%s'; try 'sluice --help'\n", argv[2]);
            return CLI_EXIT_USAGE;
        }
        char help_option[] = "--help", *help[] = {argv[0], help_option, NULL};
        return run(c, 2, help);
    }
    const command *c = find_command(first);
    if (!c) {
        fprintf(stderr, "sluice: no command '%s'; try 'sluice --help'\n", first);
        return CLI_EXIT_USAGE;
    }
    return run(c, argc - 1, argv + 1);
}
