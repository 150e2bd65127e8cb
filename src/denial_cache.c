/* SPDX-License-Identifier: MIT */
/* The denial cache: denials a remote backend gave that still hold.
 *
 * Exact because a denied call consumes nothing: until its retry_after has passed,
 * only time and other callers' admissions change the key's state, and admissions
 * only push the time the permits could pass later (docs/algorithms.md checks this
 * per algorithm). So a denial of N permits answers every call of N or more
 * permits until then, aged: retry and reset less the time since, and remaining as
 * the key's state ages meanwhile (from the state the denial carried: gcra,
 * token_bucket, sliding_window; fixed_window's does not change before its retry;
 * sliding_log's and a rule with bands' is kept as it was, a lower bound). Each limit's cache is a
 * table of keyed slots (key_slots.h; a new denial replaces what its slot held). Reading takes no
 * lock (each slot is a seqlock); writers take the slot's stripe, which fork() holds. No clock is
 * read here: the caller passes the time. */
#include "denial_cache.h"

#include "key_slots.h"
#include "limiter.h"
#include "memory/spin_wait.h"

/* A reader that finds its slot being written waits (sluice__spin_wait), then asks
 * the backend: a miss for every write would send a flood's callers to Redis each
 * time one of them stores the denial they all just got. */
#define WAIT_TRIES (SLUICE__SPINS_BEFORE_YIELD + 32)

/* Readers take no lock: a slot is a seqlock. Its writer (holding the slot's
 * stripe) makes seq odd, changes the fields, and makes it even again; a reader
 * copies the fields and uses them only if seq was the same even number before
 * and after. Every field is read and written atomically. */
typedef struct {
    guint seq;
    sluice__slot_key key;     /* empty, or the key denied                           */
    gconstpointer backend;    /* the backend that denied (kept until shutdown)    */
    const sluice__rule *rule; /* interned by the registry: equal rules, one pointer */
    gint64 permits;           /* the denied permits (a peek counts as one)        */
    gint64 sent_us;           /* when the denied command was sent                 */
    gint64 until_us;          /* it answers calls before this time                */
    gint64 verdict[5];        /* limit, remaining, retry_after_us, reset_after_us, refused */
    gint64 aging;             /* the verdict's aging (TRUE, FALSE) and state: what */
    gint64 state[3];          /* ages remaining exactly                           */
} slot;

struct sluice__denial_cache {
    slot slots[SLUICE__KEY_SLOTS];
};

/* Acquiring loads and releasing stores order the fields against seq without
 * fences (which ThreadSanitizer does not support); on x86 all are plain moves. */
#define LOAD(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

sluice__denial_cache *sluice__denial_cache_of(sluice__denial_cache **where)
{
    return sluice__limiter_part((gpointer *)where, sizeof(sluice__denial_cache));
}

void sluice__denial_cache_free(sluice__denial_cache *cache)
{
    g_free(cache);
}

/* What remains `aged` µs after a denial whose state was `state` (the verdict's,
 * sluice__verdict.aging): the key's state aged as the algorithm ages it
 * (src/algorithm.c), nothing admitted meanwhile, in exact integers. */
static gint64 aged_remaining(const sluice__rule *rule, const gint64 *state, gint64 aged)
{
    typedef __int128 i128;
    i128 l = rule->limit, w = rule->window_us;
    switch (rule->algorithm) {
    case SLUICE__GCRA: { /* tat - now = state[0] + state[1] / L µs; DVT = burst * T */
        i128 ttl = (i128)state[0] * l + state[1] - (i128)aged * l, dvt = (i128)rule->burst * w;
        if (ttl < 0)
            ttl = 0;
        return ttl < dvt ? (gint64)((dvt - ttl) / w) : 0;
    }
    case SLUICE__TOKEN_BUCKET: { /* tokens; now - last refill = state[1] + state[2] / L µs */
        i128 tokens = state[0], since = (i128)state[1] * l + state[2] + (i128)aged * l;
        if (tokens < rule->burst && since > 0)
            tokens = MIN(tokens + since / w, (i128)rule->burst);
        return (gint64)MAX(tokens, 0);
    }
    case SLUICE__SLIDING_WINDOW: { /* current, previous, now - start */
        gint64 window = rule->window_us, w_ms = window / 1000, cur = state[0], prev = state[1];
        gint64 since = state[2] + aged;
        if (since >= 2 * window)
            return rule->limit;
        if (since >= window) { /* the current window is the previous one now */
            prev = cur;
            cur = 0;
            since -= window;
        }
        gint64 weight = w_ms - MIN(since / 1000, w_ms - 1);
        return MAX(0, (rule->limit * w_ms - prev * weight - cur * w_ms) / w_ms);
    }
    default:
        return state[0];
    }
}

gboolean sluice__denial_cache_lookup(sluice__denial_cache *cache, gconstpointer backend,
                                     const sluice__rule *rule, const char *key, gint64 permits,
                                     gint64 now_us, sluice__verdict *v)
{
    sluice__packed_key k;
    if (!cache || !sluice__key_pack(key, &k))
        return FALSE;
    slot *s = &cache->slots[sluice__key_index(&k)];
    gint64 asked = MAX(permits, 1), sent_us, said[5], aging, state[3];
    for (guint tries = 0;; tries++) {
        guint before = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        if (before & 1) { /* being written: a few stores, unless its writer was preempted */
            if (tries >= WAIT_TRIES)
                return FALSE; /* the backend decides this one */
            sluice__spin_wait(tries);
            continue;
        }
        if (!sluice__slot_key_holds(&s->key, &k) || LOAD(&s->backend) != backend ||
            LOAD(&s->rule) != rule || asked < LOAD(&s->permits) || now_us >= LOAD(&s->until_us))
            return FALSE;
        sent_us = LOAD(&s->sent_us);
        for (guint i = 0; i < G_N_ELEMENTS(said); i++)
            said[i] = LOAD(&s->verdict[i]);
        aging = LOAD(&s->aging);
        for (guint i = 0; i < G_N_ELEMENTS(state); i++)
            state[i] = LOAD(&s->state[i]);
        if (LOAD(&s->seq) == before) /* the acquiring loads above come before this one */
            break;
    }
    gint64 aged = MAX(0, now_us - sent_us);
    *v = (sluice__verdict){.limit = said[0],
                           .remaining = said[1],
                           .retry_after_us = said[2],
                           .reset_after_us = said[3],
                           .refused = (guint)said[4]};
    if (asked > sluice__rule_capacity(rule))
        v->retry_after_us = -1; /* can never pass, whatever the state */
    else
        v->retry_after_us = MAX(1, v->retry_after_us - aged);
    v->reset_after_us = MAX(0, v->reset_after_us - aged);
    if (aging)
        v->remaining = aged_remaining(rule, state, aged);
    return TRUE;
}

/* With s's stripe held: opens and closes a change of s (the releasing stores
 * between them become visible after the odd seq, before the even one). */
static void write_begin(slot *s)
{
    STORE(&s->seq, LOAD(&s->seq) + 1);
}

static void write_end(slot *s)
{
    __atomic_store_n(&s->seq, LOAD(&s->seq) + 1, __ATOMIC_RELEASE);
}

void sluice__denial_cache_store(sluice__denial_cache *cache, gconstpointer backend,
                                const sluice__rule *rule, const char *key, gint64 permits,
                                gint64 sent_us, const sluice__verdict *v)
{
    sluice__packed_key k;
    gint64 holds_us = v->retry_after_us >= 0 ? v->retry_after_us : v->reset_after_us;
    if (v->blocked) { /* never kept: other processes lift blocks (sluice reset, ...) */
        sluice__denial_cache_admitted(cache, key);
        return;
    }
    if (v->allowed || holds_us <= 0 || !sluice__key_pack(key, &k))
        return;
    slot *s = &cache->slots[sluice__key_index(&k)];
    GMutex *lock = sluice__key_stripe(cache, &k);
    g_mutex_lock(lock);
    if (sluice__slot_key_holds(&s->key, &k) && LOAD(&s->backend) == backend &&
        LOAD(&s->rule) == rule && LOAD(&s->permits) <= MAX(permits, 1) &&
        LOAD(&s->until_us) >= sent_us + holds_us) {
        g_mutex_unlock(lock); /* what it holds answers every call this denial would */
        return;
    }
    write_begin(s);
    sluice__slot_key_set(&s->key, &k);
    STORE(&s->backend, backend);
    STORE(&s->rule, rule);
    STORE(&s->permits, MAX(permits, 1));
    STORE(&s->sent_us, sent_us);
    STORE(&s->until_us, sent_us + holds_us);
    const gint64 said[5] = {v->limit, v->remaining, v->retry_after_us, v->reset_after_us,
                            v->refused};
    for (guint i = 0; i < G_N_ELEMENTS(said); i++)
        STORE(&s->verdict[i], said[i]);
    /* a rule with bands reports one band's remaining: it keeps it (a lower bound) */
    STORE(&s->aging, (gint64)(v->aging && rule->n_bands + rule->n_shadow == 0));
    for (guint i = 0; i < G_N_ELEMENTS(v->state); i++)
        STORE(&s->state[i], v->state[i]);
    write_end(s);
    g_mutex_unlock(lock);
}

void sluice__denial_cache_admitted(sluice__denial_cache *cache, const char *key)
{
    sluice__packed_key k;
    if (!cache || !sluice__key_pack(key, &k))
        return;
    slot *s = &cache->slots[sluice__key_index(&k)];
    if (LOAD(&s->until_us) == G_MININT64 || !sluice__slot_key_holds(&s->key, &k))
        return; /* nothing kept for key (a racing store is as if it came after) */
    sluice__denial_cache_forget(cache, key);
}

void sluice__denial_cache_forget(sluice__denial_cache *cache, const char *key)
{
    sluice__packed_key k;
    if (!cache || !sluice__key_pack(key, &k))
        return;
    slot *s = &cache->slots[sluice__key_index(&k)];
    GMutex *lock = sluice__key_stripe(cache, &k);
    g_mutex_lock(lock);
    if (sluice__slot_key_holds(&s->key, &k)) {
        write_begin(s);
        STORE(&s->until_us, G_MININT64);
        write_end(s);
    }
    g_mutex_unlock(lock);
}
