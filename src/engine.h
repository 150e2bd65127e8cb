/* The engine: applies a rule (permits, wait, shadow mode, on_error) through a backend. */
#ifndef SLUICE_ENGINE_H
#define SLUICE_ENGINE_H

#include <glib.h>
#include <sluice/acquire.h>

#include "backend.h"
#include "limiter.h"

/* Sets where decisions go: `backend`, and `local` (the memory backend) for
 * on_error = local. Both stay until the next call; NULL, NULL at shutdown. */
void sluice__engine_set_backends(sluice__backend *backend, sluice__backend *local);

/* One decision for limiter under its current rule. wait_us < 0: the rule's wait.
 * Returns SLUICE_ALLOWED, SLUICE_DENIED or SLUICE_ERROR (backend failure: *error
 * set, out->allowed is the policy's verdict). *taken is set to the permits that
 * must be given back with sluice__engine_give_back (concurrency), else 0. The
 * decision is counted in the limiter's stats and in `site` (a decorated
 * function's; may be NULL). */
int sluice__engine_acquire(sluice__limiter *limiter, const char *key, gint64 permits,
                           gint64 wait_us, sluice_decision *out, gint64 *taken, sluice_stats *site,
                           GError **error);

/* Gives back concurrency permits and wakes callers waiting for them. */
void sluice__engine_give_back(sluice__limiter *limiter, const char *key, gint64 permits);

/* The on_error verdict when no backend can decide the call at all: TRUE unless
 * the policy is deny (local, with nothing to decide in process, allows). */
static inline gboolean sluice__engine_policy_allows(const sluice__rule *rule)
{
    return rule->on_error != SLUICE__ON_ERROR_DENY;
}

/* The decision for a name with no rule: allowed, unlimited. */
void sluice__engine_unlimited(sluice_decision *out);

#endif
