/* SPDX-License-Identifier: MIT */
/* What the subcommands of the sluice command share: exit codes, options, errors, output. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cli_parse(const cli_spec *spec, const GOptionEntry *entries, char ***argv, char **config)
{
    gboolean help = FALSE;
    const GOptionEntry common[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, config, "The keyfile (default: $SLUICE_CONFIG)",
         "FILE"},
        {"help", 'h', 0, G_OPTION_ARG_NONE, &help, "Show this help and exit", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) context = g_option_context_new(spec->parameters);
    g_autoptr(GError) error = NULL;

    g_option_context_set_help_enabled(context, FALSE); /* ours returns instead of exit() */
    g_option_context_set_summary(context, spec->summary);
    g_option_context_set_description(context, spec->description);
    if (entries)
        g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_add_main_entries(context, spec->config ? common : common + 1, NULL);
    if (!g_option_context_parse_strv(context, argv, &error))
        return cli_usage(spec->command, "%s", error->message);
    if (help) {
        g_autofree char *text = g_option_context_get_help(context, TRUE, NULL);
        fputs(text, stdout);
        return CLI_EXIT_OK;
    }
    int n = (int)g_strv_length(*argv) - 1;
    if (n < spec->min_args)
        return cli_usage(spec->command, "missing %s", spec->parameters);
    if (spec->max_args >= 0 && n > spec->max_args)
        return cli_usage(spec->command, "too many arguments; expected %s", spec->parameters);
    if (!spec->config)
        return -1;
    if (!*config || !**config) {
        g_free(*config);
        *config = g_strdup(g_getenv("SLUICE_CONFIG"));
    }
    if (*config && **config)
        return -1;
    return cli_usage(spec->command,
                     "no keyfile; expected --config FILE (or SLUICE_CONFIG in the environment)");
}

int cli_usage(const char *command, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    g_autofree char *message = g_strdup_vprintf(format, args);
    va_end(args);
    fprintf(stderr, "sluice %s: %s\nTry 'sluice %s --help'.\n", command, message, command);
    return CLI_EXIT_USAGE;
}

int cli_fail(const char *command, const GError *error)
{
    fprintf(stderr, "sluice %s: %s\n", command, error->message);
    if (error->domain == SLUICE_ERROR &&
        (error->code == SLUICE_ERROR_BACKEND || error->code == SLUICE_ERROR_AUTH))
        return CLI_EXIT_BACKEND;
    return CLI_EXIT_USAGE;
}

int cli_open(const char *command, const char *path, const char *name, sluice_rule_info *rule)
{
    g_autoptr(GError) error = NULL;
    if (!sluice_init(path, &error))
        return cli_fail(command, error);
    if (!name || sluice_rule_get(name, rule, NULL))
        return -1;
    g_autofree char *shown = g_utf8_make_valid(name, -1);
    fprintf(stderr, "sluice %s: %s has no rule [limit:%s]\n", command, path, shown);
    return CLI_EXIT_USAGE;
}

GKeyFile *cli_keyfile_load(const char *path, GError **error)
{
    GKeyFile *keyfile = g_key_file_new();
    if (g_key_file_load_from_file(keyfile, path, G_KEY_FILE_NONE, error))
        return keyfile;
    g_key_file_free(keyfile);
    return NULL;
}

char *cli_keyfile_value(GKeyFile *keyfile, const char *group, const char *key)
{
    char *raw = g_key_file_get_value(keyfile, group, key, NULL);
    if (!raw)
        return NULL;
    for (char *p = raw; *p; p++) { /* a # after white space starts a comment */
        if (*p == '#' && (p == raw || g_ascii_isspace(p[-1]))) {
            *p = '\0';
            break;
        }
    }
    return g_strstrip(raw);
}

void cli_append_decision(GString *out, const sluice_decision *d, gboolean with_allowed)
{
    if (with_allowed)
        g_string_append_printf(out, "allowed=%d ", d->allowed ? 1 : 0);
    g_string_append_printf(out,
                           "limit=%" G_GINT64_FORMAT " remaining=%" G_GINT64_FORMAT
                           " retry_after_ms=%" G_GINT64_FORMAT " reset_after_ms=%" G_GINT64_FORMAT,
                           d->limit, d->remaining, d->retry_after_ms, d->reset_after_ms);
    if (d->blocked)
        g_string_append(out, " blocked=1");
}

void cli_append_json_string(GString *out, const char *s)
{
    if (!s) {
        g_string_append(out, "null");
        return;
    }
    g_string_append_c(out, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            g_string_append_printf(out, "\\%c", *p);
        else if (*p < 0x20)
            g_string_append_printf(out, "\\u%04x", *p);
        else
            g_string_append_c(out, (char)*p);
    }
    g_string_append_c(out, '"');
}

void cli_append_json_decision(GString *out, const sluice_decision *d, gboolean with_allowed)
{
    if (with_allowed)
        g_string_append_printf(out, "\"allowed\":%s,", d->allowed ? "true" : "false");
    g_string_append_printf(out,
                           "\"limit\":%" G_GINT64_FORMAT ",\"remaining\":%" G_GINT64_FORMAT
                           ",\"retry_after_ms\":%" G_GINT64_FORMAT
                           ",\"reset_after_ms\":%" G_GINT64_FORMAT,
                           d->limit, d->remaining, d->retry_after_ms, d->reset_after_ms);
    if (d->blocked)
        g_string_append(out, ",\"blocked\":true");
}
