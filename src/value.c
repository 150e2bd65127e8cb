/* SPDX-License-Identifier: MIT */
/* Parsing of keyfile values: whole numbers, durations with units, booleans. */
#include "value.h"

#include <string.h>

static const struct {
    const char *suffix;
    gint64 us;
} units[] = {
    {"ms", 1000},
    {"s", G_GINT64_CONSTANT(1000000)},
    {"m", G_GINT64_CONSTANT(60000000)},
    {"h", G_GINT64_CONSTANT(3600000000)},
    {"d", G_GINT64_CONSTANT(86400000000)},
};

/* Reads the leading digits of text into *out (saturating past max); returns the
 * number of digits. */
static gsize read_digits(const char *text, gint64 max, gint64 *out, gboolean *overflow)
{
    gsize n = 0;
    gint64 v = 0;
    *overflow = FALSE;
    for (; g_ascii_isdigit(text[n]); n++) {
        int d = text[n] - '0';
        if (v > (G_MAXINT64 - d) / 10 || v * 10 + d > max) {
            *overflow = TRUE;
            v = max;
        } else if (!*overflow) {
            v = v * 10 + d;
        }
    }
    *out = v;
    return n;
}

gboolean sluice__parse_count(const char *text, gint64 min, gint64 max, gint64 *out, char **why)
{
    gboolean overflow;
    gint64 v;
    gsize n = read_digits(text, max, &v, &overflow);

    if (text[0] == '-' && g_ascii_isdigit(text[1])) {
        *why = g_strdup_printf("must be a whole number of at least %" G_GINT64_FORMAT, min);
        return FALSE;
    }
    if (n == 0 || text[n] != '\0') {
        *why = g_strdup_printf("not a whole number, e.g. %" G_GINT64_FORMAT, MAX(min, 10));
        return FALSE;
    }
    if (overflow) {
        *why = g_strdup_printf("too large; at most %" G_GINT64_FORMAT, max);
        return FALSE;
    }
    if (v < min) {
        *why = g_strdup_printf("must be at least %" G_GINT64_FORMAT, min);
        return FALSE;
    }
    *out = v;
    return TRUE;
}

char *sluice__format_duration(gint64 us)
{
    for (int i = G_N_ELEMENTS(units) - 1; i >= 0; i--) {
        if (us >= units[i].us && us % units[i].us == 0)
            return g_strdup_printf("%" G_GINT64_FORMAT "%s", us / units[i].us, units[i].suffix);
    }
    return g_strdup_printf("%" G_GINT64_FORMAT "us", us);
}

/* Why whole.FRACTION_AND_UNIT is refused: said in a smaller whole unit when it is
 * a whole number of milliseconds (1.5s: 1500ms), else what is expected. */
static char *fraction(gint64 whole, gboolean overflow, const char *fraction_and_unit, gint64 max_us)
{
    gint64 digits = 0, scale = 1;
    const char *p = fraction_and_unit;
    for (; g_ascii_isdigit(*p) && scale < 1000000; p++) { /* µs are the finest */
        digits = digits * 10 + (*p - '0');
        scale *= 10;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(units); i++) {
        gint64 u = units[i].us;
        if (strcmp(p, units[i].suffix) != 0 || overflow || whole >= max_us / u)
            continue;
        gint64 us = whole * u + digits * u / scale; /* digits * u < 10^6 * 8.64 10^10 */
        if (us == 0)
            return g_strdup("must be greater than 0");
        if (digits * u % scale == 0 && us % 1000 == 0) {
            g_autofree char *as = sluice__format_duration(us);
            return g_strdup_printf("not a whole number; write it as %s", as);
        }
    }
    return g_strdup("not a whole number of milliseconds; expected a whole number of ms, s, m, "
                    "h or d, e.g. 1500ms");
}

gboolean sluice__parse_duration(const char *text, gint64 min_us, gint64 max_us, gint64 *out_us,
                                char **why)
{
    gboolean overflow;
    gint64 v;
    gsize n = read_digits(text, G_MAXINT64, &v, &overflow);
    const char *unit = text + n;
    g_autofree char *largest = sluice__format_duration(max_us);

    if (text[0] == '-' && g_ascii_isdigit(text[1])) {
        *why = g_strdup("must not be negative");
        return FALSE;
    }
    if (n == 0) {
        *why = g_strdup("not a duration, e.g. 10s (units: ms s m h d)");
        return FALSE;
    }
    if (*unit == '\0') {
        if (v == 0 && min_us == 0) {
            *out_us = 0;
            return TRUE;
        }
        if (v == 0) {
            *why = g_strdup("must be greater than 0");
            return FALSE;
        }
        *why = g_strdup_printf("missing unit, e.g. %.20ss", text);
        return FALSE;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(units); i++) {
        if (strcmp(unit, units[i].suffix) != 0)
            continue;
        if (overflow || v > max_us / units[i].us) {
            *why = g_strdup_printf("too long; at most %s", largest);
            return FALSE;
        }
        v *= units[i].us;
        if (v < min_us) {
            g_autofree char *least = sluice__format_duration(min_us);
            *why = v == 0 ? g_strdup("must be greater than 0")
                          : g_strdup_printf("must be at least %s", least);
            return FALSE;
        }
        *out_us = v;
        return TRUE;
    }
    if (*unit == '.' && g_ascii_isdigit(unit[1])) {
        *why = fraction(v, overflow, unit + 1, max_us);
        return FALSE;
    }
    g_autofree char *shown = g_utf8_make_valid(unit, strnlen(unit, 20)); /* 10 MB of units */
    *why = g_strdup_printf("unknown unit \"%s%s\"; expected ms, s, m, h or d", shown,
                           strlen(unit) > 20 ? "…" : "");
    return FALSE;
}

static const struct {
    char suffix;
    int shift;
} size_units[] = {{'K', 10}, {'M', 20}, {'G', 30}};

char *sluice__format_size(gint64 bytes)
{
    for (int i = G_N_ELEMENTS(size_units) - 1; i >= 0; i--) {
        gint64 u = G_GINT64_CONSTANT(1) << size_units[i].shift;
        if (bytes >= u && bytes % u == 0)
            return g_strdup_printf("%" G_GINT64_FORMAT "%c", bytes / u, size_units[i].suffix);
    }
    return g_strdup_printf("%" G_GINT64_FORMAT, bytes);
}

gboolean sluice__parse_size(const char *text, gint64 min, gint64 max, gint64 *out, char **why)
{
    gboolean overflow;
    gint64 v;
    gsize n = read_digits(text, G_MAXINT64, &v, &overflow);
    g_autofree char *least = sluice__format_size(min);
    g_autofree char *most = sluice__format_size(max);
    int shift = -1;
    if (text[n] == '\0')
        shift = 0;
    for (gsize i = 0; i < G_N_ELEMENTS(size_units); i++)
        if (text[n] == size_units[i].suffix && text[n + 1] == '\0')
            shift = size_units[i].shift;
    if (n == 0 || shift < 0) {
        *why = g_strdup("not a size, e.g. 64M (units: K M G, 1K = 1024 bytes)");
        return FALSE;
    }
    if (overflow || v > (max >> shift)) {
        *why = g_strdup_printf("too large; at most %s", most);
        return FALSE;
    }
    v <<= shift;
    if (v < min) {
        *why = g_strdup_printf("too small; at least %s", least);
        return FALSE;
    }
    *out = v;
    return TRUE;
}

gboolean sluice__parse_bool(const char *text, gboolean *out, char **why)
{
    static const char *const words[] = {"false", "true", NULL};
    int i;
    if (!sluice__parse_choice(text, words, &i, why))
        return FALSE;
    *out = i == 1;
    return TRUE;
}

gboolean sluice__parse_choice(const char *text, const char *const *choices, int *out, char **why)
{
    GString *list = g_string_new(NULL);
    for (int i = 0; choices[i]; i++) {
        if (strcmp(text, choices[i]) == 0) {
            *out = i;
            g_string_free(list, TRUE);
            return TRUE;
        }
        if (i > 0)
            g_string_append(list, choices[i + 1] ? ", " : " or ");
        g_string_append(list, choices[i]);
    }
    *why = g_strdup_printf("expected %s", list->str);
    g_string_free(list, TRUE);
    return FALSE;
}
