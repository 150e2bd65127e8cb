/* SPDX-License-Identifier: MIT */
/* Prefetched permits: permits a process took from a remote backend in one round
 * trip, handed to its own callers in process.
 *
 * The backend counted them as admitted when it granted them, so it never admits
 * more than the rule says; what changes is when a permit is used: within
 * prefetch_ttl of being counted (docs/algorithms.md states the bound per
 * algorithm). Each limit's store is a table of keyed slots (key_slots.h); a slot
 * holds one key's permits and is guarded by its stripe, which fork() holds; a
 * child starts with none in hand (the parent's are the parent's: used by both,
 * they would be used twice). No clock is read here: the caller passes the time. */
#include "prefetch.h"

#include "key_slots.h"
#include "limiter.h"

typedef struct {
    sluice__slot_key key; /* empty, or the key whose permits are in hand */
    guint forks;          /* `forks` when they were kept                */
    gconstpointer backend;
    const sluice__rule *rule; /* interned by the registry: equal rules, one pointer */
    gint64 left;              /* permits in hand                            */
    gint64 sent_us;           /* when the command that counted them was sent */
    gint64 until_us;          /* they may be used before this time          */
    gint64 limit, reset_after_us;
} slot;

struct sluice__prefetch {
    slot slots[SLUICE__KEY_SLOTS];
};

static guint forks; /* under every stripe: fork()s this process is a child of */

sluice__prefetch *sluice__prefetch_of(sluice__prefetch **where)
{
    return sluice__limiter_part((gpointer *)where, sizeof(sluice__prefetch));
}

void sluice__prefetch_free(sluice__prefetch *store)
{
    g_free(store);
}

/* The slot of key and its lock; FALSE for a key too long to keep. */
static gboolean locate(sluice__prefetch *store, const char *key, sluice__packed_key *k, slot **s,
                       GMutex **lock)
{
    if (!sluice__key_pack(key, k))
        return FALSE;
    *s = &store->slots[sluice__key_index(k)];
    *lock = sluice__key_stripe(store, k);
    return TRUE;
}

gboolean sluice__prefetch_take(sluice__prefetch *store, gconstpointer backend,
                               const sluice__rule *rule, const char *key, gint64 permits,
                               gint64 now_us, sluice__verdict *v)
{
    sluice__packed_key k;
    slot *s;
    GMutex *lock;
    if (!store || !locate(store, key, &k, &s, &lock))
        return FALSE;
    g_mutex_lock(lock);
    gboolean taken = sluice__slot_key_holds(&s->key, &k) && s->forks == forks &&
                     s->backend == backend && s->rule == rule && now_us < s->until_us &&
                     s->left >= permits;
    if (taken) {
        s->left -= permits;
        gint64 aged = MAX(0, now_us - s->sent_us);
        *v = (sluice__verdict){.allowed = TRUE,
                               .limit = s->limit,
                               .remaining = s->left,
                               .retry_after_us = -1,
                               .reset_after_us = MAX(0, s->reset_after_us - aged)};
    }
    g_mutex_unlock(lock);
    return taken;
}

void sluice__prefetch_keep(sluice__prefetch *store, gconstpointer backend, const sluice__rule *rule,
                           const char *key, gint64 left, gint64 sent_us, const sluice__verdict *v)
{
    sluice__packed_key k;
    slot *s;
    GMutex *lock;
    if (left <= 0 || !locate(store, key, &k, &s, &lock))
        return;
    g_mutex_lock(lock);
    sluice__slot_key_set(&s->key, &k);
    s->forks = forks;
    s->backend = backend;
    s->rule = rule;
    s->left = left;
    s->sent_us = sent_us;
    s->until_us = sent_us + rule->prefetch_ttl_us;
    s->limit = v->limit;
    s->reset_after_us = v->reset_after_us;
    g_mutex_unlock(lock);
}

void sluice__prefetch_forget(sluice__prefetch *store, const char *key)
{
    sluice__packed_key k;
    slot *s;
    GMutex *lock;
    if (!store || !locate(store, key, &k, &s, &lock))
        return;
    g_mutex_lock(lock);
    if (sluice__slot_key_holds(&s->key, &k))
        sluice__slot_key_clear(&s->key);
    g_mutex_unlock(lock);
}

void sluice__prefetch_fork_child(void)
{
    forks++; /* the parent's permits in hand are the parent's */
}
