/* SPDX-License-Identifier: MIT */
/* A thread's hand: permits it took from a memory store's shared state ahead
 * (rule prefetch) and hands to its own later calls, with no shared write. */
#ifndef SLUICE_MEMORY_HAND_H
#define SLUICE_MEMORY_HAND_H

#include <glib.h>

#include "algorithm.h"
#include "rule.h"

/* TRUE when the calling thread holds `permits` of owner's state under rule, kept
 * at `generation` (the owner's count of resets and reshapes), at now_us: they are
 * taken, and *v is the answer (allowed; limit as decided; remaining the permits
 * still in hand; reset as decided, aged). */
gboolean sluice__hand_take(gconstpointer owner, guint64 generation, const sluice__rule *rule,
                           gint64 permits, gint64 now_us, sluice__verdict *v);

/* Keeps `left` permits of owner's state under rule, counted by the decision v made
 * at decided_us: the thread may use them until decided_us + rule->prefetch_ttl_us.
 * Replaces what the thread had in hand for owner, and may replace another owner's
 * (what is replaced is lost: the state counted it). */
void sluice__hand_keep(gconstpointer owner, guint64 generation, const sluice__rule *rule,
                       gint64 left, gint64 decided_us, const sluice__verdict *v);

#endif
