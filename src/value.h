/* SPDX-License-Identifier: MIT */
/* Parsing of keyfile values: whole numbers, durations with units, booleans. */
#ifndef SLUICE_VALUE_H
#define SLUICE_VALUE_H

#include <glib.h>

/* The largest duration sluice computes with: 36500 days (about 100 years), in
 * microseconds. Redis TIME plus this stays under 2^53, exact in Lua's doubles. */
#define SLUICE__MAX_DURATION_US (G_GINT64_CONSTANT(36500) * 86400 * 1000000)
/* The largest limit or burst: 2^50, so that sums of permits stay exact in Lua. */
#define SLUICE__MAX_PERMITS (G_GINT64_CONSTANT(1) << 50)
/* The largest limit of sliding_log and concurrency, which Redis keeps as one
 * member per permit: a call for all of them writes that many (about 0.1 s of
 * Redis time and 10 MB). */
#define SLUICE__MAX_LOGGED_PERMITS G_GINT64_CONSTANT(100000)
/* The longest limit name, in bytes (every Redis key holds it). */
#define SLUICE__MAX_NAME_BYTES 1024
/* The longest key a caller may pass, in bytes (longer ones are refused). */
#define SLUICE__MAX_KEY_BYTES (64 * 1024)

/* Each parser returns TRUE and *out, or FALSE and a newly allocated sentence
 * saying what is expected (no file or key: the caller adds those). */

/* A whole number in [min, max], digits only. */
gboolean sluice__parse_count(const char *text, gint64 min, gint64 max, gint64 *out, char **why);
/* A duration with a unit (ms s m h d), in microseconds, in [min_us, max_us]; "0"
 * alone is accepted when min_us is 0. */
gboolean sluice__parse_duration(const char *text, gint64 min_us, gint64 max_us, gint64 *out_us,
                                char **why);
/* A size in bytes: digits and a binary unit, K, M or G (1K = 1024 bytes), or digits
 * alone for bytes; in [min, max]. */
gboolean sluice__parse_size(const char *text, gint64 min, gint64 max, gint64 *out, char **why);
/* A size in its largest whole binary unit: "64M", "1536K", "100". */
char *sluice__format_size(gint64 bytes);

/* true or false. */
gboolean sluice__parse_bool(const char *text, gboolean *out, char **why);
/* One of a NULL-terminated list of words: its index. */
gboolean sluice__parse_choice(const char *text, const char *const *choices, int *out, char **why);

/* A duration in the keyfile's own notation, the largest whole unit: "10s", "1500ms". */
char *sluice__format_duration(gint64 us);

#endif
