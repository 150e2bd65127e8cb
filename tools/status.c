/* SPDX-License-Identifier: MIT */
/* sluice status: the state of limits, read from the backend without consuming. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define COMMAND "status"

/* A window in its largest whole unit: 1h, 90s, 1500ms. */
static void append_window(GString *out, gint64 ms)
{
    static const struct {
        const char *unit;
        gint64 ms;
    } units[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};
    guint u = 0;
    while (ms % units[u].ms != 0)
        u++;
    g_string_append_printf(out, "%" G_GINT64_FORMAT "%s", ms / units[u].ms, units[u].unit);
}

/* The rule's bands, as the keyfile writes them (LIMIT/WINDOW, /BURST when it is not
 * the limit): " bands=1000/1h,20000/1d shadow_bands=5/1s", or with json
 * ',"bands":["1000/1h","20000/1d"],"shadow_bands":["5/1s"]'; nothing without bands. */
static void append_bands(GString *out, const char *name, gboolean json)
{
    sluice_band_info bands[SLUICE_RULE_BANDS_MAX];
    guint n =
        MIN(sluice_rule_bands(name, bands, SLUICE_RULE_BANDS_MAX, NULL), SLUICE_RULE_BANDS_MAX);
    for (int shadow = 0; shadow < 2; shadow++) {
        guint listed = 0;
        for (guint i = 1; i < n; i++) {
            if (bands[i].shadow != shadow)
                continue;
            const char *key = shadow ? "shadow_bands" : "bands";
            if (listed++ == 0)
                g_string_append_printf(out, json ? ",\"%s\":[\"" : " %s=", key);
            else
                g_string_append(out, json ? "\",\"" : ",");
            g_string_append_printf(out, "%" G_GINT64_FORMAT "/", bands[i].limit);
            append_window(out, bands[i].window_ms);
            if (bands[i].burst != bands[i].limit)
                g_string_append_printf(out, "/%" G_GINT64_FORMAT, bands[i].burst);
        }
        if (listed && json)
            g_string_append(out, "\"]");
    }
}

/* Which rule decides key's calls, for a limit with overrides and a key: " rule=override"
 * (own, override, blocked, unlimited), or with json ',"rule":"override"'; else nothing. */
static void append_source(GString *out, const char *name, const char *key, gboolean json)
{
    static const char *const sources[] = {"own", "override", "blocked", "unlimited"};
    sluice_rule_info rule;
    sluice_rule_source source;
    if (!key || sluice_rule_overrides(name, NULL) == 0 ||
        !sluice_rule_get_key(name, key, &rule, &source, NULL))
        return;
    g_string_append_printf(out, json ? ",\"rule\":\"%s\"" : " rule=%s", sources[source]);
}

/* The window and anchor of the rule that decides key's calls (an override's window for
 * an overridden key): " window=1h anchor=first_hit", or with json
 * ',"window_ms":3600000,"anchor":"first_hit"'; no window for an adaptive rule (it takes
 * none), no anchor but for fixed_window. */
static void append_window_anchor(GString *out, const sluice_rule_info *rule, gboolean json)
{
    if (rule->window_ms > 0 && json)
        g_string_append_printf(out, ",\"window_ms\":%" G_GINT64_FORMAT, rule->window_ms);
    else if (rule->window_ms > 0) {
        g_string_append(out, " window=");
        append_window(out, rule->window_ms);
    }
    if (rule->anchor)
        g_string_append_printf(out, json ? ",\"anchor\":\"%s\"" : " anchor=%s", rule->anchor);
}

/* Prints one limit's state; the exit code on failure, else -1. */
static int show(const char *name, const char *key, gboolean json)
{
    sluice_rule_info rule, keys_rule;
    g_autoptr(GError) error = NULL;
    sluice_decision d;
    if (!sluice_rule_get(name, &rule, NULL))
        return CLI_EXIT_USAGE; /* cannot happen: the caller checked */
    if (!rule.per_key)
        key = NULL; /* the limit is shared: that is the state there is */
    if (!sluice_rule_get_key(name, key, &keys_rule, NULL, &error))
        return cli_fail(COMMAND, error); /* a key the library refuses */
    /* a peek that never waits: permits 0 consumes nothing on every backend */
    if (sluice_acquire_wait(name, key, 0, 0, &d, &error) == SLUICE_FAILED)
        return cli_fail(COMMAND, error);
    g_autoptr(GString) out = g_string_new(NULL);
    if (json) {
        g_string_append(out, "{\"name\":");
        cli_append_json_string(out, name);
        g_string_append(out, ",\"key\":");
        cli_append_json_string(out, key);
        g_string_append(out, ",\"algorithm\":");
        cli_append_json_string(out, rule.algorithm);
        append_window_anchor(out, &keys_rule, TRUE);
        g_string_append_c(out, ',');
        cli_append_json_decision(out, &d, FALSE);
        append_source(out, name, key, TRUE);
        append_bands(out, name, TRUE);
        if (rule.warmup_ms > 0)
            g_string_append_printf(out, ",\"warmup_ms\":%" G_GINT64_FORMAT, rule.warmup_ms);
        if (rule.controller) {
            g_string_append(out, ",\"controller\":");
            cli_append_json_string(out, rule.controller);
            g_string_append_printf(
                out, ",\"min_limit\":%" G_GINT64_FORMAT ",\"max_limit\":%" G_GINT64_FORMAT,
                rule.min_limit, rule.limit);
        }
        g_string_append_c(out, '}');
    } else {
        g_string_append_printf(out, "%s %s algorithm=%s", name, key ? key : "-", rule.algorithm);
        append_window_anchor(out, &keys_rule, FALSE);
        g_string_append_c(out, ' ');
        cli_append_decision(out, &d, FALSE);
        append_source(out, name, key, FALSE);
        append_bands(out, name, FALSE);
        if (rule.warmup_ms > 0) {
            g_string_append(out, " warmup=");
            append_window(out, rule.warmup_ms);
        }
        if (rule.controller)
            g_string_append_printf(
                out, " controller=%s min_limit=%" G_GINT64_FORMAT " max_limit=%" G_GINT64_FORMAT,
                rule.controller, rule.min_limit, rule.limit);
    }
    puts(out->str);
    return -1;
}

static const cli_spec spec = {
    COMMAND,
    "[NAME]",
    0,
    1,
    TRUE,
    "Shows the state of the limit NAME, or of every limit of the keyfile, without consuming "
    "anything.",
    "Prints one line per limit, in keyfile order:\n"
    "  NAME KEY algorithm=A window=W limit=L remaining=R retry_after_ms=X reset_after_ms=Y\n"
    "(KEY - for none, and for a rule with per_key = false), or with --json one\n"
    "object per line. window is the rule's (an override's for a key it names;\n"
    "concurrency: how long a lease lives; none for adaptive); fixed_window adds\n"
    "anchor=first_hit or anchor=epoch after it. retry_after_ms is when one permit\n"
    "would pass (-1: now).\n"
    "A rule with bands adds bands=LIMIT/WINDOW[/BURST],... and shadow_bands=...\n"
    "as the keyfile has them; limit and remaining are the band with the fewest\n"
    "remaining. For a limit with overrides ([override:NAME]) and a key, rule=own,\n"
    "override, blocked or unlimited says which rule decides that key's calls.\n"
    "A rule with a warm-up adds warmup=DURATION. An adaptive rule adds\n"
    "controller=C min_limit=N max_limit=M; its limit= is\n"
    "the current limit of the process that reads it.\n"
    "It is read with a peek (permits = 0), which consumes nothing. With backend =\n"
    "shm it is the zone's state, which every process using it shares (sluice zone\n"
    "shows the zone itself); with backend = memory every process keeps its own\n"
    "limits, so this shows a fresh state. An adaptive rule's limit is always its\n"
    "own process's (a running process shows its adaptive limits in\n"
    "sluice_stats_get and sluice_adaptive_limit).\n\n"
    "Exit status: 0 done, 2 bad arguments or keyfile, 3 the backend failed.",
};

int cli_status(char **argv)
{
    g_auto(GStrv) args = argv;
    g_autofree char *path = NULL, *key = NULL;
    gboolean json = FALSE;
    const GOptionEntry entries[] = {
        CLI_OPTION_KEY(key),
        {"json", 'j', 0, G_OPTION_ARG_NONE, &json, "Print one JSON object per limit", NULL},
        G_OPTION_ENTRY_NULL,
    };
    int rc = cli_parse(&spec, entries, &args, &path);
    if (rc >= 0)
        return rc;
    sluice_rule_info rule;
    if ((rc = cli_open(COMMAND, path, args[1], &rule)) >= 0)
        return rc;
    if (args[1])
        return (rc = show(args[1], key, json)) >= 0 ? rc : CLI_EXIT_OK;
    g_autoptr(GError) error = NULL;
    g_autoptr(GKeyFile) keyfile = cli_keyfile_load(path, &error);
    if (!keyfile)
        return cli_fail(COMMAND, error);
    g_auto(GStrv) groups = g_key_file_get_groups(keyfile, NULL);
    for (char **g = groups; *g; g++)
        if (g_str_has_prefix(*g, "limit:") && (rc = show(*g + strlen("limit:"), key, json)) >= 0)
            return rc;
    return CLI_EXIT_OK;
}
