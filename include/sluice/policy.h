/* SPDX-License-Identifier: MIT */
/** @file
 * Per-key policy from the program: penalties, blocks, and a downstream's Retry-After,
 * on every process the backend shares. */
#ifndef SLUICE_POLICY_H
#define SLUICE_POLICY_H

#include <glib.h>
#include <sluice/export.h>

G_BEGIN_DECLS

/** The longest block sluice_block_retry_after takes from a Retry-After header: one
 * day, in seconds. A longer one is refused as nonsense. */
#define SLUICE_RETRY_AFTER_MAX_S 86400

/** Takes `permits` permits of the limit `name` for `key` (NULL: no key; ignored when
 * the rule says per_key = false) without a call, even past what is left: the key
 * then waits longer (a failed login costing more than a successful one). The
 * permits count as admitted now, up to one capacity of debt (docs/algorithms.md
 * says what that is for each algorithm). The key's override applies; a key whose
 * override is `blocked` or `unlimited`, a name with no rule, and permits = 0 take
 * nothing: TRUE. Bad arguments are SLUICE_ERROR_INVALID_ARGUMENT (as for
 * sluice_acquire); a concurrency limit SLUICE_ERROR_NOT_SUPPORTED (it counts calls
 * in flight: there is nothing to take), and an adaptive one (each process decides
 * it apart, by its own latency; sluice_block refuses it too); before sluice_init
 * SLUICE_ERROR_NOT_INITIALIZED; a backend failure SLUICE_ERROR_BACKEND. */
SLUICE_API gboolean sluice_penalize(const char *name, const char *key, gint64 permits,
                                    GError **error);

/** Denies every call on the limit `name` for `key` (NULL: no key; ignored when the
 * rule says per_key = false) for duration_ms from now on the backend's clock, on
 * every process the backend shares, replacing a block in force; 0 lifts a block
 * (the key's state stays; sluice_reset lifts both). A blocked call's decision has
 * blocked TRUE and retry_after_ms until the block ends, and is counted in the
 * stats' blocked. duration_ms is 0 to 36500 days. A key whose override is `blocked`
 * or `unlimited` and a name with no rule are decided without the block: TRUE.
 * Errors as sluice_penalize. */
SLUICE_API gboolean sluice_block(const char *name, const char *key, gint64 duration_ms,
                                 GError **error);

/** Blocks `key` of the limit `name` for as long as a downstream's Retry-After header
 * asks (the value of a 429 or 503 answer): delay-seconds ("120") or an HTTP-date
 * (IMF-fixdate "Wed, 21 Oct 2015 07:28:00 GMT", or the obsolete RFC 850 and
 * asctime forms every HTTP recipient reads), compared with the wall clock (a
 * virtual clock's time, under sluice_clock_set). A value of 0, or a date that has
 * passed, blocks nothing: TRUE. Refused with SLUICE_ERROR_INVALID_ARGUMENT, blocking
 * nothing: NULL, a value that is neither form (a sign, a fraction, trailing text, a
 * day or time that does not exist), and one more than SLUICE_RETRY_AFTER_MAX_S
 * away. Otherwise as sluice_block. */
SLUICE_API gboolean sluice_block_retry_after(const char *name, const char *key,
                                             const char *header_value, GError **error);

G_END_DECLS

#endif
