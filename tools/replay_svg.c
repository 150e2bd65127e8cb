/* SPDX-License-Identifier: MIT */
/* The picture of a replay (sluice replay --svg): per limit and keyfile, admitted and
 * denied permits over time, in buckets, with the limit and the replay's summary.
 *
 * The SVG is written as text: it is a few kinds of element (rect, path, line,
 * text), so a drawing library would add a dependency and nothing the picture needs,
 * and the text lets the tests read the numbers back out of the picture.
 *
 * Calls are counted into buckets while the replay runs: each limit keeps at most
 * CAPACITY of them, and when the trace outgrows them the buckets are merged into
 * wider ones (the widths are round durations, each a multiple of the one before).
 * At the end all panels are brought to one width that draws at most MAX_DRAWN
 * buckets, so the picture's size does not grow with the trace.
 *
 * A bar stacks, from the bottom: the permits admitted, those admitted that a shadow
 * (mode = shadow or a shadow band) would have refused, and those denied. Each band
 * of the rule is a line at its average allowance: dashed when it is enforced,
 * dotted when it is a shadow. */
#include "replay_svg.h"

#include <stdio.h>
#include <string.h>

#define CAPACITY  2048 /* buckets a limit keeps while the replay runs */
#define MAX_DRAWN 400  /* buckets drawn per panel at most */

/* The picture's geometry, in SVG user units (pixels). */
#define WIDTH        1000
#define PLOT_LEFT    84
#define PLOT_WIDTH   (WIDTH - PLOT_LEFT - 24)
#define PLOT_HEIGHT  150
#define PANEL_HEAD   90 /* title, summary, key and rule above the plot */
#define PANEL_FOOT   44 /* the time axis below it, and the gap to the next panel */
#define PANEL_HEIGHT (PANEL_HEAD + PLOT_HEIGHT + PANEL_FOOT)
#define TOP          40 /* the picture's title */

/* Colours that stay apart in greyscale: dark admitted, light hatched denied, and
 * white cross-hatched in the admitted colour for what a shadow would have denied. */
#define ADMITTED_FILL "#1f4e79"
#define DENIED_FILL   "#fdb863"
#define DENIED_HATCH  "#b35806"
#define SHADOW_FILL   "#ffffff"

enum { DENIED = 0, ADMITTED = 1 };

typedef struct {
    gint64 calls[2];
    gint64 permits[2];
    gint64 shadow_calls; /* of the admitted: those a shadow would have denied */
    gint64 shadow_permits;
} bucket;

/* One limit's decisions in one replay. */
typedef struct {
    char *name;
    gint64 width_ms;   /* each bucket's width */
    bucket *buckets;   /* CAPACITY of them, from the trace's first call on */
    gint64 used;       /* the highest bucket counted into, plus one */
    bucket total;      /* the replay's summary */
    gboolean has_rule; /* replay_svg_rule was told of a rule */
    sluice_rule_info rule;
    sluice_band_info bands[SLUICE_RULE_BANDS_MAX];
    guint n_bands;
    gboolean watched; /* mode = shadow or shadow bands: shadow_denied is counted */
    guint keys;
} series;

/* One replay: a keyfile and its limits. */
typedef struct {
    char *keyfile;
    GHashTable *by_name; /* name -> series * */
    GPtrArray *order;    /* series *, in order of first call */
} run;

struct replay_svg {
    GPtrArray *runs; /* run * */
    gboolean started;
    gint64 origin_ms; /* the trace's first call */
    gint64 last_ms;   /* the latest decision */
};

/* Round widths, each a multiple of the one before; past the last, doubled. */
static const gint64 widths[] = {
    1,     5,      10,     50,      100,     500,      1000,     5000,     10000,    30000,
    60000, 300000, 600000, 1800000, 3600000, 10800000, 21600000, 43200000, 86400000, 604800000,
};

static gint64 wider(gint64 w)
{
    for (guint i = 0; i < G_N_ELEMENTS(widths); i++)
        if (widths[i] > w)
            return widths[i];
    return w * 2;
}

static gint64 add_saturating(gint64 a, gint64 b)
{
    return a > G_MAXINT64 - b ? G_MAXINT64 : a + b;
}

static void bucket_add(bucket *to, const bucket *from)
{
    for (int i = 0; i < 2; i++) {
        to->calls[i] = add_saturating(to->calls[i], from->calls[i]);
        to->permits[i] = add_saturating(to->permits[i], from->permits[i]);
    }
    to->shadow_calls = add_saturating(to->shadow_calls, from->shadow_calls);
    to->shadow_permits = add_saturating(to->shadow_permits, from->shadow_permits);
}

/* Merges the buckets of s into buckets `width` wide (a multiple of s->width_ms). */
static void series_widen(series *s, gint64 width)
{
    gint64 k = width / s->width_ms;
    for (gint64 j = 1; j < s->used; j++) { /* bucket j/k is done with before j */
        gint64 i = j / k;
        if (i == j)
            continue;
        bucket_add(&s->buckets[i], &s->buckets[j]);
        memset(&s->buckets[j], 0, sizeof s->buckets[j]);
    }
    s->used = s->used > 0 ? (s->used - 1) / k + 1 : 0;
    s->width_ms = width;
}

static void series_free(gpointer p)
{
    series *s = p;
    g_free(s->buckets);
    g_free(s->name);
    g_free(s);
}

static void run_free(gpointer p)
{
    run *r = p;
    g_ptr_array_unref(r->order);
    g_hash_table_unref(r->by_name);
    g_free(r->keyfile);
    g_free(r);
}

replay_svg *replay_svg_new(void)
{
    replay_svg *s = g_new0(replay_svg, 1);
    s->runs = g_ptr_array_new_with_free_func(run_free);
    return s;
}

void replay_svg_free(replay_svg *s)
{
    if (!s)
        return;
    g_ptr_array_unref(s->runs);
    g_free(s);
}

void replay_svg_run(replay_svg *s, const char *keyfile)
{
    run *r = g_new0(run, 1);
    r->keyfile = g_strdup(keyfile);
    r->by_name = g_hash_table_new(g_str_hash, g_str_equal);
    r->order = g_ptr_array_new_with_free_func(series_free);
    g_ptr_array_add(s->runs, r);
}

static series *series_of(replay_svg *s, const char *name)
{
    g_return_val_if_fail(s->runs->len > 0, NULL);
    run *r = g_ptr_array_index(s->runs, s->runs->len - 1);
    series *x = g_hash_table_lookup(r->by_name, name);
    if (x)
        return x;
    x = g_new0(series, 1);
    x->name = g_strdup(name);
    x->width_ms = 1;
    x->buckets = g_new0(bucket, CAPACITY);
    g_hash_table_insert(r->by_name, x->name, x);
    g_ptr_array_add(r->order, x);
    return x;
}

void replay_svg_add(replay_svg *s, const char *name, gint64 t_ms, gint64 permits, gboolean allowed,
                    gboolean shadow_denied)
{
    series *x = series_of(s, name);
    if (!s->started) {
        s->started = TRUE;
        s->origin_ms = s->last_ms = t_ms;
    }
    s->last_ms = MAX(s->last_ms, t_ms);
    gint64 at = MAX(0, t_ms - s->origin_ms);
    while (at / x->width_ms >= CAPACITY)
        series_widen(x, wider(x->width_ms));
    gint64 i = at / x->width_ms;
    x->used = MAX(x->used, i + 1);
    int outcome = allowed ? ADMITTED : DENIED;
    bucket one = {{0, 0}, {0, 0}, 0, 0};
    one.calls[outcome] = 1;
    one.permits[outcome] = permits;
    if (allowed && shadow_denied) {
        one.shadow_calls = 1;
        one.shadow_permits = permits;
    }
    bucket_add(&x->buckets[i], &one);
    bucket_add(&x->total, &one);
}

void replay_svg_rule(replay_svg *s, const char *name, const sluice_rule_info *rule,
                     const sluice_band_info *bands, guint n_bands, guint keys)
{
    series *x = series_of(s, name);
    x->has_rule = rule != NULL;
    x->n_bands = 0;
    x->watched = FALSE;
    if (rule) {
        x->rule = *rule;
        x->watched = rule->shadow;
        for (guint i = 0; i < MIN(n_bands, SLUICE_RULE_BANDS_MAX); i++) {
            x->bands[x->n_bands++] = bands[i];
            x->watched |= bands[i].shadow;
        }
        if (x->n_bands == 0) /* the rule's own limit and window */
            x->bands[x->n_bands++] =
                (sluice_band_info){rule->limit, rule->burst, rule->window_ms, FALSE};
    }
    x->keys = keys;
}

/* ---- writing ------------------------------------------------------------------------- */

/* Appends v with at most two decimals, always with a dot (whatever the locale). */
static void append_number(GString *out, double v)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    g_ascii_formatd(buf, sizeof buf, "%.2f", v);
    char *end = buf + strlen(buf);
    while (end > buf && end[-1] == '0')
        *--end = '\0';
    if (end > buf && end[-1] == '.')
        *--end = '\0';
    g_string_append(out, strcmp(buf, "-0") == 0 ? "0" : buf);
}

/* Appends text escaped for XML: invalid UTF-8 and control characters become U+FFFD. */
static void append_text(GString *out, const char *text)
{
    g_autoptr(GString) clean = g_string_new(NULL);
    g_autofree char *valid = g_utf8_make_valid(text, -1);
    for (const char *p = valid; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);
        g_string_append_unichar(clean, c < 0x20 || (c >= 0x7f && c < 0xa0) ? 0xfffd : c);
    }
    g_autofree char *escaped = g_markup_escape_text(clean->str, -1);
    g_string_append(out, escaped);
}

/* Appends a duration: "0", "250ms", "10s", "1m30s", "1d2h". */
static void append_duration(GString *out, gint64 ms)
{
    static const struct {
        const char *unit;
        gint64 ms;
    } units[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};
    if (ms == 0) {
        g_string_append(out, "0");
        return;
    }
    for (guint i = 0; i < G_N_ELEMENTS(units); i++)
        if (ms >= units[i].ms) {
            g_string_append_printf(out, "%" G_GINT64_FORMAT "%s", ms / units[i].ms, units[i].unit);
            ms %= units[i].ms;
        }
}

/* The smallest 1, 2 or 5 times a power of ten that is at least v. */
static double nice_step(double v)
{
    double p = 1;
    while (p * 10 <= v)
        p *= 10;
    while (p > v && p > 1e-3)
        p /= 10;
    for (;;) {
        if (p >= v)
            return p;
        if (2 * p >= v)
            return 2 * p;
        if (5 * p >= v)
            return 5 * p;
        p *= 10;
    }
}

/* What the picture's panels share. */
typedef struct {
    GString *out;
    gint64 width_ms; /* every bucket's */
    gint64 buckets;  /* drawn per panel */
    double y;        /* the next panel's top */
} canvas;

/* A rule of calls in flight, not of a rate: concurrency, adaptive. */
static gboolean in_flight(const series *x)
{
    return strcmp(x->rule.algorithm, "concurrency") == 0 ||
           strcmp(x->rule.algorithm, "adaptive") == 0;
}

/* Whether a line can say what the rule allows: a rate, and one key or per_key = false. */
static gboolean lines_apply(const series *x)
{
    return x->has_rule && !in_flight(x) && !(x->rule.per_key && x->keys > 1);
}

/* The permits per bucket that band b allows when its line applies, else -1. */
static double allowance(const canvas *c, const series *x, guint b)
{
    if (!lines_apply(x) || b >= x->n_bands || x->bands[b].window_ms <= 0)
        return -1;
    return (double)x->bands[b].limit * (double)c->width_ms / (double)x->bands[b].window_ms;
}

/* Band b is a shadow: decided and counted, never refusing. */
static gboolean band_shadow(const series *x, guint b)
{
    return x->rule.shadow || x->bands[b].shadow;
}

/* The lowest line of x, or -1 when none applies. */
static double lowest_line(const canvas *c, const series *x)
{
    double low = -1;
    for (guint b = 0; b < x->n_bands; b++) {
        double line = allowance(c, x, b);
        if (line >= 0 && (low < 0 || line < low))
            low = line;
    }
    return low;
}

/* The rule and its bands' lines, in words; y_max: the plot's top. */
static void append_rule(GString *out, const canvas *c, const series *x, double y_max)
{
    if (!x->has_rule) {
        g_string_append(out, "no rule: not limited");
        return;
    }
    if (in_flight(x)) {
        g_string_append_printf(
            out, "%s: %s%" G_GINT64_FORMAT " calls in flight (no rate, not drawn)",
            x->rule.algorithm, x->rule.controller ? "up to " : "", x->rule.limit);
    } else {
        g_string_append_printf(out, "%s:", x->rule.algorithm);
        for (guint b = 0; b < x->n_bands; b++) {
            double line = allowance(c, x, b);
            g_string_append(out, b == 0 ? " " : ", ");
            if (b > 0 && band_shadow(x, b) && !x->rule.shadow)
                g_string_append(out, "shadow ");
            g_string_append_printf(out, "%" G_GINT64_FORMAT " per ", x->bands[b].limit);
            append_duration(out, x->bands[b].window_ms);
            if (line >= 0) {
                g_string_append(out, " = ");
                append_number(out, line);
                g_string_append(out, " per ");
                append_duration(out, c->width_ms);
                if (line > y_max)
                    g_string_append(out, " (above the plot)");
            }
        }
        if (!lines_apply(x))
            g_string_append_printf(out, " for each of %u keys (not drawn)", x->keys);
    }
    if (x->rule.shadow)
        g_string_append(out, "; shadow: never refuses");
}

static void draw_panel(canvas *c, const series *x, const char *keyfile, double y_max)
{
    GString *o = c->out;
    double top = c->y + PANEL_HEAD, bottom = top + PLOT_HEIGHT;
    double bar = (double)PLOT_WIDTH / (double)c->buckets;
    gboolean lines = lowest_line(c, x) >= 0;
    const bucket *t = &x->total;
    gint64 calls = t->calls[ADMITTED] + t->calls[DENIED];

    g_string_append(o, "<g class=\"panel\" data-limit=\"");
    append_text(o, x->name);
    g_string_append(o, "\" data-keyfile=\"");
    append_text(o, keyfile);
    g_string_append_printf(
        o,
        "\" data-buckets=\"%" G_GINT64_FORMAT "\" data-bucket-ms=\"%" G_GINT64_FORMAT
        "\" data-calls=\"%" G_GINT64_FORMAT "\" data-admitted=\"%" G_GINT64_FORMAT
        "\" data-denied=\"%" G_GINT64_FORMAT "\" data-permits-admitted=\"%" G_GINT64_FORMAT
        "\" data-permits-denied=\"%" G_GINT64_FORMAT "\"",
        c->buckets, c->width_ms, calls, t->calls[ADMITTED], t->calls[DENIED], t->permits[ADMITTED],
        t->permits[DENIED]);
    if (x->watched)
        g_string_append_printf(o, " data-shadow-denied=\"%" G_GINT64_FORMAT "\"", t->shadow_calls);
    g_string_append(o, ">\n");

    /* the legend: title, summary, key */
    g_string_append_printf(o, "<text x=\"%d\" y=\"", PLOT_LEFT);
    append_number(o, c->y + 18);
    g_string_append(o, "\" class=\"title\">");
    append_text(o, x->name);
    g_string_append(o, " <tspan class=\"small\">with ");
    append_text(o, keyfile);
    g_string_append(o, "</tspan></text>\n");
    g_string_append_printf(o, "<text x=\"%d\" y=\"", PLOT_LEFT);
    append_number(o, c->y + 38);
    g_string_append_printf(
        o, "\">calls %" G_GINT64_FORMAT ": admitted %" G_GINT64_FORMAT ", denied %" G_GINT64_FORMAT,
        calls, t->calls[ADMITTED], t->calls[DENIED]);
    if (calls > 0) {
        g_string_append(o, " (");
        append_number(o, 100.0 * (double)t->calls[DENIED] / (double)calls);
        g_string_append(o, "% denied)");
    }
    if (x->watched)
        g_string_append_printf(o, ", shadow_denied %" G_GINT64_FORMAT, t->shadow_calls);
    g_string_append_printf(
        o, "; permits admitted %" G_GINT64_FORMAT ", denied %" G_GINT64_FORMAT "</text>\n",
        t->permits[ADMITTED], t->permits[DENIED]);
    double key_y = c->y + 58;
    int key_x = PLOT_LEFT;
    const struct {
        gboolean shown;
        const char *fill, *stroke, *label;
        int width;
    } swatches[] = {
        {TRUE, ADMITTED_FILL, "none", "admitted", 90},
        {x->watched, "url(#shadow)", ADMITTED_FILL, "shadow_denied", 128},
        {TRUE, "url(#denied)", DENIED_HATCH, "denied", 80},
    };
    for (guint i = 0; i < G_N_ELEMENTS(swatches); i++) {
        if (!swatches[i].shown)
            continue;
        g_string_append_printf(o, "<rect x=\"%d\" y=\"", key_x);
        append_number(o, key_y - 10);
        g_string_append_printf(o, "\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"%s\"/>",
                               swatches[i].fill, swatches[i].stroke);
        g_string_append_printf(o, "<text x=\"%d\" y=\"", key_x + 16);
        append_number(o, key_y);
        g_string_append_printf(o, "\">%s</text>", swatches[i].label);
        key_x += swatches[i].width;
    }
    key_x = PLOT_LEFT; /* the rule on a line of its own */
    key_y += 20;
    if (lines) {
        g_string_append_printf(o, "<line x1=\"%d\" x2=\"%d\" y1=\"", key_x, key_x + 30);
        append_number(o, key_y - 4);
        g_string_append(o, "\" y2=\"");
        append_number(o, key_y - 4);
        g_string_append(o, x->rule.shadow ? "\" class=\"shadow-limit key\"/>"
                                          : "\" class=\"limit key\"/>");
        key_x += 36;
    }
    g_string_append_printf(o, "<text x=\"%d\" y=\"", key_x);
    append_number(o, key_y);
    g_string_append(o, "\">");
    append_rule(o, c, x, y_max);
    g_string_append(o, "</text>\n");

    /* the axes: permits per bucket up, time from the trace's first call across */
    double step = nice_step(y_max / 4);
    g_string_append_printf(o, "<text x=\"14\" y=\"");
    append_number(o, top + PLOT_HEIGHT / 2.0);
    g_string_append(o, "\" class=\"small\" transform=\"rotate(-90 14 ");
    append_number(o, top + PLOT_HEIGHT / 2.0);
    g_string_append(o, ")\" text-anchor=\"middle\">permits per ");
    append_duration(o, c->width_ms);
    g_string_append(o, "</text>\n");
    for (double v = 0; v <= y_max + step / 1000; v += step) {
        double y = bottom - v / y_max * PLOT_HEIGHT;
        g_string_append_printf(o, "<line x1=\"%d\" x2=\"%d\" y1=\"", PLOT_LEFT,
                               PLOT_LEFT + PLOT_WIDTH);
        append_number(o, y);
        g_string_append(o, "\" y2=\"");
        append_number(o, y);
        g_string_append(o, "\" class=\"grid\"/><text x=\"");
        append_number(o, PLOT_LEFT - 6);
        g_string_append(o, "\" y=\"");
        append_number(o, y + 4);
        g_string_append(o, "\" class=\"small\" text-anchor=\"end\">");
        append_number(o, v);
        g_string_append(o, "</text>\n");
    }
    gint64 span = c->buckets * c->width_ms, tick = c->width_ms;
    while (span / tick > 10)
        tick = wider(tick);
    for (gint64 at = 0; at <= span; at += tick) {
        double x_at = PLOT_LEFT + (double)at / (double)span * PLOT_WIDTH;
        g_string_append(o, "<line x1=\"");
        append_number(o, x_at);
        g_string_append(o, "\" x2=\"");
        append_number(o, x_at);
        g_string_append(o, "\" y1=\"");
        append_number(o, bottom);
        g_string_append(o, "\" y2=\"");
        append_number(o, bottom + 5);
        g_string_append(o, "\" class=\"axis\"/><text x=\"");
        append_number(o, x_at);
        g_string_append(o, "\" y=\"");
        append_number(o, bottom + 18);
        g_string_append(o, "\" class=\"small\" text-anchor=\"middle\">");
        append_duration(o, at);
        g_string_append(o, "</text>\n");
    }

    /* the buckets: admitted at the bottom, then what a shadow would have denied (also
     * admitted), then denied */
    for (gint64 i = 0; i < c->buckets && i < x->used; i++) {
        const bucket *b = &x->buckets[i];
        if (b->calls[ADMITTED] + b->calls[DENIED] == 0)
            continue;
        g_string_append(o, "<g class=\"bucket\"><title>");
        append_duration(o, i * c->width_ms);
        g_string_append(o, " to ");
        append_duration(o, (i + 1) * c->width_ms);
        g_string_append_printf(o,
                               ": admitted %" G_GINT64_FORMAT " permits in %" G_GINT64_FORMAT
                               " calls, denied %" G_GINT64_FORMAT " in %" G_GINT64_FORMAT,
                               b->permits[ADMITTED], b->calls[ADMITTED], b->permits[DENIED],
                               b->calls[DENIED]);
        if (x->watched)
            g_string_append_printf(
                o, "; a shadow would have denied %" G_GINT64_FORMAT " in %" G_GINT64_FORMAT,
                b->shadow_permits, b->shadow_calls);
        g_string_append(o, "</title>");
        const struct {
            const char *class;
            gint64 permits, calls;
        } layers[] = {
            {"admitted", b->permits[ADMITTED] - b->shadow_permits,
             b->calls[ADMITTED] - b->shadow_calls},
            {"shadow", b->shadow_permits, b->shadow_calls},
            {"denied", b->permits[DENIED], b->calls[DENIED]},
        };
        double base = bottom;
        for (guint l = 0; l < G_N_ELEMENTS(layers); l++) {
            if (layers[l].calls == 0)
                continue;
            double h = (double)layers[l].permits / y_max * PLOT_HEIGHT;
            g_string_append_printf(o,
                                   "<rect class=\"%s\" data-permits=\"%" G_GINT64_FORMAT
                                   "\" data-calls=\"%" G_GINT64_FORMAT "\" x=\"",
                                   layers[l].class, layers[l].permits, layers[l].calls);
            append_number(o, PLOT_LEFT + (double)i * bar);
            g_string_append(o, "\" y=\"");
            append_number(o, base - h);
            g_string_append(o, "\" width=\"");
            append_number(o, MAX(bar, 0.5));
            g_string_append(o, "\" height=\"");
            append_number(o, h);
            g_string_append(o, "\"/>");
            base -= h;
        }
        g_string_append(o, "</g>\n");
    }
    g_string_append_printf(o, "<rect x=\"%d\" y=\"", PLOT_LEFT);
    append_number(o, top);
    g_string_append_printf(o, "\" width=\"%d\" height=\"%d\" class=\"frame\"/>\n", PLOT_WIDTH,
                           PLOT_HEIGHT);
    /* each band's line that fits the plot: dashed enforced, dotted shadow */
    for (guint band = 0; band < x->n_bands; band++) {
        double line = allowance(c, x, band);
        if (line < 0 || line > y_max)
            continue;
        double y = bottom - line / y_max * PLOT_HEIGHT;
        for (int halo = 1; halo >= 0; halo--) { /* white under black: seen on dark bars */
            g_string_append_printf(o, "<line x1=\"%d\" x2=\"%d\" y1=\"", PLOT_LEFT,
                                   PLOT_LEFT + PLOT_WIDTH);
            append_number(o, y);
            g_string_append(o, "\" y2=\"");
            append_number(o, y);
            g_string_append(o, halo                   ? "\" class=\"halo\"/>\n"
                               : band_shadow(x, band) ? "\" class=\"shadow-limit\"/>\n"
                                                      : "\" class=\"limit\"/>\n");
        }
    }
    g_string_append(o, "</g>\n");
    c->y += PANEL_HEIGHT;
}

/* The highest stacked bucket of name over every replay, or its lowest band's line if
 * higher (the lines of wider bands may be above the plot). */
static double y_max_of(const replay_svg *s, const canvas *c, const char *name)
{
    double y_max = 0;
    for (guint r = 0; r < s->runs->len; r++) {
        const run *rr = g_ptr_array_index(s->runs, r);
        const series *x = g_hash_table_lookup(rr->by_name, name);
        if (!x)
            continue;
        for (gint64 i = 0; i < x->used; i++) {
            const bucket *b = &x->buckets[i];
            y_max = MAX(y_max, (double)b->permits[ADMITTED] + (double)b->permits[DENIED]);
        }
        y_max = MAX(y_max, lowest_line(c, x));
    }
    if (y_max <= 0)
        return 1;
    double step = nice_step(y_max / 4);
    return step * (gint64)((y_max + step * 0.999) / step);
}

static const char style[] =
    "<style>\n"
    "text { font-family: sans-serif; font-size: 13px; fill: #222; }\n"
    ".title { font-size: 16px; font-weight: bold; }\n"
    ".small { font-size: 11px; font-weight: normal; fill: #444; }\n"
    ".admitted { fill: " ADMITTED_FILL "; }\n"
    ".denied { fill: url(#denied); }\n"
    ".grid { stroke: #ddd; stroke-width: 1; }\n"
    ".axis { stroke: #444; stroke-width: 1; }\n"
    ".frame { fill: none; stroke: #444; stroke-width: 1; }\n"
    ".limit { stroke: #000; stroke-width: 2; stroke-dasharray: 8 4; }\n"
    ".shadow-limit { stroke: #000; stroke-width: 2; stroke-dasharray: 2 3; }\n"
    ".shadow { fill: url(#shadow); stroke: " ADMITTED_FILL "; stroke-width: 0.5; }\n"
    ".halo { stroke: #fff; stroke-width: 5; }\n"
    "</style>\n"
    "<defs><pattern id=\"denied\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
    "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"" DENIED_FILL "\"/>"
    "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"" DENIED_HATCH
    "\" stroke-width=\"2\"/></pattern>"
    "<pattern id=\"shadow\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\">"
    "<rect width=\"4\" height=\"4\" fill=\"" SHADOW_FILL "\"/><path d=\"M0 0L4 4M4 0L0 4\" "
    "stroke=\"" ADMITTED_FILL "\" stroke-width=\"1\"/></pattern></defs>\n";

gboolean replay_svg_write(replay_svg *s, const char *path, GError **error)
{
    /* one width for every panel: the widest any limit needed, wider until it fits */
    canvas c = {g_string_new(NULL), 1, 1, TOP};
    for (guint r = 0; r < s->runs->len; r++) {
        const run *rr = g_ptr_array_index(s->runs, r);
        for (guint i = 0; i < rr->order->len; i++)
            c.width_ms = MAX(c.width_ms, ((series *)g_ptr_array_index(rr->order, i))->width_ms);
    }
    gint64 span = s->last_ms - s->origin_ms;
    while (span / c.width_ms + 1 > MAX_DRAWN)
        c.width_ms = wider(c.width_ms);
    c.buckets = span / c.width_ms + 1;

    /* the names in order of first call, of any replay */
    g_autoptr(GPtrArray) names = g_ptr_array_new();
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint r = 0; r < s->runs->len; r++) {
        run *rr = g_ptr_array_index(s->runs, r);
        for (guint i = 0; i < rr->order->len; i++) {
            series *x = g_ptr_array_index(rr->order, i);
            if (x->width_ms < c.width_ms)
                series_widen(x, c.width_ms);
            if (g_hash_table_add(seen, x->name))
                g_ptr_array_add(names, x->name);
        }
    }

    GString *body = c.out;
    for (guint n = 0; n < names->len; n++) {
        const char *name = g_ptr_array_index(names, n);
        double y_max = y_max_of(s, &c, name);
        for (guint r = 0; r < s->runs->len; r++) {
            const run *rr = g_ptr_array_index(s->runs, r);
            const series *x = g_hash_table_lookup(rr->by_name, name);
            if (x)
                draw_panel(&c, x, rr->keyfile, y_max);
        }
    }
    if (names->len == 0) {
        g_string_append_printf(body, "<text x=\"%d\" y=\"%d\">The trace has no calls.</text>\n",
                               PLOT_LEFT, TOP + 20);
        c.y += 40;
    }

    g_autoptr(GString) svg = g_string_new(NULL);
    g_string_append_printf(svg,
                           "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                           "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                           "viewBox=\"0 0 %d %d\">\n",
                           WIDTH, (int)c.y, WIDTH, (int)c.y);
    g_string_append(svg, style);
    g_string_append_printf(svg, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", WIDTH,
                           (int)c.y);
    g_string_append_printf(svg, "<text x=\"%d\" y=\"26\" class=\"title\">sluice replay", PLOT_LEFT);
    for (guint r = 0; r < s->runs->len; r++) {
        g_string_append(svg, r == 0 ? " of " : " and ");
        append_text(svg, ((run *)g_ptr_array_index(s->runs, r))->keyfile);
    }
    g_string_append(svg, " <tspan class=\"small\">(time from the trace's first call)</tspan>"
                         "</text>\n");
    g_string_append_len(svg, body->str, (gssize)body->len);
    g_string_append(svg, "</svg>\n");
    g_string_free(body, TRUE);

    if (strcmp(path, "-") == 0) {
        if (fwrite(svg->str, 1, svg->len, stdout) != svg->len || fflush(stdout) != 0) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_IO, "stdout: cannot write the SVG");
            return FALSE;
        }
        return TRUE;
    }
    return g_file_set_contents(path, svg->str, (gssize)svg->len, error);
}
