/* SPDX-License-Identifier: MIT */
/* The memory backend's vtable, and its decisions (src/memory/memory.h).
 *
 * A call without a key under a rule kept lock-free is decided on the store's shared
 * state with no lock (src/memory/hot.h); a call with a key under the key's own lock
 * (src/memory/keyed.h). The rest (sliding_log and concurrency without a key, whose
 * logs grow) is decided under the store's mutex, with the same rule: the clock is
 * read before the mutex is taken, and read again when another decision took the
 * mutex in between. A key holds one state per band of its rule. */
#include "memory/memory.h"

#include "memory/hot.h"
#include "memory/keyed.h"
#include "memory/reshape.h"
#include "memory/store.h"

static gboolean lock_free(const sluice__rule *rule)
{
    return rule->algorithm != SLUICE__SLIDING_LOG && rule->algorithm != SLUICE__CONCURRENCY;
}

/* The store's states laid out for the newest rule (a reload, or the first decision). */
static SLUICE__OUT_OF_LINE void lay_out(sluice__memory_store *store, sluice__limiter *limiter,
                                        const sluice__rule *rule)
{
    pthread_mutex_lock(&store->lock);
    sluice__memory_reshape(store, sluice__memory_newest(limiter, rule));
    pthread_mutex_unlock(&store->lock);
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
        const sluice__rule *r = sluice__memory_newest(limiter, *rule);
        *now_us = sluice__clock_now();
        if (epoch_us)
            *epoch_us = r->epoch ? sluice__memory_since_epoch(*now_us) : *now_us;
        pthread_mutex_lock(&store->lock);
        if (__atomic_load_n(&store->seq, __ATOMIC_RELAXED) == seq &&
            sluice__memory_newest(limiter, *rule) == r) {
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

/* A decision under the store's lock: sliding_log and concurrency without a key
 * (whose logs grow), and a rule that changed to one kept lock-free meanwhile. */
static SLUICE__OUT_OF_LINE gboolean decide_under_lock(sluice__backend *backend,
                                                      sluice__limiter *limiter,
                                                      const sluice__rule *rule, const char *key,
                                                      gint64 permits, gint64 reserve_us,
                                                      sluice__verdict *verdict, GError **error)
{
    sluice__memory_store *store = limiter->memory;
    gint64 now, epoch;
    lock_in_order(store, limiter, &rule, &now, &epoch);
    sluice__memory_reshape(store, rule);
    if (G_UNLIKELY(store->blocked_until != 0)) { /* sluice_block without a key */
        if (now < store->blocked_until) {
            sluice__blocked_verdict(sluice__rule_capacity(rule), store->blocked_until, now,
                                    verdict);
            pthread_mutex_unlock(&store->lock);
            return TRUE;
        }
        sluice__memory_block_keyless(store, rule, 0); /* over: lock-free again */
    }
    if (lock_free(rule)) {
        /* the rule changed to one kept lock-free since it was read */
        pthread_mutex_unlock(&store->lock);
        return sluice__memory_decide(backend, limiter, rule, key, permits, reserve_us, verdict,
                                     error);
    }
    sluice__decide(rule, store->keyless, now, epoch, permits, reserve_us, verdict);
    pthread_mutex_unlock(&store->lock);
    return TRUE;
}

gboolean sluice__memory_decide(sluice__backend *backend, sluice__limiter *limiter,
                               const sluice__rule *rule, const char *key, gint64 permits,
                               gint64 reserve_us, sluice__verdict *verdict, GError **error)
{
    sluice__memory_store *store = limiter->memory;

    if (key) {
        while (
            !sluice__keyed_decide(&store->keyed, limiter, rule, key, permits, reserve_us, verdict))
            lay_out(store, limiter, rule);
        return TRUE;
    }
    for (;;) {
        const sluice__rule *r = sluice__memory_newest(limiter, rule);
        if (!lock_free(r))
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
            sluice__memory_reshape(store, sluice__memory_newest(limiter, rule));
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

    if (key) {
        /* waits for a reload's change under the store's lock */
        while (!sluice__keyed_release(&store->keyed, caller, key, permits)) {
            pthread_mutex_lock(&store->lock);
            pthread_mutex_unlock(&store->lock);
        }
        return;
    }
    lock_in_order(store, limiter, &rule, &now, NULL);
    if (store->shaped && sluice__rule_same_state(&store->shape, caller))
        sluice__release(caller, store->keyless, now, permits);
    pthread_mutex_unlock(&store->lock);
}

/* A penalty of `permits` (block_us < 0) or a block of block_us. */
typedef struct {
    gint64 permits, block_us;
} policy;

/* A policy applied to states under mine (the key's rule, or the limit's) at now. */
static void apply_to(const sluice__rule *mine, sluice__state *states, gint64 now, gint64 epoch,
                     gpointer data)
{
    const policy *p = data;
    if (p->block_us >= 0) {
        gint64 until = p->block_us > 0 ? now + p->block_us : 0;
        states[0].blocked_until = until;
        states[0].idle_at = MAX(states[0].idle_at, until); /* not swept before it ends */
    } else if (mine->kind == SLUICE__KIND_LIMIT && mine->algorithm != SLUICE__CONCURRENCY) {
        sluice__penalize(mine, states, now, epoch, p->permits);
    } /* else a reload since: nothing to take */
}

/* A penalty or a block for key under rule: the memory backend's penalize and block. */
static gboolean apply_policy(sluice__limiter *limiter, const sluice__rule *rule, const char *key,
                             gint64 permits, gint64 block_us)
{
    sluice__memory_store *store = limiter->memory;
    policy p = {permits, block_us};
    if (key) {
        while (!sluice__keyed_change(&store->keyed, limiter, rule, key, apply_to, &p))
            lay_out(store, limiter, rule);
        return TRUE;
    }
    gint64 now, epoch;
    lock_in_order(store, limiter, &rule, &now, &epoch);
    sluice__memory_reshape(store, rule);
    if (block_us >= 0) {
        sluice__memory_block_keyless(store, rule, block_us > 0 ? now + block_us : 0);
    } else if (rule->kind != SLUICE__KIND_LIMIT || rule->algorithm == SLUICE__CONCURRENCY) {
        /* a reload since: nothing to take */
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

    if (key) {
        sluice__keyed_reset(&store->keyed, key);
        return TRUE;
    }
    pthread_mutex_lock(&store->lock);
    sluice__memory_keyless_clear(store);
    sluice__hot_clear(&store->hot);
    store->blocked_until = 0; /* the next decision lays the lock-free state out again */
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
