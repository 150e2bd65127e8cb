/* The engine: applies a rule (permits, wait, shadow mode, on_error) through a backend. */
#ifndef SLUICE_ENGINE_H
#define SLUICE_ENGINE_H

#include <glib.h>
#include <sluice/acquire.h>

#include "backend.h"
#include "limiter.h"
#include "stats.h"

/* Sets where decisions go: `backend`, and `local` (the memory backend) for
 * on_error = local. Both stay until the next call; NULL, NULL at shutdown. */
void sluice__engine_set_backends(sluice__backend *backend, sluice__backend *local);

/* One decision for limiter under its current rule. wait_us < 0: the rule's wait.
 * Returns SLUICE_ALLOWED, SLUICE_DENIED or SLUICE_ERROR (backend failure: *error
 * set, out->allowed is the policy's verdict). *taken is set to the permits that
 * must be given back with sluice__engine_release (concurrency), else 0. The
 * decision is counted in the limiter's stats and in `site` (a decorated
 * function's; may be NULL). */
int sluice__engine_acquire(sluice__limiter *limiter, const char *key, gint64 permits,
                           gint64 wait_us, sluice_decision *out, gint64 *taken, sluice_stats *site,
                           GError **error);

/* Gives back concurrency permits and wakes callers waiting for them. */
void sluice__engine_release(sluice__limiter *limiter, const char *key, gint64 permits);

/* Forgets the state of key under limiter (the key is ignored when the rule says
 * per_key = false) in the backend, and in the memory backend too when on_error =
 * local may have used it; wakes callers waiting for concurrency permits. limiter
 * NULL: nothing is kept, TRUE. FALSE with *error when the backend failed, or
 * SLUICE_ERROR_NOT_INITIALIZED before sluice_init. */
gboolean sluice__engine_reset(sluice__limiter *limiter, const char *key, GError **error);

/* The on_error verdict when no backend can decide the call at all: TRUE unless
 * the policy is deny (local, with nothing to decide in process, allows). */
static inline gboolean sluice__engine_policy_allows(const sluice__rule *rule)
{
    return rule->on_error != SLUICE__ON_ERROR_DENY;
}

/* The decision for a name with no rule: allowed, unlimited. */
void sluice__engine_unlimited(sluice_decision *out);

/* ---- the pieces of a decision, for the asynchronous API ------------------------ */

/* One ask of the backend without blocking: done is called with the verdict (on
 * failure: the on_error verdict, and the failure, which done owns), from
 * `context` or before this returns. key is copied. */
void sluice__engine_ask_async(sluice__limiter *limiter, const sluice__rule *rule, const char *key,
                              gint64 permits, gint64 reserve_us, GMainContext *context,
                              sluice__decided_func done, gpointer data);

/* A verdict as the caller sees it (milliseconds), with shadow mode applied. */
void sluice__engine_to_decision(const sluice__verdict *v, sluice_decision *out);
sluice__outcome sluice__engine_settle(const sluice__rule *rule, const sluice__verdict *v,
                                      sluice_decision *out);

/* Starts timing a decision: a start for sluice__engine_count, or -1 (not timed). */
gint64 sluice__engine_timing_start(void);
/* Counts a finished decision in the limiter's stats and in site (may be NULL);
 * returns the sluice_acquire code of the outcome. */
int sluice__engine_count(sluice__limiter *limiter, sluice_stats *site, sluice__outcome outcome,
                         gboolean waited, gint64 start);

/* How many times concurrency permits have been given back so far. */
guint64 sluice__engine_releases(void);
/* Called (outside any lock) after every give-back; NULL: none. */
typedef void (*sluice__engine_release_func)(void);
void sluice__engine_on_release(sluice__engine_release_func hook);

/* fork(): takes the lock of waiting callers and give-backs, or lets it go. */
void sluice__engine_fork_lock(void);
void sluice__engine_fork_unlock(void);

#endif
