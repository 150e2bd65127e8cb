/* SPDX-License-Identifier: MIT */
/* A Cluster call's redirect policy (redis/redirect.h). */
#include "redis/redirect.h"

/* A pause, then the slot's master by the map, if it ends before the deadline; else
 * the call fails with reason (NULL: the reply's text). */
static sluice__redirect_step pause_or_fail(sluice__redirect *r, gint64 time_left_us,
                                           const char *reason, const char **why)
{
    if (time_left_us <= SLUICE__REDIRECT_PAUSE_US) {
        *why = reason;
        return SLUICE__REDIRECT_FAIL;
    }
    r->hops = 0;
    r->asking = FALSE;
    return SLUICE__REDIRECT_PAUSE;
}

sluice__redirect_step sluice__redirect_next(sluice__redirect *r, sluice__cluster_action action,
                                            gint64 time_left_us, const char **why)
{
    *why = NULL;
    switch (action) {
    case SLUICE__CLUSTER_RESEND: /* MOVED */
    case SLUICE__CLUSTER_ASKING: /* ASK */
        r->refresh = r->refresh || action == SLUICE__CLUSTER_RESEND;
        if (++r->hops < SLUICE__REDIRECT_MAX_HOPS) {
            r->asking = action == SLUICE__CLUSTER_ASKING;
            return SLUICE__REDIRECT_SEND;
        }
        /* nodes that disagree for a moment (a slot's new owner set on one before
         * the other): a pause, then the map */
        return pause_or_fail(r, time_left_us, "redirected again and again: the slot keeps moving",
                             why);
    case SLUICE__CLUSTER_TRY_AGAIN: /* from the slot's master again: it may ASK anew */
        return pause_or_fail(r, time_left_us, NULL, why);
    case SLUICE__CLUSTER_FAIL:
        break;
    }
    return SLUICE__REDIRECT_FAIL;
}
