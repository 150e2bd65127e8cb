/* SPDX-License-Identifier: MIT */
/* contrib/grafana/sluice-dashboard.json: valid JSON whose every query names only
 * metrics, labels and label values that sluice_stats_prometheus() emits, read from a
 * process that made decisions of every kind against a real redis-server. */
#include "fixture.h"

#include <json-glib/json-glib.h>
#include <string.h>

#ifndef SLUICE_DASHBOARD
#error "SLUICE_DASHBOARD: the path of contrib/grafana/sluice-dashboard.json (tests/CMakeLists.txt)"
#endif

/* ---- the exposition, parsed ------------------------------------------------------------- */

/* metric -> (label -> set of values); a metric without labels has an empty table */
typedef GHashTable exposition;

static void set_free(gpointer p)
{
    g_hash_table_unref(p);
}

static GHashTable *new_set(void)
{
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

static GHashTable *labels_of(exposition *e, const char *metric)
{
    GHashTable *labels = g_hash_table_lookup(e, metric);
    if (!labels) {
        labels = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, set_free);
        g_hash_table_insert(e, g_strdup(metric), labels);
    }
    return labels;
}

static char *family_of(const char *metric, GHashTable *helped);

/* In parse_exposition: unless cond, *problem says why and the parse gives up. */
#define REFUSE_UNLESS(cond, ...)                                                                   \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            *problem = g_strdup_printf(__VA_ARGS__);                                               \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)

/* Parses the text format; every sample line must be `metric{labels} value` or
 * `metric value`, and every family must have # HELP and # TYPE, before its samples; a
 * counter's name ends in _total. NULL and *problem (free it) when not. */
static exposition *parse_exposition(const char *text, GHashTable *helped, char **problem)
{
    g_autoptr(GHashTable) typed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GHashTable) e = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, set_free);
    g_autoptr(GRegex) sample = g_regex_new(
        "^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{(.*)\\})? ([-+0-9.eE]+|[-+]Inf|NaN)$", 0, 0, NULL);
    g_autoptr(GRegex) label =
        g_regex_new("([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\\]|\\\\.)*)\",?", 0, 0, NULL);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        if (!**l)
            continue;
        if (g_str_has_prefix(*l, "# HELP ")) {
            g_auto(GStrv) f = g_strsplit(*l + 7, " ", 2);
            REFUSE_UNLESS(f[1] && *f[1], "HELP without text: %s", *l);
            g_hash_table_add(helped, g_strdup(f[0]));
            continue;
        }
        if (g_str_has_prefix(*l, "# TYPE ")) {
            g_auto(GStrv) f = g_strsplit(*l + 7, " ", 2);
            REFUSE_UNLESS(g_hash_table_contains(helped, f[0]), "TYPE before HELP: %s", *l);
            REFUSE_UNLESS(f[1] && (strcmp(f[1], "counter") == 0 || strcmp(f[1], "gauge") == 0 ||
                                   strcmp(f[1], "histogram") == 0),
                          "unknown type: %s", *l);
            REFUSE_UNLESS(strcmp(f[1], "counter") != 0 || g_str_has_suffix(f[0], "_total"),
                          "a counter without _total: %s", *l);
            g_hash_table_add(typed, g_strdup(f[0]));
            continue;
        }
        g_autoptr(GMatchInfo) m = NULL;
        REFUSE_UNLESS(g_regex_match(sample, *l, 0, &m), "not a sample line: %s", *l);
        g_autofree char *metric = g_match_info_fetch(m, 1);
        g_autofree char *family = family_of(metric, helped);
        REFUSE_UNLESS(g_hash_table_contains(typed, family), "no # HELP and # TYPE before: %s", *l);
        g_autofree char *labels = g_match_info_fetch(m, 2);
        GHashTable *names = labels_of(e, metric);
        g_autoptr(GMatchInfo) lm = NULL;
        gint end = 0;
        for (g_regex_match(label, labels, 0, &lm); g_match_info_matches(lm);
             g_match_info_next(lm, NULL)) {
            char *name = g_match_info_fetch(lm, 1);
            GHashTable *values = g_hash_table_lookup(names, name);
            if (!values)
                g_hash_table_insert(names, g_strdup(name), values = new_set());
            g_hash_table_add(values, g_match_info_fetch(lm, 2));
            g_free(name);
            g_match_info_fetch_pos(lm, 0, NULL, &end);
        }
        REFUSE_UNLESS(end == (gint)strlen(labels), "bad labels: %s", *l);
    }
    return g_steal_pointer(&e);
}

/* The family a sample's metric belongs to (a histogram's _bucket, _sum, _count). */
static char *family_of(const char *metric, GHashTable *helped)
{
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    if (g_hash_table_contains(helped, metric))
        return g_strdup(metric);
    for (guint i = 0; i < G_N_ELEMENTS(suffixes); i++)
        if (g_str_has_suffix(metric, suffixes[i]))
            return g_strndup(metric, strlen(metric) - strlen(suffixes[i]));
    return g_strdup(metric);
}

/* ---- the queries, checked --------------------------------------------------------------- */

/* What is wrong with expr (and its legend, may be NULL), or NULL when every metric
 * it names is in e with # HELP, and every label it names is a label of each of them,
 * with the value it matches exactly. */
static char *check_query(exposition *e, GHashTable *helped, const char *expr, const char *legend)
{
    g_autoptr(GRegex) metric_re = g_regex_new("\\bsluice_[a-z_]+\\b", 0, 0, NULL);
    g_autoptr(GRegex) matcher_re =
        g_regex_new("([a-zA-Z_][a-zA-Z0-9_]*)\\s*(=~|!~|!=|=)\\s*\"([^\"]*)\"", 0, 0, NULL);
    g_autoptr(GRegex) grouping_re = g_regex_new("\\b(?:by|without)\\s*\\(([^)]*)\\)", 0, 0, NULL);
    g_autoptr(GRegex) legend_re =
        g_regex_new("\\{\\{\\s*([a-zA-Z_][a-zA-Z0-9_]*)\\s*\\}\\}", 0, 0, NULL);
    g_autoptr(GRegex) label_values_re =
        g_regex_new("label_values\\(\\s*sluice_[a-z_]+\\s*,\\s*([a-zA-Z_]+)\\s*\\)", 0, 0, NULL);
    g_autoptr(GPtrArray) metrics = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GMatchInfo) m = NULL;
    for (g_regex_match(metric_re, expr, 0, &m); g_match_info_matches(m); g_match_info_next(m, NULL))
        g_ptr_array_add(metrics, g_match_info_fetch(m, 0));
    if (metrics->len == 0)
        return g_strdup_printf("no sluice metric in: %s", expr);
    for (guint i = 0; i < metrics->len; i++) {
        const char *metric = g_ptr_array_index(metrics, i);
        if (!g_hash_table_contains(e, metric))
            return g_strdup_printf("%s is not exported (query: %s)", metric, expr);
        g_autofree char *family = family_of(metric, helped);
        if (!g_hash_table_contains(helped, family))
            return g_strdup_printf("%s has no # HELP", family);
    }

    /* (label, exact value or NULL) pairs */
    g_autoptr(GPtrArray) labels = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) values = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GMatchInfo) mm = NULL;
    for (g_regex_match(matcher_re, expr, 0, &mm); g_match_info_matches(mm);
         g_match_info_next(mm, NULL)) {
        g_autofree char *op = g_match_info_fetch(mm, 2);
        g_ptr_array_add(labels, g_match_info_fetch(mm, 1));
        g_ptr_array_add(values, strcmp(op, "=") == 0 ? g_match_info_fetch(mm, 3) : NULL);
    }
    g_autoptr(GMatchInfo) gm = NULL;
    for (g_regex_match(grouping_re, expr, 0, &gm); g_match_info_matches(gm);
         g_match_info_next(gm, NULL)) {
        g_autofree char *list = g_match_info_fetch(gm, 1);
        g_auto(GStrv) names = g_strsplit(list, ",", -1);
        for (char **n = names; *n; n++) {
            g_ptr_array_add(labels, g_strstrip(g_strdup(*n)));
            g_ptr_array_add(values, NULL);
        }
    }
    g_autoptr(GMatchInfo) vm = NULL;
    if (g_regex_match(label_values_re, expr, 0, &vm)) {
        g_ptr_array_add(labels, g_match_info_fetch(vm, 1));
        g_ptr_array_add(values, NULL);
    }
    g_autoptr(GMatchInfo) lm = NULL;
    for (g_regex_match(legend_re, legend ? legend : "", 0, &lm); g_match_info_matches(lm);
         g_match_info_next(lm, NULL)) {
        g_ptr_array_add(labels, g_match_info_fetch(lm, 1));
        g_ptr_array_add(values, NULL);
    }
    for (guint i = 0; i < labels->len; i++) {
        const char *label = g_ptr_array_index(labels, i);
        const char *value = g_ptr_array_index(values, i);
        for (guint j = 0; j < metrics->len; j++) {
            const char *metric = g_ptr_array_index(metrics, j);
            GHashTable *seen = g_hash_table_lookup(labels_of(e, metric), label);
            if (!seen)
                return g_strdup_printf("%s has no label %s (query: %s)", metric, label, expr);
            if (value && !g_hash_table_contains(seen, value))
                return g_strdup_printf("%s has no %s=\"%s\" (query: %s)", metric, label, value,
                                       expr);
        }
    }
    return NULL;
}

static const char *string_member(JsonObject *o, const char *member)
{
    return json_object_has_member(o, member) ? json_object_get_string_member(o, member) : NULL;
}

/* ---- the process that decides ----------------------------------------------------------- */

static int export_busy(int x)
{
    return -x;
}

RATE_LIMITED_FUNCTION(int, export_report, (int x), (x), "export", export_busy, NULL)
{
    return x;
}

/* Decides allowed, denied (one from the denial cache), allowed from prefetched
 * permits, shadow_denied (by mode = shadow and by a shadow band), denied by a band, waited
 * and degraded on a real redis-server, then error (the server stopped: its breaker opens);
 * returns the exposition, and the server's port in *port. */
static char *decide_every_kind(int *port)
{
    test_redis *server = test_redis_start(NULL);
    *port = server->port;
    g_autofree char *url = test_redis_url(server);
    g_autofree char *contents = g_strdup_printf(
        "[sluice]\nbackend = redis\nredis = %s\ntimeout = 2s\non_error = allow\n"
        "[limit:api]\nlimit = 1\nwindow = 1h\n"
        "[limit:preview]\nlimit = 1\nwindow = 1h\nmode = shadow\n"
        "[limit:queue]\nalgorithm = token_bucket\nlimit = 1\nwindow = 100ms\nwait = 1s\n"
        "[limit:export]\nlimit = 1\nwindow = 1h\n"
        "[limit:bulk]\nalgorithm = token_bucket\nlimit = 1000\nwindow = 1s\nprefetch = 10\n"
        "[limit:search]\nlimit = 10\nwindow = 1h\nbands = 2/1h\nshadow_bands = 1/1h\n",
        url);
    g_autofree char *path = fixture_write_keyfile(contents);
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_init(path, &error), "%s", error ? error->message : "");
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("api", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("api", NULL, 1, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(sluice_acquire("api", NULL, 1, &d, NULL), SLUICE_DENIED); /* cached */
    ck_assert_int_eq(sluice_acquire("preview", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("preview", NULL, 1, &d, NULL), SLUICE_ALLOWED); /* shadow */
    ck_assert_int_eq(sluice_acquire_wait("queue", NULL, 1, 1000, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire_wait("queue", NULL, 1, 1000, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(export_report(7), 7);
    ck_assert_int_eq(export_report(7), -7); /* degraded */
    for (int i = 0; i < 3; i++) /* the first takes 10 permits, the others are handed out */
        ck_assert_int_eq(sluice_acquire("bulk", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    /* bands: the second call passes the shadow band's refusal, the third is the band's */
    ck_assert_int_eq(sluice_acquire("search", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("search", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("search", NULL, 1, &d, NULL), SLUICE_DENIED);
    g_autofree char *closed =
        g_strdup_printf("sluice_breaker_open{node=\"redis 127.0.0.1:%d\"} 0\n", server->port);
    g_autofree char *before = sluice_stats_prometheus();
    ck_assert_msg(strstr(before, closed), "no %s in:\n%s", closed, before);
    test_redis_stop(server);
    for (int i = 0; i < 5; i++) /* the breaker opens after a few */
        ck_assert_int_eq(sluice_acquire("api", "elsewhere", 1, &d, NULL), SLUICE_FAILED);
    char *text = sluice_stats_prometheus();
    sluice_shutdown();
    return text;
}

START_TEST(every_query_names_what_the_exposition_has)
{
    int port;
    g_autofree char *text = decide_every_kind(&port);
    g_autoptr(GHashTable) helped = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autofree char *problem = NULL;
    g_autoptr(GHashTable) e = parse_exposition(text, helped, &problem);
    ck_assert_msg(e, "%s in:\n%s", problem, text);
    /* the process made decisions of every kind: the queries below can see them */
    static const char *const made[] = {
        "sluice_decisions_total{name=\"api\",outcome=\"allowed\"} 1\n",
        "sluice_decisions_total{name=\"api\",outcome=\"denied\"} 2\n",
        "sluice_cached_denials_total{name=\"api\"} 1\n",
        "sluice_decisions_total{name=\"api\",outcome=\"error\"} 5\n",
        "sluice_decisions_total{name=\"preview\",outcome=\"shadow_denied\"} 1\n",
        "sluice_waited_total{name=\"queue\"} 1\n",
        "sluice_prefetched_total{name=\"bulk\"} 2\n",
        "sluice_decisions_total{name=\"search\",outcome=\"shadow_denied\"} 1\n",
        "sluice_decisions_total{name=\"search\",outcome=\"denied\"} 1\n",
        "sluice_function_degraded_total{name=\"export\",function=\"export_report\",site=\"",
    };
    for (guint i = 0; i < G_N_ELEMENTS(made); i++)
        ck_assert_msg(strstr(text, made[i]), "no %s in:\n%s", made[i], text);
    g_autofree char *open =
        g_strdup_printf("sluice_breaker_open{node=\"redis 127.0.0.1:%d\"} 1\n", port);
    ck_assert_msg(strstr(text, open), "no %s in:\n%s", open, text);

    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    ck_assert_msg(json_parser_load_from_file(parser, SLUICE_DASHBOARD, &error), "%s: %s",
                  SLUICE_DASHBOARD, error ? error->message : "");
    JsonObject *dashboard = json_node_get_object(json_parser_get_root(parser));
    ck_assert_ptr_nonnull(dashboard);
    ck_assert_str_eq(string_member(dashboard, "title"), "sluice");

    guint queries = 0;
    JsonArray *panels = json_object_get_array_member(dashboard, "panels");
    ck_assert_uint_ge(json_array_get_length(panels), 6);
    for (guint p = 0; p < json_array_get_length(panels); p++) {
        JsonObject *panel = json_array_get_object_element(panels, p);
        JsonArray *targets = json_object_get_array_member(panel, "targets");
        ck_assert_msg(targets && json_array_get_length(targets) > 0, "panel %s has no query",
                      string_member(panel, "title"));
        for (guint t = 0; t < json_array_get_length(targets); t++) {
            JsonObject *target = json_array_get_object_element(targets, t);
            g_autofree char *wrong = check_query(e, helped, string_member(target, "expr"),
                                                 string_member(target, "legendFormat"));
            ck_assert_msg(!wrong, "panel %s: %s", string_member(panel, "title"), wrong);
            queries++;
        }
    }
    JsonArray *variables = json_object_get_array_member(
        json_object_get_object_member(dashboard, "templating"), "list");
    for (guint v = 0; v < json_array_get_length(variables); v++) {
        JsonObject *variable = json_array_get_object_element(variables, v);
        if (g_strcmp0(string_member(variable, "type"), "query") != 0)
            continue;
        g_autofree char *wrong =
            check_query(e, helped, string_member(variable, "definition"), NULL);
        ck_assert_msg(!wrong, "variable %s: %s", string_member(variable, "name"), wrong);
        queries++;
    }
    ck_assert_uint_ge(queries, 10);
}
END_TEST

/* The checks can fail: an exposition that lacks what a query names. */
START_TEST(a_query_naming_what_is_not_exported_is_refused)
{
    g_autoptr(GHashTable) helped = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autofree char *problem = NULL;
    g_autoptr(GHashTable) e = parse_exposition(
        "# HELP sluice_decisions_total Decisions.\n# TYPE sluice_decisions_total counter\n"
        "sluice_decisions_total{name=\"a\",outcome=\"allowed\"} 1\n",
        helped, &problem);
    ck_assert_msg(e, "%s", problem);
    static const struct {
        const char *expr, *legend, *wrong;
    } cases[] = {
        {"sum by (name, outcome) (rate(sluice_decisions_total{outcome=\"allowed\"}[5m]))",
         "{{name}}", NULL},
        {"sum by (instance) (sluice_decisions_total)", NULL,
         "sluice_decisions_total has no label instance"},
        {"sluice_decisions_total", "{{job}}", "sluice_decisions_total has no label job"},
        {"sluice_decisions_total{outcome=\"error\"}", NULL,
         "sluice_decisions_total has no outcome=\"error\""},
        {"sluice_decisions_total{outcome=~\"err.*\"}", NULL, NULL},
        {"rate(sluice_breaker_open[5m])", NULL, "sluice_breaker_open is not exported"},
        {"up", NULL, "no sluice metric in: up"},
    };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *wrong = check_query(e, helped, cases[i].expr, cases[i].legend);
        if (!cases[i].wrong)
            ck_assert_msg(!wrong, "%s: %s", cases[i].expr, wrong);
        else
            ck_assert_msg(wrong && g_str_has_prefix(wrong, cases[i].wrong), "%s: %s", cases[i].expr,
                          wrong ? wrong : "accepted");
    }

    /* and expositions that break the conventions are refused */
    static const struct {
        const char *text, *wrong;
    } bad[] = {
        {"sluice_unhelped 1\n", "no # HELP and # TYPE before: sluice_unhelped 1"},
        {"# HELP sluice_calls Calls.\n# TYPE sluice_calls counter\nsluice_calls 1\n",
         "a counter without _total: # TYPE sluice_calls counter"},
        {"# TYPE sluice_x_total counter\n", "TYPE before HELP: # TYPE sluice_x_total counter"},
        {"# HELP sluice_x_total\n", "HELP without text: # HELP sluice_x_total"},
        {"# HELP sluice_x_total X.\n# TYPE sluice_x_total counter\nsluice_x_total{a=b} 1\n",
         "bad labels: sluice_x_total{a=b} 1"},
    };
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GHashTable) h = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
        g_autofree char *why = NULL;
        GHashTable *parsed = parse_exposition(bad[i].text, h, &why);
        ck_assert_msg(!parsed, "accepted: %s", bad[i].text);
        ck_assert_str_eq(why, bad[i].wrong);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dashboard");
    TCase *tc = tcase_create("dashboard");
    tcase_add_test(tc, every_query_names_what_the_exposition_has);
    tcase_add_test(tc, a_query_naming_what_is_not_exported_is_refused);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
