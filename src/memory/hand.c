/* SPDX-License-Identifier: MIT */
/* A thread's hand: permits it took from a memory store's shared state ahead.
 *
 * Each thread has HANDS slots, one per owner (a store) at a time, chosen by the
 * owner's address: no lock, no shared write, no allocation. Permits in a slot are
 * given up when they run out, when prefetch_ttl has passed since they were
 * counted, when the rule or the owner's generation changed (a reload, a reset),
 * or when another owner takes the slot. A thread that ends loses its hand. */
#include "memory/hand.h"

#define HANDS 4 /* a power of two */

typedef struct {
    gconstpointer owner;
    const sluice__rule *rule; /* interned by the registry: equal rules, one pointer */
    guint64 generation;
    gint64 left;       /* permits in hand                      */
    gint64 decided_us; /* when the decision that counted them was made */
    gint64 until_us;   /* they may be used before this time    */
    gint64 limit, reset_after_us;
} hand;

static __thread __attribute__((tls_model("initial-exec"))) hand hands[HANDS];

static hand *slot_of(gconstpointer owner)
{
    return &hands[(GPOINTER_TO_SIZE(owner) >> 7) & (HANDS - 1)];
}

gboolean sluice__hand_take(gconstpointer owner, guint64 generation, const sluice__rule *rule,
                           gint64 permits, gint64 now_us, sluice__verdict *v)
{
    hand *h = slot_of(owner);
    if (h->owner != owner || h->rule != rule || h->generation != generation ||
        now_us >= h->until_us || h->left < permits)
        return FALSE;
    h->left -= permits;
    gint64 aged = MAX(0, now_us - h->decided_us);
    *v = (sluice__verdict){.allowed = TRUE,
                           .limit = h->limit,
                           .remaining = h->left,
                           .retry_after_us = -1,
                           .reset_after_us = MAX(0, h->reset_after_us - aged)};
    return TRUE;
}

void sluice__hand_keep(gconstpointer owner, guint64 generation, const sluice__rule *rule,
                       gint64 left, gint64 decided_us, const sluice__verdict *v)
{
    hand *h = slot_of(owner);
    *h = (hand){owner,      rule,
                generation, left,
                decided_us, decided_us + rule->prefetch_ttl_us,
                v->limit,   v->reset_after_us};
}
