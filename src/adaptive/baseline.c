/* SPDX-License-Identifier: MIT */
/* The no-load latency of an adaptive limit.
 *
 * It is the least window median seen, never an average that follows the latency
 * of a queue (Gradient2's long-term average catches up with a steady queue, and its
 * limit then creeps up), and it is never measured by pinning the limit low for a
 * while (Envoy's minRTT windows refuse healthy calls, envoy#8337). It rises only
 * when the limit has sat at its floor for SLUICE__BASELINE_REBASE windows: there,
 * nothing the limit lets through queues behind itself, so the latency measured is
 * the downstream's own. */
#include "adaptive/baseline.h"

#include "adaptive/window.h"

void sluice__baseline_update(sluice__baseline *b, gint64 latency_ns, guint samples, guint drops,
                             gboolean at_floor)
{
    if (samples < SLUICE__WINDOW_MIN_SAMPLES || latency_ns <= 0)
        return; /* too few calls to say */
    if (b->ns == 0 || latency_ns < b->ns)
        b->ns = latency_ns;
    if (!at_floor || drops > 0) {
        b->at_floor = 0;
        return;
    }
    if (++b->at_floor >= SLUICE__BASELINE_REBASE) {
        b->ns = latency_ns;
        b->at_floor = 0;
    }
}
