/* SPDX-License-Identifier: MIT */
/* Reading the stats: one limit's, one decorated function's, and all as Prometheus text. */
#include <sluice/descriptor.h>
#include <sluice/error.h>
#include <sluice/stats.h>

#include <string.h>

#include "adaptive/adaptive.h"
#include "arguments.h"
#include "engine.h"
#include "registry.h"
#include "counters.h"
#include "value.h"

gboolean sluice_stats_get(const char *name, sluice_stats *out, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    if (out)
        memset(out, 0, sizeof *out);
    if (!sluice__check_name(name, error))
        return FALSE;
    if (!out) {
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT,
                            "out is NULL; expected where to write the stats");
        return FALSE;
    }
    sluice__limiter *limiter = sluice__registry_find(name);
    if (limiter) {
        sluice__counters_read(limiter->counters, out);
        const sluice__rule *rule = sluice__limiter_rule(limiter);
        if (rule && rule->algorithm == SLUICE__ADAPTIVE)
            out->adaptive_limit = sluice__adaptive_current(limiter, rule);
        return TRUE;
    }
    if (!sluice__registry_active()) {
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED,
                            sluice_strerror(SLUICE_ERROR_NOT_INITIALIZED));
        return FALSE;
    }
    return TRUE; /* a name that never decided */
}

guint sluice_stats_bands(const char *name, sluice_band_stats *out, guint n, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, 0);
    if (!sluice__check_name(name, error))
        return 0;
    sluice__limiter *limiter = sluice__registry_find(name);
    const sluice__rule *rule = limiter ? sluice__limiter_rule(limiter) : NULL;
    if (!limiter && !sluice__registry_active())
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED,
                            sluice_strerror(SLUICE_ERROR_NOT_INITIALIZED));
    if (!rule)
        return 0;
    guint64 refused[1 + SLUICE__MAX_BANDS];
    sluice__counters_read_refused(limiter->counters, refused);
    guint count = sluice__rule_bands(rule);
    for (guint i = 0; out && i < MIN(n, count); i++) {
        sluice__band b = sluice__rule_band(rule, i);
        out[i] = (sluice_band_stats){b.limit, b.burst, b.window_us / 1000, i > rule->n_bands,
                                     refused[i]};
    }
    return count;
}

/* The stats of a descriptor into out: zeros before it is first bound. */
static void descriptor_stats(const sluice_descriptor *d, sluice_stats *out)
{
    /* (d is const: GLib's g_atomic_pointer_get wants a pointer it may write through) */
    const sluice_descriptor_private *bound = __atomic_load_n(&d->priv, __ATOMIC_SEQ_CST);
    if (bound)
        sluice__counters_read(bound->counters, out);
    else
        memset(out, 0, sizeof *out);
}

void sluice_descriptor_stats(const sluice_descriptor *descriptor, sluice_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (descriptor)
        descriptor_stats(descriptor, out);
}

/* ---- the Prometheus text format ------------------------------------------------ */

/* Appends s as a label value: backslash, double quote and newline escaped. */
static void append_label(GString *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            g_string_append(out, "\\\\");
        else if (*s == '"')
            g_string_append(out, "\\\"");
        else if (*s == '\n')
            g_string_append(out, "\\n");
        else
            g_string_append_c(out, *s);
    }
}

/* One limit or decorated function: its name, labels and a copy of its stats. */
typedef struct {
    char *labels; /* name="..." and, for a function, function="...",site="..." */
    sluice_stats stats;
} series;

static void series_free(gpointer p)
{
    series *s = p;
    g_free(s->labels);
    g_free(s);
}

static series *series_new(const char *name, const sluice_descriptor *d, const sluice_stats *stats)
{
    series *s = g_new0(series, 1);
    GString *labels = g_string_new("name=\"");
    append_label(labels, name);
    g_string_append_c(labels, '"');
    if (d) {
        g_string_append(labels, ",function=\"");
        append_label(labels, d->function ? d->function : "");
        g_string_append(labels, "\",site=\"");
        append_label(labels, d->file ? d->file : "");
        g_string_append_printf(labels, ":%d\"", d->line);
    }
    s->labels = g_string_free(labels, FALSE);
    s->stats = *stats;
    return s;
}

static gint by_labels(gconstpointer a, gconstpointer b)
{
    return strcmp((*(series *const *)a)->labels, (*(series *const *)b)->labels);
}

static void add_limiter(sluice__limiter *limiter, gpointer limits)
{
    sluice_stats sum;
    sluice__counters_read(limiter->counters, &sum);
    g_ptr_array_add(limits, series_new(limiter->name, NULL, &sum));
}

static void add_descriptor(const sluice_descriptor *d, gboolean has_rule, gpointer functions)
{
    (void)has_rule;
    if (d->name && *d->name && g_utf8_validate(d->name, -1, NULL)) {
        sluice_stats sum;
        descriptor_stats(d, &sum);
        g_ptr_array_add(functions, series_new(d->name, d, &sum));
    }
}

static void header(GString *out, const char *metric, const char *type, const char *help)
{
    g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", metric, help, metric, type);
}

static void outcomes(GString *out, const char *metric, GPtrArray *all)
{
    for (guint i = 0; i < all->len; i++) {
        const series *s = g_ptr_array_index(all, i);
        const struct {
            const char *outcome;
            guint64 n;
        } rows[] = {{"allowed", s->stats.allowed},
                    {"denied", s->stats.denied},
                    {"shadow_denied", s->stats.shadow_denied},
                    {"error", s->stats.errors}};
        for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
            g_string_append_printf(out, "%s{%s,outcome=\"%s\"} %" G_GUINT64_FORMAT "\n", metric,
                                   s->labels, rows[r].outcome, rows[r].n);
    }
}

/* One counter per series, read at `offset` in sluice_stats. */
static void counter(GString *out, const char *metric, GPtrArray *all, gsize offset)
{
    for (guint i = 0; i < all->len; i++) {
        const series *s = g_ptr_array_index(all, i);
        guint64 n = *(const guint64 *)((const char *)&s->stats + offset);
        g_string_append_printf(out, "%s{%s} %" G_GUINT64_FORMAT "\n", metric, s->labels, n);
    }
}

static void histogram(GString *out, const char *metric, GPtrArray *all)
{
    for (guint i = 0; i < all->len; i++) {
        const series *s = g_ptr_array_index(all, i);
        guint64 cumulative = 0;
        for (guint b = 0; b < SLUICE_STATS_BUCKETS; b++) {
            cumulative += s->stats.latency[b];
            if (b + 1 < SLUICE_STATS_BUCKETS)
                g_string_append_printf(out, "%s_bucket{%s,le=\"%.6f\"} %" G_GUINT64_FORMAT "\n",
                                       metric, s->labels, (double)(1u << b) / 1e6, cumulative);
            else
                g_string_append_printf(out, "%s_bucket{%s,le=\"+Inf\"} %" G_GUINT64_FORMAT "\n",
                                       metric, s->labels, cumulative);
        }
        g_string_append_printf(out, "%s_sum{%s} %.9f\n", metric, s->labels,
                               (double)s->stats.latency_ns_sum / 1e9);
        g_string_append_printf(out, "%s_count{%s} %" G_GUINT64_FORMAT "\n", metric, s->labels,
                               cumulative);
    }
}

/* The sluice_band_refusals_total series of a limiter whose rule has bands, one per
 * band in keyfile order, as one series (labels: the name; stats unused). */
static void add_bands(sluice__limiter *limiter, gpointer banded)
{
    const sluice__rule *rule = sluice__limiter_rule(limiter);
    if (!rule || sluice__rule_bands(rule) == 1)
        return;
    guint64 refused[1 + SLUICE__MAX_BANDS];
    sluice__counters_read_refused(limiter->counters, refused);
    GString *rows = g_string_new(NULL);
    for (guint k = 0; k < sluice__rule_bands(rule); k++) {
        sluice__band b = sluice__rule_band(rule, k);
        g_autofree char *window = sluice__format_duration(b.window_us);
        g_string_append(rows, "sluice_band_refusals_total{name=\"");
        append_label(rows, limiter->name);
        g_string_append_printf(rows, "\",band=\"%" G_GINT64_FORMAT "/%s", b.limit, window);
        if (b.burst != b.limit)
            g_string_append_printf(rows, "/%" G_GINT64_FORMAT, b.burst);
        g_string_append_printf(rows, "\",shadow=\"%s\"} %" G_GUINT64_FORMAT "\n",
                               k > rule->n_bands ? "true" : "false", refused[k]);
    }
    series *s = g_new0(series, 1);
    s->labels = g_string_free(rows, FALSE); /* sorts by the name, the first label */
    g_ptr_array_add(banded, s);
}

/* The sluice_adaptive_limit gauge of a limiter whose rule is adaptive, as one series
 * (labels: the row; stats unused). */
static void add_adaptive(sluice__limiter *limiter, gpointer adaptive)
{
    const sluice__rule *rule = sluice__limiter_rule(limiter);
    if (!rule || rule->algorithm != SLUICE__ADAPTIVE)
        return;
    GString *row = g_string_new("sluice_adaptive_limit{name=\"");
    append_label(row, limiter->name);
    g_string_append_printf(row, "\"} %" G_GINT64_FORMAT "\n",
                           sluice__adaptive_current(limiter, rule));
    series *s = g_new0(series, 1);
    s->labels = g_string_free(row, FALSE);
    g_ptr_array_add(adaptive, s);
}

static void add_breaker(const char *what, gboolean open, gpointer out)
{
    g_string_append(out, "sluice_breaker_open{node=\"");
    append_label(out, what);
    g_string_append_printf(out, "\"} %d\n", open ? 1 : 0);
}

/* The gauges of the shared-memory zone (backend = shm): what every process
 * sharing it sees alike, labelled with its name. */
static void add_zone(GString *out)
{
    sluice_zone_info z;
    memset(&z, 0, sizeof z);
    gboolean have = sluice__engine_zone(&z, NULL);
    g_autoptr(GString) label = g_string_new("{zone=\"");
    if (have)
        append_label(label, z.name);
    g_string_append(label, "\"}");
    const struct {
        const char *metric, *type, *help;
        gdouble value;
    } rows[] = {
        {"sluice_zone_bytes", "gauge", "The size of the shared-memory zone (backend = shm).",
         (gdouble)z.size},
        {"sluice_zone_capacity_keys", "gauge",
         "The most per-key states the zone holds (each band of a key is one).",
         (gdouble)z.capacity},
        {"sluice_zone_keys", "gauge", "The per-key states the zone holds now.", (gdouble)z.keys},
        {"sluice_zone_evictions_total", "counter",
         "States not yet back at full capacity that the zone gave up for room.",
         (gdouble)z.evictions},
        {"sluice_zone_chunks_free", "gauge",
         "Free chunks of the zone for sliding_log and concurrency runs (3 runs each).",
         (gdouble)z.chunks_free},
        {"sluice_zone_processes", "gauge", "Processes attached to the zone now.",
         (gdouble)z.processes},
        {"sluice_zone_repairs_total", "counter",
         "Locks of the zone taken over from a process that died holding them.", (gdouble)z.repairs},
    };
    for (guint i = 0; i < G_N_ELEMENTS(rows); i++) {
        header(out, rows[i].metric, rows[i].type, rows[i].help);
        if (have)
            g_string_append_printf(out, "%s%s %.0f\n", rows[i].metric, label->str, rows[i].value);
    }
}

char *sluice_stats_prometheus(void)
{
    g_autoptr(GPtrArray) limits = g_ptr_array_new_with_free_func(series_free);
    g_autoptr(GPtrArray) functions = g_ptr_array_new_with_free_func(series_free);
    g_autoptr(GPtrArray) banded = g_ptr_array_new_with_free_func(series_free);
    g_autoptr(GPtrArray) adaptive = g_ptr_array_new_with_free_func(series_free);
    sluice__registry_foreach_limiter(add_limiter, limits);
    sluice__registry_foreach_limiter(add_bands, banded);
    g_ptr_array_sort(banded, by_labels);
    sluice__registry_foreach_limiter(add_adaptive, adaptive);
    g_ptr_array_sort(adaptive, by_labels);
    sluice_descriptors_foreach(add_descriptor, functions);
    g_ptr_array_sort(limits, by_labels);
    g_ptr_array_sort(functions, by_labels);

    GString *out = g_string_new(NULL);
    header(out, "sluice_decisions_total", "counter", "Decisions per limit, by outcome.");
    outcomes(out, "sluice_decisions_total", limits);
    header(out, "sluice_waited_total", "counter", "Decisions that waited for their permits.");
    counter(out, "sluice_waited_total", limits, G_STRUCT_OFFSET(sluice_stats, waited));
    header(out, "sluice_degraded_total", "counter",
           "Decorated calls that ran their degrade function or fallback.");
    counter(out, "sluice_degraded_total", limits, G_STRUCT_OFFSET(sluice_stats, degraded));
    header(out, "sluice_cached_denials_total", "counter",
           "Denials answered in process by the denial cache, with no round trip "
           "(also counted in sluice_decisions_total).");
    counter(out, "sluice_cached_denials_total", limits,
            G_STRUCT_OFFSET(sluice_stats, cached_denied));
    header(out, "sluice_prefetched_total", "counter",
           "Decisions allowed from permits this process had prefetched, with no round trip "
           "(also counted in sluice_decisions_total).");
    counter(out, "sluice_prefetched_total", limits, G_STRUCT_OFFSET(sluice_stats, prefetched));
    header(out, "sluice_blocked_total", "counter",
           "Decisions denied by a block (sluice_block, an override's blocked) rather than by "
           "the limit (also counted in sluice_decisions_total as denied).");
    counter(out, "sluice_blocked_total", limits, G_STRUCT_OFFSET(sluice_stats, blocked));
    header(out, "sluice_decision_seconds", "histogram",
           "Time to decide, waiting included (memory backend: one decision in eight).");
    histogram(out, "sluice_decision_seconds", limits);
    header(out, "sluice_function_decisions_total", "counter",
           "Decisions per decorated function, by outcome.");
    outcomes(out, "sluice_function_decisions_total", functions);
    header(out, "sluice_function_degraded_total", "counter",
           "Calls of a decorated function that ran its degrade function or fallback.");
    counter(out, "sluice_function_degraded_total", functions,
            G_STRUCT_OFFSET(sluice_stats, degraded));
    header(out, "sluice_band_refusals_total", "counter",
           "Calls each band of a rule with bands refused (a shadow band: would have refused; "
           "also counted in sluice_decisions_total).");
    for (guint i = 0; i < banded->len; i++)
        g_string_append(out, ((series *)g_ptr_array_index(banded, i))->labels);
    header(out, "sluice_adaptive_limit", "gauge",
           "The current limit of each adaptive rule in this process: the most calls in "
           "flight its latency lets through.");
    for (guint i = 0; i < adaptive->len; i++)
        g_string_append(out, ((series *)g_ptr_array_index(adaptive, i))->labels);
    header(out, "sluice_breaker_open", "gauge",
           "1 while the circuit breaker of a Redis server is open (its calls refused, "
           "on_error deciding), else 0.");
    sluice__engine_breakers(add_breaker, out);
    add_zone(out);
    return g_string_free(out, FALSE);
}
