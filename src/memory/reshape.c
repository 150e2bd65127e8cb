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

/* The rules of the store's shape and of the new one, between which each key's
 * states move (sluice__keyed_remap). */
typedef struct {
    const sluice__rule *from, *to;
} move_between;

/* The states a key gets under the new rule (an override's, or its own), or 0 when
 * they stay as they are (its bands are those it had). */
static guint key_bands(const char *key, guint n, gpointer data)
{
    const move_between *m = data;
    const sluice__rule *from = sluice__rule_for_key(m->from, key);
    const sluice__rule *to = sluice__rule_for_key(m->to, key);
    return n == sluice__rule_bands(to) && same_bands(from, to) ? 0 : sluice__rule_bands(to);
}

/* Moves a key's states from its rule under the shape to its rule under the new one
 * (the limit's own state, and the bands that stay); states laid out for neither
 * start afresh. */
static void move_key(const char *key, sluice__state *old, guint n, sluice__state *out,
                     gpointer data)
{
    const move_between *m = data;
    const sluice__rule *from = sluice__rule_for_key(m->from, key);
    const sluice__rule *to = sluice__rule_for_key(m->to, key);
    if (n == sluice__rule_bands(from)) {
        remap(from, to, old, out);
        return;
    }
    for (guint i = 0; i < n; i++)
        sluice__state_clear(&old[i]);
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
        if (!kept || store->shape.overrides != rule->overrides) {
            /* bands, or keys' overrides, came or went */
            sluice__keyed_unshape(&store->keyed);
            move_between m = {&store->shape, rule};
            sluice__keyed_remap(&store->keyed, key_bands, move_key, &m);
        }
        if (!kept) {
            sluice__state moved[1 + SLUICE__MAX_BANDS] = {{0}};
            remap(&store->shape, rule, store->keyless, moved);
            memcpy(store->keyless, moved, sizeof moved);
        }
        reshape_hot(store, rule, kept ? HOT_KEEP : HOT_REMAP);
        store->shape = *rule;
        sluice__keyed_shape(&store->keyed, rule);
        return;
    }
    sluice__keyed_unshape(&store->keyed);
    sluice__keyed_clear(&store->keyed);
    sluice__memory_keyless_clear(store);
    store->blocked_until = 0; /* a block is kept with the state, as on Redis */
    reshape_hot(store, rule, HOT_CLEAR);
    store->shape = *rule;
    store->shaped = TRUE;
    sluice__keyed_shape(&store->keyed, rule);
}
