/* SPDX-License-Identifier: MIT */
/* The memory backend's vtable, and its decisions (src/memory/memory.h).
 *
 * A call without a key under a rule kept lock-free is decided on the store's shared
 * state with no lock (src/memory/hot.h). The rest (per-key states, and sliding_log
 * and concurrency, whose logs grow) is decided under the store's mutex, with the
 * same rule: the clock is read before the mutex is taken, and read again when
 * another decision took the mutex in between. A key holds one state per band of
 * its rule. */
#include "memory/memory.h"

#include "memory/hot.h"
#include "memory/keyed.h"
#include "memory/reshape.h"
#include "memory/store.h"
#include "override.h"

static gboolean lock_free(const sluice__rule *rule)
{
    return rule->algorithm != SLUICE__SLIDING_LOG && rule->algorithm != SLUICE__CONCURRENCY;
}

/* The limit's rule a decision follows: the newest, not the caller's (a caller that
 * read the rule before a reload must not take the state back to the old rule's
 * shape). The caller's rule may be an override of a key (src/override.h): its
 * limit's own rule stands for it. */
static const sluice__rule *newest(sluice__limiter *limiter, const sluice__rule *rule)
{
    const sluice__rule *current = sluice__limiter_rule(limiter);
    return current ? current : sluice__rule_base(rule);
}

/* Takes the store's lock for a change at a time read before it: *now_us (and
 * *epoch_us, when given) are read first, and again when a change was made under
 * the lock since, so that changes stay in the order of their times (and *now_us
 * is never before the last change's: sluice__memory_in_order). *rule is the newest
 * rule then. */
static void lock_in_order(sluice__memory_store *store, sluice__limiter *limiter,
                          const sluice__rule **rule, gint64 *now_us, gint64 *epoch_us)
{
    for (;;) {
        guint64 seq = __atomic_load_n(&store->seq, __ATOMIC_ACQUIRE);
        const sluice__rule *r = newest(limiter, *rule);
        *now_us = sluice__clock_now();
        if (epoch_us)
            *epoch_us = r->epoch ? sluice__memory_since_epoch(*now_us) : *now_us;
        pthread_mutex_lock(&store->lock);
        if (__atomic_load_n(&store->seq, __ATOMIC_RELAXED) == seq && newest(limiter, *rule) == r) {
            __atomic_store_n(&store->seq, seq + 1, __ATOMIC_RELAXED);
            store->changed = *now_us = sluice__memory_in_order(*now_us, store->changed);
            if (epoch_us && !r->epoch)
                *epoch_us = *now_us;
            *rule = r;
            return;
        }
        pthread_mutex_unlock(&store->lock);
    }
}

/* A decision under the store's lock: per-key states, sliding_log and concurrency
 * (whose logs grow), and a rule that changed to one kept lock-free meanwhile. */
static SLUICE__OUT_OF_LINE gboolean decide_under_lock(sluice__backend *backend,
                                                      sluice__limiter *limiter,
                                                      const sluice__rule *rule, const char *key,
                                                      gint64 permits, gint64 reserve_us,
                                                      sluice__verdict *verdict, GError **error)
{
    sluice__memory_store *store = limiter->memory;
    const sluice__rule *found = rule; /* the key's, maybe an override */
    gint64 now, epoch;
    lock_in_order(store, limiter, &rule, &now, &epoch);
    sluice__memory_reshape(store, rule);
    if (key)
        rule = sluice__rule_now(rule, found, key); /* a lookup only after a reload */
    if (G_UNLIKELY(sluice__override_decides(rule, verdict))) {
        pthread_mutex_unlock(&store->lock); /* a reload made the key blocked or unlimited */
        return TRUE;
    }
    if (!key && G_UNLIKELY(store->blocked_until != 0)) { /* sluice_block without a key */
        if (now < store->blocked_until) {
            sluice__blocked_verdict(sluice__rule_capacity(rule), store->blocked_until, now,
                                    verdict);
            pthread_mutex_unlock(&store->lock);
            return TRUE;
        }
        sluice__memory_block_keyless(store, rule, 0); /* over: lock-free again */
    }
    if (!key && lock_free(rule)) {
        /* the rule changed to one kept lock-free since it was read */
        pthread_mutex_unlock(&store->lock);
        return sluice__memory_decide(backend, limiter, rule, key, permits, reserve_us, verdict,
                                     error);
    }
    if (!key)
        sluice__decide(rule, store->keyless, now, epoch, permits, reserve_us, verdict);
    else
        sluice__keyed_decide(store, rule, key, now, epoch, permits, reserve_us, verdict);
    pthread_mutex_unlock(&store->lock);
    return TRUE;
}

gboolean sluice__memory_decide(sluice__backend *backend, sluice__limiter *limiter,
                               const sluice__rule *rule, const char *key, gint64 permits,
                               gint64 reserve_us, sluice__verdict *verdict, GError **error)
{
    sluice__memory_store *store = limiter->memory;

    for (;;) {
        const sluice__rule *r = newest(limiter, rule);
        if (key || !lock_free(r))
            break;
        gint64 decided_us;
        if (r->prefetch > permits && permits > 0 && reserve_us == 0) {
            if (sluice__hot_decide_ahead(&store->hot, r, permits, verdict))
                return TRUE;
        } else if (G_LIKELY(sluice__hot_decide(&store->hot, r, permits, reserve_us, verdict,
                                               &decided_us))) {
            return TRUE;
        }
        pthread_mutex_lock(&store->lock); /* laid out for another rule: lay it out anew */
        gboolean blocked = store->blocked_until != 0;
        if (!blocked)
            sluice__memory_reshape(store, newest(limiter, rule));
        pthread_mutex_unlock(&store->lock);
        if (blocked) /* decided under the lock, where the block is */
            break;
    }
    return decide_under_lock(backend, limiter, rule, key, permits, reserve_us, verdict, error);
}

static void memory_release(sluice__backend *backend, sluice__limiter *limiter,
                           const sluice__rule *rule, const char *key, gint64 permits)
{
    sluice__memory_store *store = limiter->memory;
    const sluice__rule *caller = rule;
    gint64 now;
    (void)backend;

    lock_in_order(store, limiter, &rule, &now, NULL);
    if (store->shaped && sluice__rule_same_state(&store->shape, caller)) {
        sluice__state *state = key ? sluice__keyed_lookup(store, key) : store->keyless;
        if (state)
            sluice__release(caller, state, now, permits);
    }
    pthread_mutex_unlock(&store->lock);
}

/* Takes the store's lock, laid out for the newest rule, for a change at *now_us
 * (*epoch_us) of key's states: *rule becomes the rule found for the key now (the
 * caller's unless a reload came between). */
static void lock_for_key(sluice__memory_store *store, sluice__limiter *limiter,
                         const sluice__rule **rule, const char *key, gint64 *now_us,
                         gint64 *epoch_us)
{
    const sluice__rule *found = *rule;
    lock_in_order(store, limiter, rule, now_us, epoch_us);
    sluice__memory_reshape(store, *rule);
    if (key)
        *rule = sluice__rule_now(*rule, found, key);
}

/* A penalty of `permits` (block_us < 0) or a block of block_us for key under rule:
 * the memory backend's penalize and block. */
static gboolean apply_policy(sluice__limiter *limiter, const sluice__rule *rule, const char *key,
                             gint64 permits, gint64 block_us)
{
    sluice__memory_store *store = limiter->memory;
    gint64 now, epoch;
    lock_for_key(store, limiter, &rule, key, &now, &epoch);
    if (block_us >= 0) {
        gint64 until = block_us > 0 ? now + block_us : 0;
        if (key) {
            sluice__state *s = sluice__keyed_get(store, rule, key, now);
            s->blocked_until = until;
            s->idle_at = MAX(s->idle_at, until); /* not swept before it ends */
        } else {
            sluice__memory_block_keyless(store, rule, until);
        }
    } else if (rule->kind != SLUICE__KIND_LIMIT || rule->algorithm == SLUICE__CONCURRENCY) {
        /* a reload since: nothing to take */
    } else if (key) {
        sluice__penalize(rule, sluice__keyed_get(store, rule, key, now), now, epoch, permits);
    } else if (!lock_free(rule)) {
        sluice__penalize(rule, store->keyless, now, epoch, permits);
    } else { /* the lock-free state, held as a writer */
        sluice__hot_state *hot = &store->hot;
        guint n = sluice__rule_bands(rule);
        sluice__state states[1 + SLUICE__MAX_BANDS];
        sluice__hot_band seen[1 + SLUICE__MAX_BANDS];
        guint64 held = sluice__hot_enter(hot);
        sluice__hot_load(hot, states, seen, n);
        now = MAX(now, SLUICE__HOT_LOAD(hot->decided)); /* not before the last admission */
        epoch = rule->epoch ? sluice__memory_since_epoch(now) : now;
        sluice__penalize(rule, states, now, epoch, permits);
        sluice__hot_store(hot, states, n);
        SLUICE__HOT_STORE(hot->decided, now);
        sluice__hot_leave(hot, held);
    }
    pthread_mutex_unlock(&store->lock);
    return TRUE;
}

static gboolean memory_penalize(sluice__backend *backend, sluice__limiter *limiter,
                                const sluice__rule *rule, const char *key, gint64 permits,
                                GError **error)
{
    (void)backend;
    (void)error;
    return apply_policy(limiter, rule, key, permits, -1);
}

static gboolean memory_block(sluice__backend *backend, sluice__limiter *limiter,
                             const sluice__rule *rule, const char *key, gint64 duration_us,
                             GError **error)
{
    (void)backend;
    (void)error;
    return apply_policy(limiter, rule, key, 0, duration_us);
}

static gboolean memory_reset(sluice__backend *backend, sluice__limiter *limiter, const char *key,
                             GError **error)
{
    sluice__memory_store *store = limiter->memory;
    (void)backend;
    (void)error;

    pthread_mutex_lock(&store->lock);
    if (key) {
        g_hash_table_remove(store->keyed, key);
    } else {
        sluice__memory_keyless_clear(store);
        sluice__hot_clear(&store->hot);
        store->blocked_until = 0; /* the next decision lays the lock-free state out again */
    }
    pthread_mutex_unlock(&store->lock);
    return TRUE;
}

static void memory_free(sluice__backend *backend)
{
    g_free(backend);
}

static const sluice__backend_funcs memory_funcs = {
    .name = "memory",
    .decide = sluice__memory_decide,
    .release = memory_release,
    .penalize = memory_penalize,
    .block = memory_block,
    .reset = memory_reset,
    .free = memory_free,
};

sluice__backend *sluice__backend_memory_new(void)
{
    sluice__backend *backend = g_new0(sluice__backend, 1);
    backend->funcs = &memory_funcs;
    return backend;
}
