/* SPDX-License-Identifier: MIT */
/* sluice block and sluice penalize: per-key policy from a shell, on every process the
 * keyfile's backend shares. */
#include <string.h>

#include "cli.h"

/* A duration as the keyfile writes one ("10m", "1500ms", "0"), in milliseconds;
 * FALSE for anything else. */
static gboolean parse_duration_ms(const char *text, gint64 *out)
{
    static const struct {
        const char *unit;
        gint64 ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    gsize n = strspn(text, "0123456789");
    if (n == 0 || n > 12)
        return FALSE;
    gint64 v = g_ascii_strtoll(text, NULL, 10);
    if (text[n] == '\0')
        return v == 0 && (*out = 0, TRUE);
    for (gsize i = 0; i < G_N_ELEMENTS(units); i++) {
        if (strcmp(text + n, units[i].unit) == 0 &&
            v <= G_GINT64_CONSTANT(3153600000000) / units[i].ms) {
            *out = v * units[i].ms;
            return TRUE;
        }
    }
    return FALSE;
}

static const cli_spec block_spec = {
    "block",
    "NAME",
    1,
    1,
    TRUE,
    "Denies every call of one key of the limit NAME for a while.",
    "--for takes a duration as the keyfile writes one (10m, 90s, 1500ms; at most\n"
    "36500d); 0 lifts a block. A block replaces the one in force, and leaves the\n"
    "key's state as it is (sluice reset forgets both). Without --key it is the\n"
    "calls without a key (every call of a rule with per_key = false). On Redis every\n"
    "process that shares the keyfile's Redis sees it at its next decision; with\n"
    "backend = memory every process keeps its own limits, so there is nothing to\n"
    "block from here. Prints nothing.\n\n"
    "Exit status: 0 done, 2 bad arguments or keyfile, 3 the backend failed.",
};

int cli_block(char **argv)
{
    g_auto(GStrv) args = argv;
    g_autofree char *path = NULL, *key = NULL, *duration = NULL;
    const GOptionEntry entries[] = {
        CLI_OPTION_KEY(key),
        {"for", 'f', 0, G_OPTION_ARG_STRING, &duration,
         "How long, e.g. 10m (0 lifts a block); required", "DURATION"},
        G_OPTION_ENTRY_NULL,
    };
    int rc = cli_parse(&block_spec, entries, &args, &path);
    if (rc >= 0)
        return rc;
    gint64 ms;
    if (!duration)
        return cli_usage(block_spec.command, "missing --for DURATION, e.g. --for 10m");
    if (!parse_duration_ms(duration, &ms))
        return cli_usage(block_spec.command,
                         "--for %s: expected a whole number and a unit (ms s m h d), e.g. 10m, "
                         "at most 36500d; or 0",
                         duration);
    sluice_rule_info rule;
    if ((rc = cli_open(block_spec.command, path, args[1], &rule)) >= 0)
        return rc;
    g_autoptr(GError) error = NULL;
    if (!sluice_block(args[1], key, ms, &error))
        return cli_fail(block_spec.command, error);
    return CLI_EXIT_OK;
}

static const cli_spec penalize_spec = {
    "penalize",
    "NAME PERMITS",
    2,
    2,
    TRUE,
    "Takes PERMITS permits of one key of the limit NAME without a call.",
    "The permits count as admitted now, even past what is left, up to one capacity\n"
    "of debt: the key then waits longer (docs/algorithms.md says how for each\n"
    "algorithm; a concurrency limit is refused). Without --key it is the calls\n"
    "without a key. On Redis every process that shares the keyfile's Redis sees it;\n"
    "with backend = memory every process keeps its own limits, so there is nothing\n"
    "to penalize from here. Prints nothing.\n\n"
    "Exit status: 0 done, 2 bad arguments or keyfile (or a concurrency limit), 3 the\n"
    "backend failed.",
};

int cli_penalize(char **argv)
{
    g_auto(GStrv) args = argv;
    g_autofree char *path = NULL, *key = NULL;
    const GOptionEntry entries[] = {CLI_OPTION_KEY(key), G_OPTION_ENTRY_NULL};
    int rc = cli_parse(&penalize_spec, entries, &args, &path);
    if (rc >= 0)
        return rc;
    guint64 permits;
    if (!g_ascii_string_to_unsigned(args[2], 10, 0, G_MAXINT64, &permits, NULL))
        return cli_usage(penalize_spec.command, "PERMITS %s: expected a whole number, 0 or more",
                         args[2]);
    sluice_rule_info rule;
    if ((rc = cli_open(penalize_spec.command, path, args[1], &rule)) >= 0)
        return rc;
    g_autoptr(GError) error = NULL;
    if (!sluice_penalize(args[1], key, (gint64)permits, &error))
        return cli_fail(penalize_spec.command, error);
    return CLI_EXIT_OK;
}
