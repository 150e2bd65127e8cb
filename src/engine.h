/* SPDX-License-Identifier: MIT */
/* The engine: applies a rule (permits, wait, shadow mode, on_error) through a backend. */
#ifndef SLUICE_ENGINE_H
#define SLUICE_ENGINE_H

#include <glib.h>
#include <sluice/acquire.h>

#include "adaptive/in_flight.h"
#include "backend.h"
#include "limiter.h"
#include "counters.h"

/* Sets where decisions go: `backend`, and `local` (the memory backend) for
 * on_error = local, and whether a remote backend's denials are kept in the denial
 * cache. All stay until the next call; NULL, NULL at shutdown. */
void sluice__engine_set_backends(sluice__backend *backend, sluice__backend *local,
                                 gboolean denial_cache);
/* Calls func for each server of the current backend, with its breaker's state. */
void sluice__engine_breakers(sluice__breaker_func func, gpointer data);

/* One decision for limiter under its current rule. wait_us < 0: the rule's wait.
 * Returns SLUICE_ALLOWED, SLUICE_DENIED or SLUICE_FAILED (backend failure: *error
 * set, out->allowed is the policy's verdict). *taken is set to the permits that
 * must be given back with sluice__engine_release (concurrency), to minus the calls
 * that must be ended with sluice__engine_end_calls (adaptive), else 0. The
 * decision is counted in the limiter's stats and in `site` (a decorated
 * function's; may be NULL). */
int sluice__engine_acquire(sluice__limiter *limiter, const char *key, gint64 permits,
                           gint64 wait_us, sluice_decision *out, gint64 *taken,
                           sluice__counters *site, GError **error);

/* Gives back concurrency permits, or ends adaptive calls as `end` says, as the
 * current rule has them, and wakes callers waiting for them. */
void sluice__engine_release(sluice__limiter *limiter, const char *key, gint64 permits,
                            sluice__call_end end);

/* Ends `calls` calls of limiter that an adaptive rule admitted (whatever its rule
 * is now) as `end` says, and wakes callers waiting for them. */
void sluice__engine_end_calls(sluice__limiter *limiter, gint64 calls, sluice__call_end end);

/* Forgets the state of key under limiter (the key is ignored when the rule says
 * per_key = false) in the backend, and in the memory backend too when on_error =
 * local may have used it; wakes callers waiting for concurrency permits. limiter
 * NULL: nothing is kept, TRUE. FALSE with *error when the backend failed, or
 * SLUICE_ERROR_NOT_INITIALIZED before sluice_init. */
gboolean sluice__engine_reset(sluice__limiter *limiter, const char *key, GError **error);

/* sluice_penalize: takes `permits` of key's state under limiter as if admitted
 * (the key is ignored when the rule says per_key = false; its override's rule
 * applies). TRUE with nothing done for limiter NULL, a name with no rule, a key
 * whose override is blocked or unlimited, and 0 permits. FALSE with *error: a
 * concurrency rule (SLUICE_ERROR_NOT_SUPPORTED), a backend that cannot, or failed,
 * SLUICE_ERROR_NOT_INITIALIZED before sluice_init. */
gboolean sluice__engine_penalize(sluice__limiter *limiter, const char *key, gint64 permits,
                                 GError **error);
/* sluice_block: denies every call on key under limiter for duration_us (0: lifts the
 * block), as sluice__engine_penalize finds the key and rule; the denial cache forgets
 * what it holds for the key. */
gboolean sluice__engine_block(sluice__limiter *limiter, const char *key, gint64 duration_us,
                              GError **error);

/* The on_error verdict when no backend can decide the call at all: TRUE unless
 * the policy is deny (local, with nothing to decide in process, allows). */
static inline gboolean sluice__engine_policy_allows(const sluice__rule *rule)
{
    return rule->on_error != SLUICE__ON_ERROR_DENY;
}

/* The decision that goes with a call refused before any limit decided it (bad
 * arguments, not initialized): denied, nothing known of the limit. */
static inline sluice_decision sluice__engine_refused(void)
{
    return (sluice_decision){FALSE, 0, 0, -1, 0, FALSE};
}

/* The decision for a name with no rule: allowed, unlimited. */
void sluice__engine_unlimited(sluice_decision *out);

/* ---- the pieces of a decision, for the asynchronous API ------------------------ */

/* What a caller does after the backend's verdict (the waiting policy of both the
 * blocking and the asynchronous API). */
typedef enum {
    SLUICE__NEXT_FINISH,   /* the verdict is the answer                              */
    SLUICE__NEXT_RESERVED, /* allowed once due: sleep until *until, then answer      */
    SLUICE__NEXT_RETRY,    /* sleep until *until, then ask again                     */
    SLUICE__NEXT_RELEASE,  /* as RETRY, but a release (concurrency) ends the sleep too */
} sluice__next;

/* The next step of a caller that got v and may wait wait_us (<= 0: not at all)
 * until deadline, reading the clock `now` only when the answer depends on the time
 * (so an answer given at once costs no clock read). A caller waits only for permits
 * due by its deadline, or for a concurrency release up to it. */
sluice__next sluice__engine_next(const sluice__rule *rule, const sluice__verdict *v, gint64 wait_us,
                                 gint64 deadline, gint64 (*now)(void), gint64 *until);

/* The reservation a waiting token_bucket caller asks for (until its deadline), 0
 * for every other caller (which costs no clock read). */
gint64 sluice__engine_reserve_us(const sluice__rule *rule, gint64 wait_us, gint64 deadline,
                                 gint64 (*now)(void));

/* One ask of the backend without blocking: done is called with the verdict (on
 * failure: the on_error verdict, and the failure, which done owns), from
 * `context` or before this returns. key is copied. */
void sluice__engine_ask_async(sluice__limiter *limiter, const sluice__rule *rule, const char *key,
                              gint64 permits, gint64 reserve_us, GMainContext *context,
                              sluice__decided_func done, gpointer data);

/* A verdict as the caller sees it (milliseconds), with shadow mode applied. */
void sluice__engine_to_decision(const sluice__verdict *v, sluice_decision *out);
/* The final verdict of a decision under rule: *out as the caller sees it, the bands
 * that refused counted in limiter's stats, and the outcome to count. */
sluice__outcome sluice__engine_settle(sluice__limiter *limiter, const sluice__rule *rule,
                                      const sluice__verdict *v, sluice_decision *out);

/* Starts timing a decision: a start for sluice__engine_count, or -1 (not timed). */
gint64 sluice__engine_timing_start(void);
/* Counts a finished decision in the limiter's stats and in site (may be NULL);
 * returns the sluice_acquire code of the outcome. */
int sluice__engine_count(sluice__limiter *limiter, sluice__counters *site, sluice__outcome outcome,
                         gboolean waited, gint64 start);

/* How many times concurrency permits have been given back so far. */
guint64 sluice__engine_releases(void);
/* Called (outside any lock) after every give-back; NULL: none. */
typedef void (*sluice__engine_release_func)(void);
void sluice__engine_on_release(sluice__engine_release_func hook);

/* What the current backend's zone holds (backend = shm): FALSE with *error before
 * sluice_init or when the backend has no zone. */
gboolean sluice__engine_zone(sluice_zone_info *out, GError **error);

/* fork(): takes the lock of waiting callers and give-backs, or lets it go. */
void sluice__engine_fork_lock(void);
void sluice__engine_fork_unlock(void);

#endif
