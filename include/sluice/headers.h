/* SPDX-License-Identifier: MIT */
/** @file
 * HTTP rate-limit headers from a decision: Retry-After and the IETF RateLimit-* fields. */
#ifndef SLUICE_HEADERS_H
#define SLUICE_HEADERS_H

#include <glib.h>
#include <sluice/acquire.h>
#include <sluice/export.h>

G_BEGIN_DECLS

#define SLUICE_HEADERS_MAX       4  /**< the most headers one decision gives                 */
#define SLUICE_HEADER_VALUE_SIZE 16 /**< the longest value ("999999999999999") and its NUL   */
/** Seconds are capped here: RFC 9111 1.2.2 reads any larger delta-seconds as this one. */
#define SLUICE_HEADER_SECONDS_MAX G_GINT64_CONSTANT(2147483648)
/** Counts are capped here: the largest Structured Field Integer (RFC 8941 3.3.1). */
#define SLUICE_HEADER_COUNT_MAX G_GINT64_CONSTANT(999999999999999)

/** One HTTP response header. */
typedef struct {
    const char *name;                     /**< a static string, e.g. "RateLimit-Limit" */
    char value[SLUICE_HEADER_VALUE_SIZE]; /**< a non-negative decimal integer           */
} sluice_header;

/** The headers of one decision, in fixed buffers. */
typedef struct {
    guint n;                                  /**< headers in `header`, 0 to SLUICE_HEADERS_MAX */
    sluice_header header[SLUICE_HEADERS_MAX]; /**< the headers, in the order below */
} sluice_headers;

/** Fills *out with the response headers that tell a client about `decision`, in
 * this order, without allocating and without any HTTP library:
 *
 *   RateLimit-Limit      decision->limit (the capacity)
 *   RateLimit-Remaining  decision->remaining
 *   RateLimit-Reset      decision->reset_after_ms in seconds, rounded up
 *   Retry-After          decision->retry_after_ms in seconds, rounded up
 *
 * The three RateLimit fields (draft-ietf-httpapi-ratelimit-headers) go out when a
 * rule decided: 0 < limit < G_MAXINT64. A name with no rule (limit G_MAXINT64)
 * and a call refused before any rule decided (limit 0) give none. Retry-After
 * goes out only with a denial that can pass later (retry_after_ms >= 0): never
 * when allowed, nor for permits that can never pass (retry_after_ms -1), where
 * retrying the same request is pointless. Rounding is up, so a client that
 * waits Retry-After seconds is never early: 1 ms gives 1, 1000 ms gives 1, 1001
 * ms gives 2, and 0 ms gives 0. Seconds above SLUICE_HEADER_SECONDS_MAX (68
 * years) are sent as that; counts above SLUICE_HEADER_COUNT_MAX as that.
 *
 * Returns FALSE with SLUICE_ERROR_INVALID_ARGUMENT (and out->n = 0 when out is
 * not NULL) when decision or out is NULL, or when the decision is one sluice never
 * gives: a negative limit, remaining or reset_after_ms, remaining above limit, or
 * retry_after_ms below -1. */
SLUICE_API gboolean sluice_headers_from_decision(const sluice_decision *decision,
                                                 sluice_headers *out, GError **error);

G_END_DECLS

#endif
