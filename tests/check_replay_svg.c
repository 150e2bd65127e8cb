/* SPDX-License-Identifier: MIT */
/* sluice replay --svg: the picture is well-formed XML whose buckets and totals are the
 * replay's own, --compare draws both keyfiles, and a real renderer (rsvg-convert)
 * makes a picture of it that is not blank. */
#include "fixture.h"

#include <glib/gstdio.h>
#include <png.h>
#include <string.h>
#include <sys/wait.h>

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH: the path of the built sluice command (tests/CMakeLists.txt)"
#endif

/* A call every 10 ms for 10 s: 1000 calls of `api` (3 per second admitted), and 100
 * of `free` (no rule: all admitted), 2 permits each. */
static char *write_trace(void)
{
    g_autoptr(GString) t = g_string_new("# T_MS NAME [KEY [PERMITS]]\n");
    for (int ms = 0; ms < 10000; ms += 10) {
        g_string_append_printf(t, "%d api\n", ms);
        if (ms % 100 == 0)
            g_string_append_printf(t, "%d free - 2\n", ms);
    }
    return fixture_write_keyfile(t->str); /* a temporary file, like any other */
}

static const char *rules = "[limit:api]\nalgorithm = fixed_window\nlimit = 3\nwindow = 1s\n";
static const char *looser = "[limit:api]\nalgorithm = fixed_window\nlimit = 6\nwindow = 1s\n";

/* Runs argv; its stdout, after asserting it exited 0 with nothing on stderr but
 * the replay's note on names without a rule. */
static char *run(const char *const *argv)
{
    g_autofree char *err = NULL;
    g_autoptr(GError) error = NULL;
    char *out = NULL;
    int status;
    ck_assert_msg(g_spawn_sync(NULL, test_strv(argv), NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                               &status, &error),
                  "cannot run %s: %s", argv[0], error ? error->message : "");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: status %d, stderr: %s",
                  argv[0], status, err);
    g_auto(GStrv) lines = g_strsplit(err, "\n", -1);
    for (char **l = lines; *l; l++)
        ck_assert_msg(!**l || strstr(*l, "no rule [limit:free]"), "%s said: %s", argv[0], *l);
    return out;
}

/* ---- what the SVG says, read with GMarkup ----------------------------------------------- */

typedef struct {
    char *limit, *keyfile;
    gint64 buckets, bucket_ms, calls, admitted, denied, permits_admitted, permits_denied;
    gint64 shadow_denied; /* data-shadow-denied, -1 when absent */
    gint64 drawn;         /* <g class="bucket"> elements */
    gint64 sum[2];        /* data-permits of the denied [0] and admitted [1] rects */
    gint64 shadow_sum;    /* data-permits of the shadow rects (admitted too) */
    gint64 limit_line;    /* <line class="limit"> elements */
    gint64 shadow_line;   /* <line class="shadow-limit"> elements */
} panel;

typedef struct {
    GPtrArray *panels; /* panel * */
    panel *in;         /* the panel being read */
    int depth_in;      /* the depth of its element */
    int depth;
} picture;

static void panel_free(gpointer p)
{
    panel *x = p;
    g_free(x->limit);
    g_free(x->keyfile);
    g_free(x);
}

static const char *attribute(const char **names, const char **values, const char *name)
{
    for (; *names; names++, values++)
        if (strcmp(*names, name) == 0)
            return *values;
    return NULL;
}

static gint64 number(const char **names, const char **values, const char *name)
{
    const char *v = attribute(names, values, name);
    ck_assert_msg(v, "no %s", name);
    gint64 n;
    ck_assert_msg(g_ascii_string_to_signed(v, 10, 0, G_MAXINT64, &n, NULL), "%s=%s", name, v);
    return n;
}

static void start(GMarkupParseContext *context, const char *element, const char **names,
                  const char **values, gpointer user_data, GError **error)
{
    picture *p = user_data;
    const char *class = attribute(names, values, "class");
    (void)context, (void)error;
    p->depth++;
    if (strcmp(element, "g") == 0 && g_strcmp0(class, "panel") == 0) {
        ck_assert_ptr_null(p->in);
        panel *x = g_new0(panel, 1);
        x->limit = g_strdup(attribute(names, values, "data-limit"));
        x->keyfile = g_strdup(attribute(names, values, "data-keyfile"));
        x->buckets = number(names, values, "data-buckets");
        x->bucket_ms = number(names, values, "data-bucket-ms");
        x->calls = number(names, values, "data-calls");
        x->admitted = number(names, values, "data-admitted");
        x->denied = number(names, values, "data-denied");
        x->permits_admitted = number(names, values, "data-permits-admitted");
        x->permits_denied = number(names, values, "data-permits-denied");
        x->shadow_denied = attribute(names, values, "data-shadow-denied")
                               ? number(names, values, "data-shadow-denied")
                               : -1;
        g_ptr_array_add(p->panels, x);
        p->in = x;
        p->depth_in = p->depth;
    } else if (!p->in) {
        return;
    } else if (strcmp(element, "g") == 0 && g_strcmp0(class, "bucket") == 0) {
        p->in->drawn++;
    } else if (strcmp(element, "rect") == 0 && g_strcmp0(class, "admitted") == 0) {
        p->in->sum[1] += number(names, values, "data-permits");
    } else if (strcmp(element, "rect") == 0 && g_strcmp0(class, "denied") == 0) {
        p->in->sum[0] += number(names, values, "data-permits");
    } else if (strcmp(element, "rect") == 0 && g_strcmp0(class, "shadow") == 0) {
        p->in->shadow_sum += number(names, values, "data-permits");
    } else if (strcmp(element, "line") == 0 && g_strcmp0(class, "limit") == 0) {
        p->in->limit_line++;
    } else if (strcmp(element, "line") == 0 && g_strcmp0(class, "shadow-limit") == 0) {
        p->in->shadow_line++;
    }
}

static void end(GMarkupParseContext *context, const char *element, gpointer user_data,
                GError **error)
{
    picture *p = user_data;
    (void)context, (void)element, (void)error;
    if (p->in && p->depth == p->depth_in)
        p->in = NULL;
    p->depth--;
}

/* The panels of svg, which must be well-formed XML with an <svg> root. */
static GPtrArray *read_svg(const char *svg)
{
    static const GMarkupParser parser = {start, end, NULL, NULL, NULL};
    picture p = {g_ptr_array_new_with_free_func(panel_free), NULL, 0, 0};
    g_autoptr(GError) error = NULL;
    ck_assert(g_str_has_prefix(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "));
    GMarkupParseContext *context = g_markup_parse_context_new(&parser, 0, &p, NULL);
    gboolean ok = g_markup_parse_context_parse(context, svg, -1, &error) &&
                  g_markup_parse_context_end_parse(context, &error);
    g_markup_parse_context_free(context);
    ck_assert_msg(ok, "not well-formed: %s", error ? error->message : "");
    ck_assert_int_eq(p.depth, 0);
    return p.panels;
}

/* Asserts that panel x says what the replay's line "summary NAME ..." in out says. */
static void assert_summary(const panel *x, const char *out, const char *svg)
{
    g_autofree char *prefix = g_strdup_printf("summary %s calls=", x->limit);
    const char *line = strstr(out, prefix);
    ck_assert_msg(line, "no summary of %s in: %s", x->limit, out);
    gint64 calls, admitted, denied, permits_admitted, permits_denied;
    ck_assert_int_eq(sscanf(line + strlen(prefix) - strlen("calls="),
                            "calls=%" G_GINT64_FORMAT " admitted=%" G_GINT64_FORMAT
                            " denied=%" G_GINT64_FORMAT " permits_admitted=%" G_GINT64_FORMAT
                            " permits_denied=%" G_GINT64_FORMAT,
                            &calls, &admitted, &denied, &permits_admitted, &permits_denied),
                     5);
    ck_assert_int_eq(x->calls, calls);
    ck_assert_int_eq(x->admitted, admitted);
    ck_assert_int_eq(x->denied, denied);
    ck_assert_int_eq(x->permits_admitted, permits_admitted);
    ck_assert_int_eq(x->permits_denied, permits_denied);
    /* shadow_denied when the replay counts it (mode = shadow, shadow_bands) */
    const char *end = strchr(line, '\n');
    g_autofree char *whole = g_strndup(line, end ? (gsize)(end - line) : strlen(line));
    const char *shadow = strstr(whole, " shadow_denied=");
    if (shadow)
        ck_assert_int_eq(x->shadow_denied, g_ascii_strtoll(shadow + 15, NULL, 10));
    else
        ck_assert_int_eq(x->shadow_denied, -1);
    /* and the drawn buckets add up to the same (the shadow's part is admitted) */
    ck_assert_int_eq(x->sum[1] + x->shadow_sum, permits_admitted);
    ck_assert_int_eq(x->sum[0], permits_denied);
    /* and the legend says the summary */
    g_autofree char *legend = g_strdup_printf(
        ">calls %" G_GINT64_FORMAT ": admitted %" G_GINT64_FORMAT ", denied %" G_GINT64_FORMAT,
        calls, admitted, denied);
    ck_assert_msg(strstr(svg, legend), "no %s in the SVG", legend);
}

/* The SVG of `sluice replay -c keyfile --svg FILE trace`, and the replay's lines in *out. */
static char *draw(const char *keyfile, const char *trace, char **out)
{
    g_autofree char *svg_path = g_strdup_printf("%s.svg", trace);
    char *lines = run((const char *[]){SLUICE_CLI_PATH, "replay", "-c", keyfile, "--svg",
                                 svg_path, trace, NULL});
    if (out)
        *out = lines;
    else
        g_free(lines);
    char *svg = NULL;
    ck_assert(g_file_get_contents(svg_path, &svg, NULL, NULL));
    g_unlink(svg_path);
    return svg;
}

START_TEST(the_svg_has_the_replays_buckets_and_totals)
{
    g_autofree char *keyfile = fixture_write_keyfile(rules);
    g_autofree char *trace = write_trace();
    g_autofree char *out = NULL;
    g_autofree char *svg = draw(keyfile, trace, &out);
    g_autoptr(GPtrArray) panels = read_svg(svg);
    ck_assert_int_eq(panels->len, 2);

    /* api: the fixed window admits 3 a second, the first 3 calls of each second;
     * 10 s in at most 400 buckets of a round width: 200 of 50 ms, 5 calls each */
    panel *api = g_ptr_array_index(panels, 0);
    ck_assert_str_eq(api->limit, "api");
    ck_assert_str_eq(api->keyfile, keyfile);
    ck_assert_int_eq(api->bucket_ms, 50);
    ck_assert_int_eq(api->buckets, 200);
    ck_assert_int_eq(api->drawn, 200);
    ck_assert_int_eq(api->permits_admitted, 30);
    ck_assert_int_eq(api->permits_denied, 970);
    ck_assert_int_eq(api->limit_line, 1); /* 3 per 1 s: 0.15 per 50 ms */
    assert_summary(api, out, svg);
    ck_assert(strstr(svg, "fixed_window: 3 per 1s = 0.15 per 50ms"));
    ck_assert(strstr(svg, "<title>1s to 1s50ms: admitted 3 permits in 3 calls, "
                          "denied 2 in 2</title>"));
    ck_assert(strstr(svg, "<title>1s50ms to 1s100ms: admitted 0 permits in 0 calls, "
                          "denied 5 in 5</title>"));

    /* free: no rule, all admitted, no line; a call every 100 ms: every other bucket */
    panel *free_ = g_ptr_array_index(panels, 1);
    ck_assert_str_eq(free_->limit, "free");
    ck_assert_int_eq(free_->buckets, 200);
    ck_assert_int_eq(free_->drawn, 100);
    ck_assert_int_eq(free_->calls, 100);
    ck_assert_int_eq(free_->permits_admitted, 200);
    ck_assert_int_eq(free_->limit_line, 0);
    assert_summary(free_, out, svg);
    ck_assert(strstr(svg, "no rule: not limited"));

    /* --svg - writes the same picture to stdout, and no lines */
    g_autofree char *to_stdout =
        run((const char *[]){SLUICE_CLI_PATH, "replay", "-c", keyfile, "--svg", "-", trace, NULL});
    ck_assert_str_eq(to_stdout, svg);
    g_unlink(trace);
}
END_TEST

START_TEST(compare_draws_each_keyfile_on_the_same_trace)
{
    g_autofree char *keyfile = fixture_write_keyfile(rules);
    g_autofree char *other = fixture_write_keyfile(looser);
    g_autofree char *trace = write_trace();
    g_autofree char *svg_path = g_strdup_printf("%s.svg", trace);
    g_autofree char *out = run((const char *[]){SLUICE_CLI_PATH, "replay", "-c", keyfile, "--compare",
                                          other, "--svg", svg_path, trace, NULL});
    /* each replay's lines after a line naming its keyfile */
    g_autofree char *first = g_strdup_printf("# replay of %s\n", keyfile);
    g_autofree char *second = g_strdup_printf("# replay of %s\n", other);
    ck_assert(g_str_has_prefix(out, first));
    const char *rest = strstr(out, second);
    ck_assert_ptr_nonnull(rest);
    g_autofree char *first_part = g_strndup(out, (gsize)(rest - out));

    g_autofree char *svg = NULL;
    ck_assert(g_file_get_contents(svg_path, &svg, NULL, NULL));
    g_autoptr(GPtrArray) panels = read_svg(svg);
    ck_assert_int_eq(panels->len, 4); /* per limit, one keyfile above the other */
    const char *limits[] = {"api", "api", "free", "free"};
    for (guint i = 0; i < 4; i++) {
        panel *x = g_ptr_array_index(panels, i);
        ck_assert_str_eq(x->limit, limits[i]);
        ck_assert_str_eq(x->keyfile, i % 2 == 0 ? keyfile : other);
        ck_assert_int_eq(x->buckets, 200);
        assert_summary(x, i % 2 == 0 ? first_part : rest, svg);
    }
    ck_assert_int_eq(((panel *)g_ptr_array_index(panels, 1))->permits_admitted, 60);

    /* from stdin, which cannot be read twice, the same */
    g_autofree char *q_cli = g_shell_quote(SLUICE_CLI_PATH);
    g_autofree char *q_keyfile = g_shell_quote(keyfile);
    g_autofree char *q_other = g_shell_quote(other);
    g_autofree char *q_trace = g_shell_quote(trace);
    g_autofree char *line = g_strdup_printf("cat %s | %s replay -c %s --compare %s --svg -",
                                            q_trace, q_cli, q_keyfile, q_other);
    g_autofree char *piped = run((const char *[]){"sh", "-c", line, NULL});
    ck_assert_str_eq(piped, svg);
    g_unlink(svg_path);
    g_unlink(trace);
    g_unlink(other);
}
END_TEST

/* Bands: a line per band (dashed enforced, dotted shadow), and what the shadow band
 * would have denied is counted as the replay counts it, and drawn within the admitted. */
START_TEST(each_band_is_drawn_and_shadow_denials_are_counted)
{
    g_autofree char *keyfile = fixture_write_keyfile(
        "[limit:api]\nalgorithm = fixed_window\nlimit = 3\nwindow = 1s\nbands = 20/10s\n"
        "shadow_bands = 2/1s\n");
    g_autofree char *trace = write_trace();
    g_autofree char *out = NULL;
    g_autofree char *svg = draw(keyfile, trace, &out);
    g_autoptr(GPtrArray) panels = read_svg(svg);
    panel *api = g_ptr_array_index(panels, 0);
    ck_assert_str_eq(api->limit, "api");
    /* 3 a second for 6 s and 2 in the seventh: the band's 20 in 10 s; the shadow band
     * (2 a second) would have denied the third of each of the first 6 seconds */
    ck_assert_int_eq(api->permits_admitted, 20);
    ck_assert_int_eq(api->shadow_denied, 6);
    ck_assert_int_eq(api->shadow_sum, 6);
    assert_summary(api, out, svg);
    ck_assert_int_eq(api->limit_line, 2);
    ck_assert_int_eq(api->shadow_line, 1);
    ck_assert(strstr(svg, "fixed_window: 3 per 1s = 0.15 per 50ms, 20 per 10s = 0.1 per 50ms, "
                          "shadow 2 per 1s = 0.1 per 50ms"));
    ck_assert(strstr(svg, "<title>0 to 50ms: admitted 3 permits in 3 calls, denied 2 in 2; "
                          "a shadow would have denied 1 in 1</title>"));
    /* free has no rule: no shadow_denied, no line */
    panel *free_ = g_ptr_array_index(panels, 1);
    ck_assert_int_eq(free_->shadow_denied, -1);
    ck_assert_int_eq(free_->limit_line + free_->shadow_line, 0);
    g_unlink(trace);
}
END_TEST

/* A band whose line would flatten the bars is left above the plot, and the legend says so. */
START_TEST(a_band_far_above_the_bars_is_said_not_drawn)
{
    g_autofree char *keyfile = fixture_write_keyfile(
        "[limit:api]\nalgorithm = fixed_window\nlimit = 3\nwindow = 1s\nbands = 1000000/1s\n");
    g_autofree char *trace = write_trace();
    g_autofree char *svg = draw(keyfile, trace, NULL);
    g_autoptr(GPtrArray) panels = read_svg(svg);
    ck_assert_int_eq(((panel *)g_ptr_array_index(panels, 0))->limit_line, 1);
    ck_assert(strstr(svg, "1000000 per 1s = 50000 per 50ms (above the plot)"));
    g_unlink(trace);
}
END_TEST

/* The picture's size follows the buckets, not the lines: ten times the calls over the
 * same hour draw as many buckets into about as many bytes, under 150 KB a panel. */
START_TEST(the_picture_stays_small_whatever_the_trace)
{
    g_autofree char *keyfile = fixture_write_keyfile(rules);
    gsize size[2];
    gint64 drawn[2];
    for (int t = 0; t < 2; t++) {
        int every_ms = t == 0 ? 250 : 25; /* 14 400 and 144 000 calls in an hour, over 3/s */
        g_autoptr(GString) text = g_string_new(NULL);
        for (int ms = 0; ms < 3600000; ms += every_ms)
            g_string_append_printf(text, "%d api\n", ms);
        g_autofree char *trace = fixture_write_keyfile(text->str);
        g_autofree char *svg =
            run((const char *[]){SLUICE_CLI_PATH, "replay", "-c", keyfile, "--svg", "-", trace, NULL});
        g_autoptr(GPtrArray) panels = read_svg(svg);
        ck_assert_int_eq(panels->len, 1);
        panel *api = g_ptr_array_index(panels, 0);
        ck_assert_int_eq(api->calls, 3600000 / every_ms);
        ck_assert_int_le(api->buckets, 400);
        size[t] = strlen(svg);
        drawn[t] = api->drawn;
        g_unlink(trace);
    }
    ck_assert_int_eq(drawn[0], drawn[1]);
    ck_assert_int_ge(drawn[1], 300);
    ck_assert_msg(size[1] < 150000 && size[1] < size[0] + size[0] / 10,
                  "%zu bytes for 14 400 calls, %zu for 144 000", size[0], size[1]);
}
END_TEST

/* The share of pixels of image within 24 of colour in each channel. */
static double share_of(const png_image *image, const guint8 *rgb, guint32 colour)
{
    gsize n = (gsize)image->width * image->height, near = 0;
    for (gsize i = 0; i < n; i++) {
        const guint8 *p = rgb + 3 * i;
        near += ABS(p[0] - (int)(colour >> 16)) <= 24 &&
                ABS(p[1] - (int)((colour >> 8) & 0xff)) <= 24 &&
                ABS(p[2] - (int)(colour & 0xff)) <= 24;
    }
    return (double)near / (double)n;
}

/* The mean grey level, in grey of the same picture, of the pixels near colour in rgb;
 * -1 when there are none. */
static double grey_of(const png_image *image, const guint8 *rgb, const guint8 *grey, guint32 colour)
{
    gsize n = (gsize)image->width * image->height, near = 0;
    double sum = 0;
    for (gsize i = 0; i < n; i++) {
        const guint8 *p = rgb + 3 * i;
        if (ABS(p[0] - (int)(colour >> 16)) <= 8 && ABS(p[1] - (int)((colour >> 8) & 0xff)) <= 8 &&
            ABS(p[2] - (int)(colour & 0xff)) <= 8) {
            near++;
            sum += grey[i];
        }
    }
    return near ? sum / (double)near : -1;
}

/* The PNG at path, read as `format` (PNG_FORMAT_RGB, PNG_FORMAT_GRAY: libpng converts). */
static guint8 *read_png(const char *path, png_uint_32 format, png_image *image)
{
    memset(image, 0, sizeof *image);
    image->version = PNG_IMAGE_VERSION;
    ck_assert_msg(png_image_begin_read_from_file(image, path), "%s", image->message);
    image->format = format;
    guint8 *pixels = g_malloc(PNG_IMAGE_SIZE(*image));
    ck_assert_msg(png_image_finish_read(image, NULL, pixels, 0, NULL), "%s", image->message);
    return pixels;
}

START_TEST(rsvg_convert_renders_it_to_a_picture_that_is_not_blank)
{
    g_autofree char *keyfile = fixture_write_keyfile(rules);
    g_autofree char *trace = write_trace();
    g_autofree char *svg_path = g_strdup_printf("%s.svg", trace);
    g_autofree char *png_path = g_strdup_printf("%s.png", trace);
    g_free(
        run((const char *[]){SLUICE_CLI_PATH, "replay", "-c", keyfile, "--svg", svg_path, trace, NULL}));
    g_free(run((const char *[]){"rsvg-convert", "-o", png_path, svg_path, NULL}));

    png_image image, grey_image;
    g_autofree guint8 *rgb = read_png(png_path, PNG_FORMAT_RGB, &image);
    g_autofree guint8 *grey = read_png(png_path, PNG_FORMAT_GRAY, &grey_image);
    ck_assert_int_eq(grey_image.width, image.width);
    ck_assert_int_eq(grey_image.height, image.height);
    ck_assert_int_eq(image.width, 1000);
    ck_assert_int_ge(image.height, 400);
    /* white ground; the denied hatching (light and dark orange) covers most of api's
     * plot, the admitted bars and free's all-admitted ones a visible part */
    double white = share_of(&image, rgb, 0xffffff);
    double admitted = share_of(&image, rgb, 0x1f4e79);
    double denied = share_of(&image, rgb, 0xfdb863) + share_of(&image, rgb, 0xb35806);
    ck_assert_msg(white > 0.3 && white < 0.9, "white: %g", white);
    ck_assert_msg(admitted > 0.01, "admitted: %g", admitted);
    ck_assert_msg(denied > 0.05, "denied: %g", denied);
    /* printed in greyscale, admitted (dark) and denied (light, with a mid-grey hatch)
     * stay apart from each other and from the white ground */
    double g_admitted = grey_of(&image, rgb, grey, 0x1f4e79);
    double g_denied = grey_of(&image, rgb, grey, 0xfdb863);
    double g_hatch = grey_of(&image, rgb, grey, 0xb35806);
    ck_assert_msg(g_admitted >= 0 && g_denied >= 0 && g_hatch >= 0, "grey %g %g %g", g_admitted,
                  g_denied, g_hatch);
    ck_assert_msg(g_denied - g_admitted >= 80, "admitted grey %g, denied %g", g_admitted, g_denied);
    ck_assert_msg(g_hatch - g_admitted >= 25, "admitted grey %g, hatch %g", g_admitted, g_hatch);
    ck_assert_msg(255 - g_denied >= 30, "denied grey %g against white", g_denied);
    png_image_free(&image);
    png_image_free(&grey_image);
    g_unlink(png_path);
    g_unlink(svg_path);
    g_unlink(trace);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("replay_svg");
    TCase *tc = tcase_create("replay_svg");
    tcase_add_test(tc, the_svg_has_the_replays_buckets_and_totals);
    tcase_add_test(tc, compare_draws_each_keyfile_on_the_same_trace);
    tcase_add_test(tc, each_band_is_drawn_and_shadow_denials_are_counted);
    tcase_add_test(tc, a_band_far_above_the_bars_is_said_not_drawn);
    tcase_add_test(tc, the_picture_stays_small_whatever_the_trace);
    tcase_add_test(tc, rsvg_convert_renders_it_to_a_picture_that_is_not_blank);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
