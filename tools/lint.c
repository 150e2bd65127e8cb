/* SPDX-License-Identifier: MIT */
/* sluice lint: checks keyfiles as sluice_init would, and against the names programs decorate. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "sites.h"

#define COMMAND "lint"

static const cli_spec spec = {
    COMMAND,
    "FILE…",
    1,
    -1,
    FALSE,
    "Checks sluice keyfiles without loading them.",
    "Prints \"FILE: ok\" for a valid keyfile, then its overrides, one per line in\n"
    "file order, as \"FILE: [override:NAME] KEY = VALUE: what it does\"; otherwise\n"
    "every problem, one per line in file order, as \"FILE: [GROUP] KEY = VALUE: what\n"
    "is expected\". Nothing is connected to.\n\n"
    "With --program, a valid keyfile is also checked against the decorated functions\n"
    "(RATE_LIMITED*) of the built programs and shared libraries, read from their\n"
    "files without running them: each decorated name with no rule\n"
    "(\"SOURCE:LINE: guard \\\"login\\\": no rule [limit:login] in FILE\") and each rule\n"
    "no decorated function uses (\"FILE: [limit:logn]: no decorated function of\n"
    "PROGRAM uses it\") is a problem.\n\n"
    "Exit status: 0 every file is valid, 1 a file has problems, 2 a file cannot be read.",
};

/* name, shown on one line: C escapes for control characters, quotes and backslashes. */
static char *shown(const char *name)
{
    static char high[129]; /* UTF-8 stays as it is */
    if (!high[0])
        for (int i = 0; i < 128; i++)
            high[i] = (char)(0x80 + i);
    g_autofree char *valid = g_utf8_make_valid(name, -1);
    return g_strescape(valid, high);
}

static int by_place(gconstpointer a, gconstpointer b)
{
    const cli_site *x = *(cli_site *const *)a, *y = *(cli_site *const *)b;
    int c = strcmp(x->file, y->file);
    if (c == 0)
        c = (x->line > y->line) - (x->line < y->line);
    if (c == 0)
        c = strcmp(x->spelling, y->spelling);
    if (c == 0)
        c = g_strcmp0(x->function, y->function);
    return c;
}

/* The decorated places of every program, sorted by place, each once (a site
 * linked into a program and a library it loads is one site); NULL after saying why
 * one cannot be read. */
static GPtrArray *read_sites(char **programs)
{
    g_autoptr(GPtrArray) sites = g_ptr_array_new_with_free_func((GDestroyNotify)cli_site_free);
    for (char **p = programs; *p; p++) {
        g_autoptr(GError) error = NULL;
        guint before = sites->len;
        if (!cli_sites_read(*p, sites, &error)) {
            cli_fail(COMMAND, error);
            return NULL;
        }
        if (sites->len == before)
            fprintf(stderr,
                    "sluice " COMMAND ": %s: no decorated function found (no section "
                    "sluice_sites)\n",
                    *p);
    }
    g_ptr_array_sort(sites, by_place);
    for (guint i = 1; i < sites->len;)
        if (by_place(&g_ptr_array_index(sites, i - 1), &g_ptr_array_index(sites, i)) == 0)
            g_ptr_array_remove_index(sites, i);
        else
            i++;
    return g_steal_pointer(&sites);
}

/* The edit distance of a and b when at most 2 (with both at most 64 bytes), else 3. */
static guint distance(const char *a, const char *b)
{
    gsize m = strlen(a), n = strlen(b);
    if (m > 64 || n > 64 || (m > n ? m - n : n - m) > 2)
        return 3;
    guint row[65];
    for (gsize j = 0; j <= n; j++)
        row[j] = (guint)j;
    for (gsize i = 1; i <= m; i++) {
        guint diagonal = row[0];
        row[0] = (guint)i;
        for (gsize j = 1; j <= n; j++) {
            guint above = row[j];
            row[j] = MIN(MIN(row[j] + 1, row[j - 1] + 1), diagonal + (a[i - 1] != b[j - 1]));
            diagonal = above;
        }
    }
    return MIN(row[n], 3);
}

/* The rule of rules no site uses that name is closest to (edit distance 1 or 2), or NULL. */
static const char *nearest(const char *name, GPtrArray *rules, GHashTable *used)
{
    const char *best = NULL;
    guint best_distance = 3;
    for (guint i = 0; i < rules->len; i++) {
        const char *rule = g_ptr_array_index(rules, i);
        guint d = g_hash_table_contains(used, rule) ? 3 : distance(name, rule);
        if (d < best_distance && d < strlen(name)) {
            best = rule;
            best_distance = d;
        }
    }
    return best;
}

/* Says every decorated name of sites with no rule in the keyfile at path, and every
 * rule of it no site uses. Returns CLI_EXIT_OK or CLI_EXIT_NO, or CLI_EXIT_USAGE
 * after saying why the keyfile cannot be read. */
static int check_sites(const char *path, char **programs, GPtrArray *sites)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GKeyFile) keyfile = cli_keyfile_load(path, &error);
    if (!keyfile)
        return cli_fail(COMMAND, error);
    g_auto(GStrv) groups = g_key_file_get_groups(keyfile, NULL);
    g_autoptr(GPtrArray) rules = g_ptr_array_new();
    g_autoptr(GHashTable) has_rule = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) used = g_hash_table_new(g_str_hash, g_str_equal);
    for (char **g = groups; *g; g++)
        if (g_str_has_prefix(*g, "limit:")) {
            g_ptr_array_add(rules, *g + strlen("limit:"));
            g_hash_table_add(has_rule, *g + strlen("limit:"));
        }
    for (guint i = 0; i < sites->len; i++) {
        const cli_site *site = g_ptr_array_index(sites, i);
        if (site->name && g_hash_table_contains(has_rule, site->name))
            g_hash_table_add(used, site->name);
    }

    int rc = CLI_EXIT_OK;
    for (guint i = 0; i < sites->len; i++) {
        const cli_site *site = g_ptr_array_index(sites, i);
        g_autofree char *spelling = g_utf8_make_valid(site->spelling, -1);
        g_autofree char *where = site->function
                                     ? g_strdup_printf("%s() %s", site->function, spelling)
                                     : g_strdup_printf("guard %s", spelling);
        if (!site->name) {
            printf("%s:%d: %s: not a string literal, so sluice lint cannot check it\n", site->file,
                   site->line, where);
            continue;
        }
        if (g_hash_table_contains(has_rule, site->name))
            continue;
        g_autofree char *name = shown(site->name);
        const char *close = nearest(site->name, rules, used);
        g_autofree char *hint = close ? shown(close) : NULL;
        printf("%s:%d: %s: no rule [limit:%s] in %s%s%s%s\n", site->file, site->line, where, name,
               path, hint ? "; did you mean [limit:" : "", hint ? hint : "", hint ? "]?" : "");
        rc = CLI_EXIT_NO;
    }
    g_autofree char *of = g_strjoinv(", ", programs);
    for (guint i = 0; i < rules->len; i++) {
        const char *rule = g_ptr_array_index(rules, i);
        if (g_hash_table_contains(used, rule))
            continue;
        g_autofree char *name = shown(rule);
        printf("%s: [limit:%s]: no decorated function of %s uses it\n", path, name, of);
        rc = CLI_EXIT_NO;
    }
    return rc;
}

/* Lists the overrides of the valid keyfile at path, in file order: "FILE: [override:NAME]
 * KEY = VALUE: what it does"; a key given twice, once, with the value read (the last). */
static void list_overrides(const char *path)
{
    g_autoptr(GKeyFile) keyfile = cli_keyfile_load(path, NULL);
    if (!keyfile)
        return;
    g_auto(GStrv) groups = g_key_file_get_groups(keyfile, NULL);
    for (char **g = groups; *g; g++) {
        if (!g_str_has_prefix(*g, "override:"))
            continue;
        g_autofree char *limit_group = g_strconcat("limit:", *g + strlen("override:"), NULL);
        g_autofree char *limit = cli_keyfile_value(keyfile, limit_group, "limit");
        g_autofree char *window = cli_keyfile_value(keyfile, limit_group, "window");
        g_autofree char *burst = cli_keyfile_value(keyfile, limit_group, "burst");
        g_autofree char *name = shown(*g);
        g_auto(GStrv) keys = g_key_file_get_keys(keyfile, *g, NULL, NULL);
        for (char **k = keys; k && *k; k++) {
            if (g_strv_contains((const char *const *)k + 1, *k))
                continue; /* given again below: the last value is the one read, listed there */
            g_autofree char *value = cli_keyfile_value(keyfile, *g, *k);
            g_autofree char *key = shown(*k);
            g_autofree char *own =
                g_strdup_printf("instead of %s/%s%s%s", limit, window ? window : "1m",
                                burst ? "/" : "", burst ? burst : "");
            const char *what = strcmp(value, "blocked") == 0     ? "always denied"
                               : strcmp(value, "unlimited") == 0 ? "never limited"
                                                                 : own;
            printf("%s: [%s] %s = %s: %s\n", path, name, key, value, what);
        }
    }
}

int cli_lint(char **argv)
{
    g_auto(GStrv) programs = NULL;
    const GOptionEntry entries[] = {
        {"program", 'p', 0, G_OPTION_ARG_FILENAME_ARRAY, &programs,
         "Check against the decorated names of this built program or shared library "
         "(repeatable)",
         "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    g_auto(GStrv) args = argv;
    int rc = cli_parse(&spec, entries, &args, NULL);
    if (rc >= 0)
        return rc;
    g_autoptr(GPtrArray) sites = programs ? read_sites(programs) : NULL;
    if (programs && !sites)
        return CLI_EXIT_USAGE;
    rc = CLI_EXIT_OK;
    for (char **path = args + 1; *path; path++) {
        g_autoptr(GError) error = NULL;
        int checked = CLI_EXIT_OK;
        if (sluice_config_check(*path, &error)) {
            if (sites)
                checked = check_sites(*path, programs, sites);
            if (checked == CLI_EXIT_OK) {
                printf("%s: ok\n", *path);
                list_overrides(*path);
            }
        } else if (g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG)) {
            printf("%s\n", error->message);
            checked = CLI_EXIT_NO;
        } else {
            checked = cli_fail(COMMAND, error);
        }
        rc = MAX(rc, checked);
    }
    return rc;
}
