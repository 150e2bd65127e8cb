/* SPDX-License-Identifier: MIT */
/* The deciding calls of include/sluice/acquire.h, and what the decorating macros of
 * include/sluice/macros.h call around a decorated body. */
#include <sluice/sluice.h>

#include "adaptive/adaptive.h"
#include "arguments.h"
#include "counters.h"
#include "engine.h"
#include "inlining.h"
#include "registry.h"
#include "value.h"

static int acquire(const char *name, const char *key, gint64 permits, gint64 wait_us,
                   sluice_decision *out, GError **error)
{
    sluice_decision scratch;
    gint64 taken;
    if (!out)
        out = &scratch;
    sluice__limiter *limiter;
    if (!sluice__find(name, key, permits, &limiter, error)) {
        *out = sluice__engine_refused();
        return SLUICE_FAILED;
    }
    if (!limiter) {
        sluice__engine_unlimited(out);
        return SLUICE_ALLOWED;
    }
    return sluice__engine_acquire(limiter, key, permits, wait_us, out, &taken, NULL, error);
}

SLUICE__FLATTEN int sluice_acquire(const char *name, const char *key, gint64 permits,
                                   sluice_decision *out, GError **error)
{
    return acquire(name, key, permits, -1, out, error);
}

int sluice_acquire_wait(const char *name, const char *key, gint64 permits, gint64 timeout_ms,
                        sluice_decision *out, GError **error)
{
    if (!sluice__check_timeout_ms(timeout_ms, error)) {
        if (out)
            *out = sluice__engine_refused();
        return SLUICE_FAILED;
    }
    return acquire(name, key, permits, timeout_ms * 1000, out, error);
}

G_STATIC_ASSERT((int)SLUICE_OUTCOME_OK == (int)SLUICE__CALL_OK);
G_STATIC_ASSERT((int)SLUICE_OUTCOME_DROPPED == (int)SLUICE__CALL_DROPPED);
G_STATIC_ASSERT((int)SLUICE_OUTCOME_IGNORE == (int)SLUICE__CALL_IGNORED);

void sluice_release_outcome(const char *name, const char *key, gint64 permits,
                            sluice_outcome outcome)
{
    g_autoptr(GError) error = NULL;
    sluice__limiter *limiter;
    if ((guint)outcome > SLUICE_OUTCOME_IGNORE) {
        g_debug("sluice_release_outcome ignored: outcome %d is none of sluice_outcome's",
                (int)outcome);
        return;
    }
    if (!sluice__find(name, key, permits, &limiter, &error)) {
        g_debug("sluice_release ignored: %s", error->message);
        return;
    }
    if (limiter)
        sluice__engine_release(limiter, key, permits, (sluice__call_end)outcome);
}

void sluice_release(const char *name, const char *key, gint64 permits)
{
    sluice_release_outcome(name, key, permits, SLUICE_OUTCOME_OK);
}

/* ---- what the macros call ----------------------------------------------------- */

/* The last decorated call's decision on this thread (sluice_last_decision): a
 * flag for a call with no rule (one store on that path), the decision otherwise.
 * The initial-exec model keeps the stores plain moves. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
    gboolean unlimited;
    int result;
    sluice_decision decision;
} last = {FALSE, SLUICE_FAILED, {FALSE, 0, 0, -1, 0, FALSE}}; /* sluice__engine_refused() */

int sluice_last_decision(sluice_decision *out)
{
    g_return_val_if_fail(out != NULL, SLUICE_FAILED);
    if (last.unlimited) {
        sluice__engine_unlimited(out);
        return SLUICE_ALLOWED;
    }
    *out = last.decision;
    return last.result;
}

static int enter_limited(sluice__counters *site, const char *key, sluice_lease *lease,
                         sluice_decision *verdict, GError **error, sluice__limiter *limiter);

/* sluice__enter's answer to the NULL arguments the macros never pass. */
static SLUICE__OUT_OF_LINE int enter_refused(sluice_decision *verdict, GError **error)
{
    if (verdict)
        *verdict = sluice__engine_refused();
    if (!error)
        return SLUICE__DEGRADE;
    g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT,
                        "descriptor, lease or verdict is NULL; expected the macros' own");
    return SLUICE__FAILED;
}

/* sluice__enter's first call of a descriptor: binds it to its limiter. */
static SLUICE__OUT_OF_LINE int enter_unbound(sluice_descriptor *descriptor, const char *key,
                                             sluice_lease *lease, sluice_decision *verdict,
                                             GError **error)
{
    sluice__limiter *limiter = sluice__registry_bind(descriptor);
    if (!limiter || !sluice__limiter_rule(limiter))
        return SLUICE__RUN; /* not initialized, or no rule: not limited */
    if (G_UNLIKELY(!lease || (error && !verdict)))
        return enter_refused(verdict, error);
    return enter_limited(descriptor->priv->counters, key, lease, verdict, error, limiter);
}

/* Every call it makes is a tail call, so that a name with no rule costs a few
 * instructions and no saved register. The other arguments are checked only where
 * they are used: before enter_limited. */
int sluice__enter(sluice_descriptor *descriptor, const char *key, sluice_lease *lease,
                  sluice_decision *verdict, GError **error)
{
    if (G_UNLIKELY(!descriptor))
        return enter_refused(verdict, error);
    sluice_descriptor_private *bound = g_atomic_pointer_get(&descriptor->priv);
    sluice__limiter *limiter = sluice__registry_limiter_of(bound);
    last.unlimited = TRUE;
    if (G_UNLIKELY(!limiter))
        return enter_unbound(descriptor, key, lease, verdict, error);
    if (!sluice__limiter_rule(limiter))
        return SLUICE__RUN; /* a name with no rule is not limited */
    if (G_UNLIKELY(!lease || (error && !verdict)))
        return enter_refused(verdict, error);
    return enter_limited(bound->counters, key, lease, verdict, error, limiter);
}

/* sluice__enter for a name with a rule: the decision, flattened apart from the
 * call of a name with no rule, which stays a few instructions. Its arguments
 * stand where sluice__enter's do, so that the tail call moves few registers. */
static SLUICE__FLATTEN SLUICE__OUT_OF_LINE int
enter_limited(sluice__counters *site, const char *key, sluice_lease *lease,
              sluice_decision *verdict, GError **error, sluice__limiter *limiter)
{
    sluice_decision d;
    GError *failure = NULL;
    gint64 taken = 0;
    int r;
    if (key && !sluice__check_key(key, &failure)) {
        d = (sluice_decision){
            sluice__engine_policy_allows(sluice__limiter_rule(limiter)), 0, 0, -1, 0, FALSE};
        sluice__counters_count(limiter->counters, SLUICE__OUTCOME_ERROR, FALSE, -1);
        sluice__counters_count(site, SLUICE__OUTCOME_ERROR, FALSE, -1);
        r = SLUICE_FAILED;
    } else {
        r = sluice__engine_acquire(limiter, key, 1, -1, &d, &taken, site, &failure);
    }
    last.unlimited = FALSE;
    last.result = r;
    last.decision = d;
    if (taken != 0) { /* concurrency permits, or (< 0) adaptive calls */
        lease->priv_limiter = limiter;
        lease->priv_key = key;
        lease->priv_permits = taken;
    }
    int run;
    if (r != SLUICE_FAILED) {
        run = r == SLUICE_ALLOWED ? SLUICE__RUN : SLUICE__DEGRADE;
    } else if (!error) {
        g_debug("%s: limiter failed, on_error %s: %s", limiter->name,
                d.allowed ? "allows" : "denies", failure->message);
        g_error_free(failure);
        run = d.allowed ? SLUICE__RUN : SLUICE__DEGRADE;
    } else {
        *verdict = d;
        g_propagate_error(error, failure);
        const sluice__rule *rule = sluice__limiter_rule(limiter);
        if (rule && rule->algorithm == SLUICE__ADAPTIVE)
            sluice__adaptive_dropped(limiter); /* what the callback answers is a drop */
        return SLUICE__FAILED;                 /* the error callback answers */
    }
    if (run == SLUICE__DEGRADE) {
        sluice__counters_degraded(limiter->counters);
        sluice__counters_degraded(site);
    }
    return run;
}

void sluice__leave(sluice_lease *lease)
{
    if (G_LIKELY(!lease || lease->priv_permits == 0))
        return;
    if (lease->priv_permits < 0) /* calls of an adaptive rule: their latency is a sample */
        sluice__engine_end_calls(lease->priv_limiter, -lease->priv_permits, SLUICE__CALL_OK);
    else
        sluice__engine_release(lease->priv_limiter, lease->priv_key, lease->priv_permits,
                               SLUICE__CALL_OK);
    lease->priv_permits = 0;
}
