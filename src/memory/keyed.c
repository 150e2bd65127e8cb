/* SPDX-License-Identifier: MIT */
/* A memory store's per-key states (src/memory/keyed.h). */
#include "memory/keyed.h"

#include <string.h>

#include "memory/store.h"

#define SWEEP_MIN 1024

sluice__keyed_states *sluice__keyed_states_new(guint n)
{
    sluice__keyed_states *k = g_malloc0(sizeof *k + n * sizeof(sluice__state));
    k->n = n;
    return k;
}

static void keyed_states_free(gpointer p)
{
    sluice__keyed_states *k = p;
    for (guint i = 0; i < k->n; i++)
        sluice__state_clear(&k->s[i]);
    g_free(k);
}

void sluice__keyed_init(sluice__memory_store *store)
{
    store->keyed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, keyed_states_free);
    store->sweep_at = SWEEP_MIN;
}

void sluice__keyed_clear(sluice__memory_store *store)
{
    g_hash_table_remove_all(store->keyed);
    store->sweep_at = SWEEP_MIN;
}

static gboolean is_idle(gpointer key, gpointer value, gpointer now)
{
    (void)key;
    return ((sluice__keyed_states *)value)->s[0].idle_at <= *(gint64 *)now;
}

static void sweep(sluice__memory_store *store, gint64 now)
{
    g_hash_table_foreach_remove(store->keyed, is_idle, &now);
    store->sweep_at = MAX(SWEEP_MIN, 2 * g_hash_table_size(store->keyed));
}

void sluice__keyed_decide(sluice__memory_store *store, const sluice__rule *rule, const char *key,
                          gint64 now_us, gint64 epoch_us, gint64 permits, gint64 reserve_us,
                          sluice__verdict *verdict)
{
    sluice__keyed_states *k = g_hash_table_lookup(store->keyed, key);
    if (k) {
        if (G_UNLIKELY(k->s[0].blocked_until != 0)) { /* sluice_block */
            if (now_us < k->s[0].blocked_until) {
                sluice__blocked_verdict(sluice__rule_capacity(rule), k->s[0].blocked_until, now_us,
                                        verdict);
                return;
            }
            k->s[0].blocked_until = 0;
        }
        sluice__decide(rule, k->s, now_us, epoch_us, permits, reserve_us, verdict);
        return;
    }
    guint n = sluice__rule_bands(rule);
    sluice__state fresh[1 + SLUICE__MAX_BANDS];
    memset(fresh, 0, n * sizeof fresh[0]);
    sluice__decide(rule, fresh, now_us, epoch_us, permits, reserve_us, verdict);
    gboolean started = FALSE;
    for (guint i = 0; i < n; i++)
        started = started || fresh[i].started;
    if (started) { /* only an admission stores anything */
        if (g_hash_table_size(store->keyed) >= store->sweep_at)
            sweep(store, now_us);
        k = sluice__keyed_states_new(n);
        memcpy(k->s, fresh, n * sizeof fresh[0]);
        g_hash_table_insert(store->keyed, g_strdup(key), k);
    }
}

sluice__state *sluice__keyed_get(sluice__memory_store *store, const sluice__rule *rule,
                                 const char *key, gint64 now_us)
{
    sluice__keyed_states *k = g_hash_table_lookup(store->keyed, key);
    if (!k) {
        if (g_hash_table_size(store->keyed) >= store->sweep_at)
            sweep(store, now_us);
        k = sluice__keyed_states_new(sluice__rule_bands(rule));
        g_hash_table_insert(store->keyed, g_strdup(key), k);
    }
    return k->s;
}

sluice__state *sluice__keyed_lookup(sluice__memory_store *store, const char *key)
{
    sluice__keyed_states *k = g_hash_table_lookup(store->keyed, key);
    return k ? k->s : NULL;
}
