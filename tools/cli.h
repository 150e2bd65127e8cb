/* SPDX-License-Identifier: MIT */
/* What the subcommands of the sluice command share: exit codes, options, errors, output. */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include <glib.h>
#include <sluice/sluice.h>

/* The exit codes of every subcommand. */
enum {
    CLI_EXIT_OK = 0,      /* done; acquire: allowed; lint: the keyfile is valid       */
    CLI_EXIT_NO = 1,      /* acquire: denied; lint: the keyfile has problems          */
    CLI_EXIT_USAGE = 2,   /* bad arguments, an unreadable or invalid keyfile, a bad trace */
    CLI_EXIT_BACKEND = 3, /* the backend failed (Redis down, refused credentials)     */
};

/* A subcommand: argv (NULL-terminated, its own to g_strfreev) is "sluice NAME" and
 * the arguments. Returns the exit code. */
typedef int (*cli_command_func)(char **argv);

int cli_lint(char **argv);
int cli_acquire(char **argv);
int cli_status(char **argv);
int cli_reset(char **argv);
int cli_replay(char **argv);
int cli_block(char **argv);
int cli_penalize(char **argv);
int cli_zone(char **argv);

/* A subcommand's command line. */
typedef struct {
    const char *command;     /* "acquire"                                          */
    const char *parameters;  /* its arguments in --help: "NAME", "[TRACE]", "FILE…" */
    int min_args, max_args;  /* how many arguments it takes (max -1: any number)   */
    gboolean config;         /* it takes --config FILE (else $SLUICE_CONFIG)        */
    const char *summary;     /* --help: what it does                               */
    const char *description; /* --help: what it prints, and its exit status        */
} cli_spec;

/* The option of the caller's key, for a GOptionEntry array. */
#define CLI_OPTION_KEY(var)                                                                        \
    {                                                                                              \
        "key", 'k', 0, G_OPTION_ARG_STRING, &(var), "The caller's key (default: none)", "K"        \
    }

/* Parses a subcommand's options (entries, -h/--help, and --config when spec->config)
 * out of *argv (g_strfreev-able, as g_option_context_parse_strv), and checks the
 * number of arguments left. With spec->config, *config is the keyfile to use (the
 * option's, else $SLUICE_CONFIG; g_free it). Returns -1 to go on, CLI_EXIT_OK after
 * printing the help, or CLI_EXIT_USAGE after saying what is wrong. */
int cli_parse(const cli_spec *spec, const GOptionEntry *entries, char ***argv, char **config);

/* Says "sluice COMMAND: message" and where to find help on stderr; CLI_EXIT_USAGE. */
int cli_usage(const char *command, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* Says "sluice COMMAND: " and the error's message on stderr; the exit code its code
 * calls for (CLI_EXIT_BACKEND for backend and credential failures, else CLI_EXIT_USAGE). */
int cli_fail(const char *command, const GError *error);

/* sluice_init on path with the real clock or the one already injected, and when
 * name is not NULL the rule of name into *rule. Returns -1 when both worked, else
 * the exit code after saying why (a name with no rule is CLI_EXIT_USAGE). */
int cli_open(const char *command, const char *path, const char *name, sluice_rule_info *rule);

/* The keyfile at path as GKeyFile, for what the library does not report (group
 * order, [sluice] settings); NULL and *error when it cannot be read. */
GKeyFile *cli_keyfile_load(const char *path, GError **error);
/* A value of the keyfile as the library reads it (without its "# comment" and
 * surrounding white space), or NULL when absent. */
char *cli_keyfile_value(GKeyFile *keyfile, const char *group, const char *key);

/* Appends "allowed=1 limit=5 remaining=4 retry_after_ms=-1 reset_after_ms=2000"
 * (without "allowed=..." when with_allowed is FALSE), and " blocked=1" for a
 * decision a block made. */
void cli_append_decision(GString *out, const sluice_decision *d, gboolean with_allowed);
/* Appends s as a JSON string (null for NULL). */
void cli_append_json_string(GString *out, const char *s);
/* Appends the decision's fields as JSON members: "allowed":true,"limit":5,...
 * ("blocked":true for a decision a block made). */
void cli_append_json_decision(GString *out, const sluice_decision *d, gboolean with_allowed);

#endif
