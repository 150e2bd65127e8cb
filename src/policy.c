/* SPDX-License-Identifier: MIT */
/* include/sluice/policy.h: penalties, blocks, and the Retry-After header of a
 * downstream's answer (RFC 9110, section 10.2.3) read into a block. */
#include <sluice/policy.h>

#include <string.h>

#include <sluice/error.h>

#include "arguments.h"
#include "clock.h"
#include "engine.h"
#include "value.h"

gboolean sluice_penalize(const char *name, const char *key, gint64 permits, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    sluice__limiter *limiter;
    return sluice__find(name, key, permits, &limiter, error) &&
           sluice__engine_penalize(limiter, key, permits, error);
}

/* A block of duration_us for key of name, the arguments checked. */
static gboolean block(const char *name, const char *key, gint64 duration_us, GError **error)
{
    sluice__limiter *limiter;
    return sluice__find(name, key, 0, &limiter, error) &&
           sluice__engine_block(limiter, key, duration_us, error);
}

gboolean sluice_block(const char *name, const char *key, gint64 duration_ms, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    if (duration_ms < 0 || duration_ms > SLUICE__MAX_DURATION_US / 1000) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT,
                    "duration_ms is %s; expected 0 (lifts a block) to 3153600000000 (36500d)",
                    duration_ms < 0 ? "negative" : "too large");
        return FALSE;
    }
    return block(name, key, duration_ms * 1000, error);
}

/* ---- Retry-After ------------------------------------------------------------------- */

/* Reads exactly n digits at *p (moving it past them) into *out. */
static gboolean digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (!g_ascii_isdigit(**p))
            return FALSE;
        v = v * 10 + (**p - '0');
    }
    *out = v;
    return TRUE;
}

/* Reads `text` at *p (moving past it). */
static gboolean literal(const char **p, const char *text)
{
    gsize n = strlen(text);
    if (strncmp(*p, text, n) != 0)
        return FALSE;
    *p += n;
    return TRUE;
}

/* Reads one of names (three letters each, or the full day names) at *p: its index. */
static gboolean one_of(const char **p, const char *const *names, int *out)
{
    for (int i = 0; names[i]; i++) {
        if (literal(p, names[i])) {
            *out = i;
            return TRUE;
        }
    }
    return FALSE;
}

static const char *const days[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", NULL};
static const char *const long_days[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                        "Friday", "Saturday", "Sunday",    NULL};
static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul",
                                     "Aug", "Sep", "Oct", "Nov", "Dec", NULL};

/* "HH:MM:SS" at *p. */
static gboolean time_of_day(const char **p, int *h, int *m, int *s)
{
    return digits(p, 2, h) && literal(p, ":") && digits(p, 2, m) && literal(p, ":") &&
           digits(p, 2, s);
}

/* An HTTP-date (RFC 9110 section 5.6.7) in µs since the epoch; FALSE when text is
 * none of its three forms, or names a day or time that does not exist. now_us
 * places an RFC 850 date's two-digit year: not more than 50 years ahead. */
static gboolean http_date(const char *text, gint64 now_us, gint64 *out_us)
{
    const char *p = text;
    int weekday, day = 0, month = 0, year = 0, h, m, s;
    gboolean ok;
    if (one_of(&p, long_days, &weekday) && literal(&p, ", ")) { /* Sunday, 06-Nov-94 08:49:37 GMT */
        ok = digits(&p, 2, &day) && literal(&p, "-") && one_of(&p, months, &month) &&
             literal(&p, "-") && digits(&p, 2, &year) && literal(&p, " ") &&
             time_of_day(&p, &h, &m, &s) && literal(&p, " GMT");
        g_autoptr(GDateTime) today = g_date_time_new_from_unix_utc(now_us / 1000000);
        int now_year = today ? g_date_time_get_year(today) : 1970;
        year += now_year - now_year % 100;
        if (year > now_year + 50)
            year -= 100;
    } else if (p = text, one_of(&p, days, &weekday) && literal(&p, ", ")) {
        ok = digits(&p, 2, &day) && literal(&p, " ") && /* Sun, 06 Nov 1994 08:49:37 GMT */
             one_of(&p, months, &month) && literal(&p, " ") && digits(&p, 4, &year) &&
             literal(&p, " ") && time_of_day(&p, &h, &m, &s) && literal(&p, " GMT");
    } else if (p = text, one_of(&p, days, &weekday) && literal(&p, " ")) {
        ok = one_of(&p, months, &month) && literal(&p, " "); /* Sun Nov  6 08:49:37 1994 */
        if (ok && *p == ' ') {
            p++;
            ok = digits(&p, 1, &day);
        } else {
            ok = ok && digits(&p, 2, &day);
        }
        ok = ok && literal(&p, " ") && time_of_day(&p, &h, &m, &s) && literal(&p, " ") &&
             digits(&p, 4, &year);
    } else {
        return FALSE;
    }
    if (!ok || *p != '\0' || h > 23 || m > 59 || s > 60)
        return FALSE;
    /* a leap second is the end of its minute */
    g_autoptr(GDateTime) t = g_date_time_new_utc(year, month + 1, day, h, m, MIN(s, 59));
    if (!t || g_date_time_get_day_of_week(t) != weekday + 1)
        return FALSE; /* no such day, or not that day of the week */
    *out_us = g_date_time_to_unix(t) * 1000000 + (s == 60 ? 1000000 : 0);
    return TRUE;
}

/* The block a Retry-After value asks for, in µs from now_us (0: none), or FALSE
 * with a sentence. */
static gboolean retry_after_us(const char *value, gint64 now_us, gint64 *out_us, char **why)
{
    g_autofree char *text = g_strstrip(g_strdup(value)); /* OWS around it */
    const gint64 most_us = (gint64)SLUICE_RETRY_AFTER_MAX_S * 1000000;
    if (*text && strspn(text, "0123456789") == strlen(text)) { /* delay-seconds */
        gsize n = strlen(text);
        while (n > 1 && *text == '0')
            memmove(text, text + 1, n--);
        if (n > 6 || g_ascii_strtoll(text, NULL, 10) > SLUICE_RETRY_AFTER_MAX_S) {
            *why = g_strdup_printf("\"%s\" seconds is more than a day; refused as nonsense", value);
            return FALSE;
        }
        *out_us = g_ascii_strtoll(text, NULL, 10) * 1000000;
        return TRUE;
    }
    gint64 at_us;
    if (!http_date(text, now_us, &at_us)) {
        g_autofree char *shown = g_utf8_make_valid(value, MIN(strlen(value), 80));
        *why = g_strdup_printf("\"%s\" is neither delay-seconds (\"120\") nor an HTTP-date "
                               "(\"Wed, 21 Oct 2015 07:28:00 GMT\")",
                               shown);
        return FALSE;
    }
    *out_us = MAX(0, at_us - now_us);
    if (*out_us > most_us) {
        *why = g_strdup_printf("\"%s\" is more than a day away; refused as nonsense", value);
        return FALSE;
    }
    return TRUE;
}

gboolean sluice_block_retry_after(const char *name, const char *key, const char *header_value,
                                  GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    char *why = NULL;
    gint64 now_us = sluice__clock_injected() ? sluice__clock_now() : g_get_real_time();
    gint64 us = 0;
    if (!header_value) {
        why = g_strdup("header_value is NULL; expected a Retry-After value");
    } else if (!retry_after_us(header_value, now_us, &us, &why)) {
        /* why says it */
    } else if (us == 0) {
        sluice__limiter *limiter; /* now or past: nothing to block, the arguments checked */
        return sluice__find(name, key, 0, &limiter, error);
    } else {
        return block(name, key, us, error);
    }
    g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT, "Retry-After: %s", why);
    g_free(why);
    return FALSE;
}
