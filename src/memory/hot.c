/* SPDX-License-Identifier: MIT */
/* A memory store's lock-free shared state: what its decisions seldom need (bands,
 * prefetch, a reset) and the CPU feature they use (src/memory/hot.h). */
#include "memory/hot.h"

#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "memory/hand.h"

#if defined(__x86_64__)
gboolean sluice__hot_have_prefetchw;
#endif

void sluice__hot_detect_cpu(void)
{
#if defined(__x86_64__)
    static gsize detected;
    if (g_once_init_enter(&detected)) {
        unsigned a, b, c, d;
        /* CPUID 0x80000001, ECX bit 8: PREFETCHW */
        sluice__hot_have_prefetchw = __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8));
        g_once_init_leave(&detected, 1);
    }
#endif
}

SLUICE__OUT_OF_LINE gboolean sluice__hot_decide_bands(sluice__hot_state *hot,
                                                      const sluice__rule *rule, gint64 permits,
                                                      gint64 reserve_us, sluice__verdict *verdict,
                                                      gint64 *decided_us)
{
    return sluice__hot_decide_n(hot, rule, sluice__rule_bands(rule), permits, reserve_us, verdict,
                                decided_us);
}

SLUICE__OUT_OF_LINE gboolean sluice__hot_decide_ahead(sluice__hot_state *hot,
                                                      const sluice__rule *rule, gint64 permits,
                                                      sluice__verdict *verdict)
{
    guint64 generation = __atomic_load_n(&hot->generation, __ATOMIC_RELAXED);
    if (sluice__hand_take(hot, generation, rule, permits, sluice__clock_now(), verdict))
        return TRUE;
    gint64 decided_us;
    if (!sluice__hot_decide(hot, rule, rule->prefetch, 0, verdict, &decided_us))
        return FALSE;
    if (verdict->allowed) {
        gint64 left = rule->prefetch - permits;
        sluice__hand_keep(hot, generation, rule, left, decided_us, verdict);
        verdict->remaining += left;
        return TRUE;
    }
    return sluice__hot_decide(hot, rule, permits, 0, verdict, &decided_us);
}

void sluice__hot_clear(sluice__hot_state *hot)
{
    guint64 held = sluice__hot_enter(hot);
    sluice__state fresh[G_N_ELEMENTS(hot->bands)];
    memset(fresh, 0, sizeof fresh);
    sluice__hot_store(hot, fresh, G_N_ELEMENTS(fresh));
    __atomic_store_n(&hot->generation, hot->generation + 1, __ATOMIC_RELAXED);
    sluice__hot_leave(hot, held);
}
