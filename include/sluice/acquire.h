/* SPDX-License-Identifier: MIT */
/** @file
 * The core API: ask for permits, give them back (and, through <sluice/lifecycle.h>,
 * load the keyfile). */
#ifndef SLUICE_ACQUIRE_H
#define SLUICE_ACQUIRE_H

#include <glib.h>
#include <sluice/export.h>
#include <sluice/lifecycle.h>

G_BEGIN_DECLS

/** Return codes of sluice_acquire and sluice_acquire_wait. @{ */
#define SLUICE_ALLOWED 1
#define SLUICE_DENIED  0
#define SLUICE_FAILED  (-1)
/** @} */

/** What a limit decided for a call. */
typedef struct {
    gboolean allowed;      /**< the permits pass (or on_error let the call through) */
    gint64 limit;          /**< capacity: most permits that can pass at once      */
    gint64 remaining;      /**< permits that could still pass now                 */
    gint64 retry_after_ms; /**< -1 when allowed, and when `permits` can never pass */
    gint64 reset_after_ms; /**< until the limiter is back to full capacity        */
    gboolean blocked;      /**< denied by a block (sluice_block, or the key's
                            * override `blocked`), not by the limit; retry_after_ms
                            * says when the block ends (-1: never)             */
} sluice_decision;

/** One decision for `permits` permits of the limit `name`, for the caller `key`
 * (NULL: none; ignored when the rule says per_key = false). permits = 0 is a
 * peek: nothing is consumed and out->allowed says whether one permit would pass.
 * A name with no rule is not limited: SLUICE_ALLOWED with limit and remaining
 * G_MAXINT64. The rule's `wait` applies. In shadow mode the decision is made and
 * counted but SLUICE_ALLOWED is returned. Returns SLUICE_ALLOWED, SLUICE_DENIED,
 * or SLUICE_FAILED when the arguments are bad (SLUICE_ERROR_INVALID_ARGUMENT,
 * out->allowed FALSE) or the backend failed (*error says why, out->allowed
 * carries the on_error policy's verdict). out may be NULL. */
SLUICE_API int sluice_acquire(const char *name, const char *key, gint64 permits,
                              sluice_decision *out, GError **error);

/** As sluice_acquire, but waits up to timeout_ms (instead of the rule's `wait`)
 * for the permits: it sleeps exactly until they are due and never polls. A
 * token_bucket waiter reserves its tokens when it starts waiting, so no later
 * caller takes them. Returns at once when the permits can never pass or are not
 * due within timeout_ms; a concurrency waiter instead waits up to timeout_ms for
 * a release (sluice_release wakes it at once). */
SLUICE_API int sluice_acquire_wait(const char *name, const char *key, gint64 permits,
                                   gint64 timeout_ms, sluice_decision *out, GError **error);

/** Gives back permits of a concurrency limit, or ends calls of an adaptive limit as
 * sluice_release_outcome with SLUICE_OUTCOME_OK does (other algorithms ignore it;
 * so does a name with no rule). The macros do this when the decorated body
 * returns. */
SLUICE_API void sluice_release(const char *name, const char *key, gint64 permits);

/** How a call that an adaptive limit (algorithm = adaptive) admitted ended. */
typedef enum {
    /** It returned: the time since its admission is a latency sample of the
     * downstream it called, and sets the limit with the others. */
    SLUICE_OUTCOME_OK = 0,
    /** It failed as an overloaded downstream fails (a timeout, a refusal, a reset
     * connection): not a latency sample, and the limit falls. */
    SLUICE_OUTCOME_DROPPED = 1,
    /** It says nothing of the downstream (the caller gave up, the request was
     * bad): its permits are only given back. */
    SLUICE_OUTCOME_IGNORE = 2,
} sluice_outcome;

/** sluice_release for an adaptive limit: gives back `permits` calls in flight
 * and says how they ended. The latency of an ok call runs from the sluice_acquire
 * (or sluice_acquire_wait, or the completion of sluice_acquire_async) of `name`
 * that the calling thread made last and has not released, to now, on the clock
 * of decisions; a call admitted on another thread is given back without a
 * sample. Permits given back for more calls than are in flight give back those
 * there are. For any other algorithm the outcome is ignored and this is
 * sluice_release. */
SLUICE_API void sluice_release_outcome(const char *name, const char *key, gint64 permits,
                                       sluice_outcome outcome);

/** The decision of the last decorated call on this thread, as sluice_acquire would
 * have given it. In a degrade function or a guard's fallback it is the denial that
 * made it answer, and in a body the admission: enough for the Retry-After and
 * RateLimit-* headers (sluice_headers_from_decision) without asking the limiter
 * again. Returns SLUICE_ALLOWED, SLUICE_DENIED, or SLUICE_FAILED when the limiter
 * failed (out->allowed is then the on_error verdict). A call whose name has no
 * rule (or made before sluice_init) gives SLUICE_ALLOWED with limit and remaining
 * G_MAXINT64; a thread that has made no decorated call gets SLUICE_FAILED and
 * {FALSE, 0, 0, -1, 0}. out must not be NULL. */
SLUICE_API int sluice_last_decision(sluice_decision *out);

G_END_DECLS

#endif
