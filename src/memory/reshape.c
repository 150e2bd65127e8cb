/* SPDX-License-Identifier: MIT */
/* A reload's change to a memory store (src/memory/reshape.h). */
#include "memory/reshape.h"

#include <string.h>

#include "memory/keyed.h"
#include "memory/store.h"
#include "override.h"

static gboolean same_bands(const sluice__rule *a, const sluice__rule *b)
{
    return a->n_bands == b->n_bands && a->n_shadow == b->n_shadow &&
           memcmp(a->bands, b->bands, sizeof a->bands) == 0;
}

/* Moves the states of `old`, laid out by the bands of `from`, to `out`, laid out by
 * those of `to`: the rule's own state, and each band's that `to` still has (the
 * same limit, window and burst); what is left in `old` is cleared. */
static void remap(const sluice__rule *from, const sluice__rule *to, sluice__state *old,
                  sluice__state *out)
{
    guint n_from = sluice__rule_bands(from), n_to = sluice__rule_bands(to);
    memset(out, 0, n_to * sizeof *out);
    out[0] = old[0];
    memset(&old[0], 0, sizeof old[0]);
    for (guint j = 1; j < n_to; j++) {
        for (guint i = 1; i < n_from; i++) {
            if (memcmp(&to->bands[j - 1], &from->bands[i - 1], sizeof(sluice__band)) == 0) {
                out[j] = old[i];
                memset(&old[i], 0, sizeof old[i]);
                break;
            }
        }
    }
    for (guint i = 0; i < n_from; i++)
        sluice__state_clear(&old[i]);
}

/* How reshape_hot treats the shared state. */
typedef enum {
    HOT_KEEP,  /* the same bands: as it is        */
    HOT_REMAP, /* other bands: those that stay    */
    HOT_CLEAR, /* another algorithm or per_key     */
} hot_change;

/* With the lock held: the shared state laid out for rule (hot->rule = rule), the
 * version held while it changes so that lock-free decisions start again. */
static void reshape_hot(sluice__memory_store *store, const sluice__rule *rule, hot_change change)
{
    sluice__hot_state *hot = &store->hot;
    guint64 held = sluice__hot_enter(hot);
    if (change != HOT_KEEP) {
        sluice__state old[1 + SLUICE__MAX_BANDS], moved[1 + SLUICE__MAX_BANDS];
        memset(moved, 0, sizeof moved);
        if (change == HOT_REMAP) {
            sluice__hot_band seen[1 + SLUICE__MAX_BANDS];
            memset(old, 0, sizeof old);
            sluice__hot_load(hot, old, seen, sluice__rule_bands(&store->shape));
            remap(&store->shape, rule, old, moved);
        }
        sluice__hot_store(hot, moved, G_N_ELEMENTS(moved));
    }
    /* a block of calls without a key keeps them off the lock-free path */
    __atomic_store_n(&hot->rule, store->blocked_until ? NULL : rule, __ATOMIC_RELAXED);
    __atomic_store_n(&hot->generation, hot->generation + 1, __ATOMIC_RELAXED);
    sluice__hot_leave(hot, held);
}

void sluice__memory_block_keyless(sluice__memory_store *store, const sluice__rule *rule,
                                  gint64 until_us)
{
    store->blocked_until = until_us;
    store->keyless[0].idle_at = MAX(store->keyless[0].idle_at, until_us);
    if (store->shaped && store->laid_for == rule)
        reshape_hot(store, rule, HOT_KEEP);
}

/* Lays each key's states out for its rule under `rule` (an override's, or rule's
 * own), from its rule under the store's shape: a key whose bands stay as they were
 * is left alone. */
static void remap_keyed(sluice__memory_store *store, const sluice__rule *rule)
{
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, store->keyed);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        const sluice__rule *from = sluice__rule_for_key(&store->shape, key);
        const sluice__rule *to = sluice__rule_for_key(rule, key);
        sluice__keyed_states *old = value;
        if (old->n == sluice__rule_bands(to) && same_bands(from, to))
            continue;
        sluice__keyed_states *k = sluice__keyed_states_new(sluice__rule_bands(to));
        if (old->n == sluice__rule_bands(from))
            remap(from, to, old->s, k->s);
        g_hash_table_iter_replace(&it, k);
    }
}

SLUICE__OUT_OF_LINE void sluice__memory_reshape(sluice__memory_store *store,
                                                const sluice__rule *rule)
{
    if (__atomic_load_n(&store->hot.rule, __ATOMIC_RELAXED) == rule ||
        (store->blocked_until && store->laid_for == rule))
        return; /* rules are interned: one pointer per rule */
    store->laid_for = rule;
    if (store->shaped && sluice__rule_same_state(&store->shape, rule)) {
        gboolean kept = same_bands(&store->shape, rule);
        if (!kept || store->shape.overrides != rule->overrides)
            remap_keyed(store, rule); /* bands, or keys' overrides, came or went */
        if (!kept) {
            sluice__state moved[1 + SLUICE__MAX_BANDS] = {{0}};
            remap(&store->shape, rule, store->keyless, moved);
            memcpy(store->keyless, moved, sizeof moved);
        }
        reshape_hot(store, rule, kept ? HOT_KEEP : HOT_REMAP);
        store->shape = *rule;
        return;
    }
    sluice__keyed_clear(store);
    sluice__memory_keyless_clear(store);
    store->blocked_until = 0; /* a block is kept with the state, as on Redis */
    reshape_hot(store, rule, HOT_CLEAR);
    store->shape = *rule;
    store->shaped = TRUE;
}
