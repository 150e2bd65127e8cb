/* SPDX-License-Identifier: MIT */
/* Retry-After and the RateLimit-* headers from a decision, in fixed buffers. */
#include <sluice/error.h>
#include <sluice/headers.h>

static gboolean invalid(GError **error, const char *what)
{
    g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT, "%s", what);
    return FALSE;
}

/* Milliseconds as whole seconds, rounded up and capped; ms >= 0. */
static gint64 seconds_of(gint64 ms)
{
    gint64 s = ms / 1000 + (ms % 1000 != 0);
    return MIN(s, SLUICE_HEADER_SECONDS_MAX);
}

/* value (0 to SLUICE_HEADER_COUNT_MAX) in decimal as the next header. */
static void add(sluice_headers *out, const char *name, gint64 value)
{
    sluice_header *h = &out->header[out->n++];
    char digits[SLUICE_HEADER_VALUE_SIZE];
    int n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0);
    h->name = name;
    for (int i = 0; i < n; i++)
        h->value[i] = digits[n - 1 - i];
    h->value[n] = '\0';
}

static gboolean check(const sluice_decision *d, GError **error)
{
    if (d->limit < 0)
        return invalid(error, "decision->limit is negative");
    if (d->remaining < 0)
        return invalid(error, "decision->remaining is negative");
    if (d->remaining > d->limit)
        return invalid(error, "decision->remaining is above decision->limit");
    if (d->retry_after_ms < -1)
        return invalid(error, "decision->retry_after_ms is below -1");
    if (d->reset_after_ms < 0)
        return invalid(error, "decision->reset_after_ms is negative");
    return TRUE;
}

gboolean sluice_headers_from_decision(const sluice_decision *decision, sluice_headers *out,
                                      GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    if (out)
        out->n = 0;
    if (!decision)
        return invalid(error, "decision is NULL");
    if (!out)
        return invalid(error, "out is NULL");
    if (!check(decision, error))
        return FALSE;
    if (decision->limit > 0 && decision->limit < G_MAXINT64) {
        add(out, "RateLimit-Limit", MIN(decision->limit, SLUICE_HEADER_COUNT_MAX));
        add(out, "RateLimit-Remaining", MIN(decision->remaining, SLUICE_HEADER_COUNT_MAX));
        add(out, "RateLimit-Reset", seconds_of(decision->reset_after_ms));
    }
    if (!decision->allowed && decision->retry_after_ms >= 0)
        add(out, "Retry-After", seconds_of(decision->retry_after_ms));
    return TRUE;
}
