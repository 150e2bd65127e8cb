/* SPDX-License-Identifier: MIT */
/* A memory store's per-key states (src/memory/keyed.h).
 *
 * Each stripe has an array of slots (open addressing, linear probing, at most half
 * full), each slot empty, a key's node, or REMOVED. A slot holds the node's address
 * with a few bits of its key's hash in the address's low bits (a node is aligned),
 * so that a probe passes other keys without reading their nodes: a node's first
 * line is written by every decision on its key, and a probe that read it would pass
 * that line between threads deciding different keys. Readers load slots in a read
 * section; writers, under the stripe's lock, fill an empty slot, mark a slot
 * REMOVED, or replace the array by a new one (growing, or after a sweep), and
 * retire what they unlinked. A node's hash and key never change; its states, its
 * time and its `dead` mark are under its own lock, which writers take before they
 * unlink it, so a reader that locked a node it found sees whether it is still in
 * the table. */
#include "memory/keyed.h"

#include <string.h>

#include "clock.h"
#include "key_hash.h"
#include "memory/order.h"
#include "memory/retire.h"
#include "memory/store.h"
#include "override.h"

#define SWEEP_MIN    (1024 / SLUICE__KEYED_STRIPES) /* keys a stripe holds before sweeping */
#define ARRAY_MIN    16                             /* slots, a power of two               */
#define TAG_BITS     6                              /* a slot's bits of the hash            */
#define NODE_ALIGN   (1 << TAG_BITS)                /* a node has its cache lines alone     */
#define STRIPE_SHIFT 60                             /* the hash's top 4 bits: the stripe    */
#define TAG_MASK     ((guintptr)NODE_ALIGN - 1)     /* free in an aligned node's address    */
#define TAG_SHIFT    48                             /* which bits: not the slot's */
#define REMOVED      ((sluice__keyed_node *)&removed_mark)

G_STATIC_ASSERT(SLUICE__KEYED_STRIPES == 1 << (64 - STRIPE_SHIFT));
G_STATIC_ASSERT(TAG_SHIFT + TAG_BITS <= STRIPE_SHIFT);
G_STATIC_ASSERT(NODE_ALIGN >= 64); /* a cache line */

typedef struct {
    sluice__lock lock; /* the states, `changed` and `dead`                       */
    guint16 n;         /* states: one per band of the rule they are laid out for */
    guint16 dead;      /* with the lock: unlinked from the table                */
    guint64 seq;       /* atomic: decisions made on it (read before the clock)  */
    gint64 changed;    /* with the lock: the time of the last decision          */
    guint64 hash;
    sluice__state s[]; /* then the key, with its NUL */
} sluice__keyed_node;

struct sluice__keyed_array {
    gsize mask;       /* slots - 1 */
    guintptr slots[]; /* atomic: 0 (empty), or a node's address | its tag */
};

static char removed_mark __attribute__((aligned(NODE_ALIGN))); /* REMOVED points here; tag 0 */
static guint64 seed; /* per process: the hash of a key cannot be chosen from outside */

/* ---- keys and nodes ------------------------------------------------------------- */

/* The hash of key (src/key_hash.h): the stripe is its top bits, the slot its
 * bottom bits. */
static inline guint64 hash_key(const char *key)
{
    return sluice__key_hash(key, strlen(key), seed);
}

static inline char *node_key(sluice__keyed_node *node)
{
    return (char *)&node->s[node->n];
}

/* A node for key with n states, zeroed. */
static sluice__keyed_node *node_new(guint64 hash, const char *key, guint n)
{
    gsize len = strlen(key);
    gsize size = sizeof(sluice__keyed_node) + n * sizeof(sluice__state) + len + 1;
    sluice__keyed_node *node =
        g_aligned_alloc0(1, (size + NODE_ALIGN - 1) & ~(gsize)(NODE_ALIGN - 1), NODE_ALIGN);
    node->n = (guint16)n;
    node->hash = hash;
    memcpy(node_key(node), key, len + 1);
    return node;
}

static void node_free(gpointer p)
{
    sluice__keyed_node *node = p;
    for (guint i = 0; i < node->n; i++)
        sluice__state_clear(&node->s[i]);
    g_aligned_free(node);
}

/* Retires the nodes of `dead` (unlinked) and frees the array. */
static void nodes_free(gpointer p)
{
    g_ptr_array_free(p, TRUE);
}

static sluice__keyed_array *array_new(gsize slots)
{
    sluice__keyed_array *a = g_malloc0(sizeof *a + slots * sizeof a->slots[0]);
    a->mask = slots - 1;
    return a;
}

/* The bits of hash a slot keeps beside its node's address. */
static inline guintptr tag_of(guint64 hash)
{
    return (guintptr)(hash >> TAG_SHIFT) & TAG_MASK;
}

static inline sluice__keyed_node *node_at(guintptr slot)
{
    return (sluice__keyed_node *)(slot & ~TAG_MASK);
}

static inline guintptr slot_word(sluice__keyed_array *a, gsize i)
{
    return __atomic_load_n(&a->slots[i], __ATOMIC_SEQ_CST);
}

static inline sluice__keyed_node *slot_get(sluice__keyed_array *a, gsize i)
{
    return node_at(slot_word(a, i));
}

/* node (or REMOVED) into slot i of a. */
static inline void slot_set(sluice__keyed_array *a, gsize i, sluice__keyed_node *node)
{
    guintptr tag = node == REMOVED ? 0 : tag_of(node->hash);
    __atomic_store_n(&a->slots[i], (guintptr)node | tag, __ATOMIC_SEQ_CST);
}

/* Key's node in a (read in a read section, or under the stripe's lock), its slot in
 * *at; NULL when a has none. */
static inline sluice__keyed_node *find(sluice__keyed_array *a, guint64 hash, const char *key,
                                       gsize *at)
{
    if (!a)
        return NULL;
    guintptr tag = tag_of(hash);
    for (gsize i = hash & a->mask, probes = 0; probes <= a->mask; i = (i + 1) & a->mask, probes++) {
        guintptr slot = slot_word(a, i);
        if (!slot)
            return NULL;
        if ((slot & TAG_MASK) != tag)
            continue; /* another key's, or REMOVED (tag 0): its node is not read */
        sluice__keyed_node *node = node_at(slot);
        if (node != REMOVED && node->hash == hash && strcmp(node_key(node), key) == 0) {
            *at = i;
            return node;
        }
    }
    return NULL;
}

static inline sluice__keyed_array *array_of(sluice__keyed *keyed, guint stripe)
{
    return __atomic_load_n(&keyed->read.arrays[stripe], __ATOMIC_SEQ_CST);
}

static inline guint stripe_of(guint64 hash)
{
    return (guint)(hash >> STRIPE_SHIFT);
}

/* ---- writers (the stripe's lock held) ------------------------------------------- */

/* Puts node in the first free slot of its probe (a has room). */
static void put(sluice__keyed_array *a, sluice__keyed_node *node, guint *used)
{
    for (gsize i = node->hash & a->mask;; i = (i + 1) & a->mask) {
        sluice__keyed_node *was = slot_get(a, i);
        if (!was || was == REMOVED) {
            slot_set(a, i, node);
            *used += !was;
            return;
        }
    }
}

/* The stripe's array replaced by one with room for `keys` keys at most a quarter
 * full (none when `keys` is 0), holding its keys (not what was removed); the old
 * one retired. */
static sluice__keyed_array *rebuild(sluice__keyed *keyed, guint stripe, guint keys)
{
    sluice__keyed_stripe *s = &keyed->stripes[stripe];
    sluice__keyed_array *old = array_of(keyed, stripe);
    gsize slots = ARRAY_MIN;
    while (slots < 4 * (gsize)keys)
        slots *= 2;
    sluice__keyed_array *a = keys ? array_new(slots) : NULL;
    s->used = 0;
    for (gsize i = 0; old && i <= old->mask; i++) {
        sluice__keyed_node *node = slot_get(old, i);
        if (node && node != REMOVED)
            put(a, node, &s->used);
    }
    __atomic_store_n(&keyed->read.arrays[stripe], a, __ATOMIC_SEQ_CST);
    if (old)
        sluice__retire(old, g_free);
    return a;
}

/* Unlinks the node in slot i of a: marked dead under its lock, so a reader that
 * found it looks again; kept in `dead` to be retired. */
static void unlink_slot(sluice__keyed_stripe *s, sluice__keyed_array *a, gsize i, GPtrArray *dead)
{
    sluice__keyed_node *node = slot_get(a, i);
    sluice__lock_take(&node->lock);
    node->dead = TRUE;
    sluice__lock_give(&node->lock);
    slot_set(a, i, REMOVED);
    s->live--;
    g_ptr_array_add(dead, node);
}

static GPtrArray *dead_nodes(void)
{
    return g_ptr_array_new_with_free_func(node_free);
}

static void retire_dead(GPtrArray *dead)
{
    if (dead->len)
        sluice__retire(dead, nodes_free);
    else
        g_ptr_array_free(dead, TRUE);
}

/* What visit calls on a key's slot i of a (the stripe's lock held): it may unlink
 * the key (into dead) or replace it. */
typedef void (*key_func)(sluice__keyed_stripe *s, sluice__keyed_array *a, gsize i,
                         sluice__keyed_node *node, GPtrArray *dead, gpointer data);

/* Calls f on every key of the stripe (its lock held), then rebuilds its array for
 * the keys that stay; what f unlinked is retired. */
static void visit(sluice__keyed *keyed, guint stripe, key_func f, gpointer data)
{
    sluice__keyed_stripe *s = &keyed->stripes[stripe];
    sluice__keyed_array *a = array_of(keyed, stripe);
    GPtrArray *dead = dead_nodes();
    for (gsize i = 0; a && i <= a->mask; i++) {
        sluice__keyed_node *node = slot_get(a, i);
        if (node && node != REMOVED)
            f(s, a, i, node, dead, data);
    }
    retire_dead(dead);
    rebuild(keyed, stripe, s->live);
    s->sweep_at = MAX(SWEEP_MIN, 2 * s->live);
}

/* Calls visit on every stripe, taking its lock. */
static void visit_all(sluice__keyed *keyed, key_func f, gpointer data)
{
    for (guint stripe = 0; stripe < SLUICE__KEYED_STRIPES; stripe++) {
        sluice__lock_take(&keyed->stripes[stripe].lock);
        visit(keyed, stripe, f, data);
        sluice__lock_give(&keyed->stripes[stripe].lock);
    }
}

/* Unlinks the key when it is back to full capacity at *(gint64 *)now. */
static void sweep_key(sluice__keyed_stripe *s, sluice__keyed_array *a, gsize i,
                      sluice__keyed_node *node, GPtrArray *dead, gpointer now)
{
    sluice__lock_take(&node->lock);
    gboolean idle = node->s[0].idle_at <= *(gint64 *)now;
    sluice__lock_give(&node->lock);
    if (idle)
        unlink_slot(s, a, i, dead);
}

/* Adds node (a key the stripe does not have), decided at now. */
static void insert(sluice__keyed *keyed, guint stripe, sluice__keyed_node *node, gint64 now)
{
    sluice__keyed_stripe *s = &keyed->stripes[stripe];
    if (s->live >= s->sweep_at) /* keys back to full capacity go */
        visit(keyed, stripe, sweep_key, &now);
    sluice__keyed_array *a = array_of(keyed, stripe);
    if (!a || 2 * (gsize)(s->used + 1) > a->mask + 1)
        a = rebuild(keyed, stripe, s->live + 1);
    put(a, node, &s->used);
    s->live++;
}

/* ---- decisions ------------------------------------------------------------------ */

typedef enum {
    DONE,
    AGAIN,   /* the key's state came meanwhile, or the rule changed: once more */
    RESHAPE, /* the states are not laid out for the rule */
} outcome;

/* TRUE when rule r, the newest when a decision on key began, is still the newest and
 * the one the states are laid out for. */
static inline gboolean laid_out(sluice__keyed *keyed, sluice__limiter *limiter,
                                const sluice__rule *rule, const sluice__rule *r)
{
    return sluice__memory_newest(limiter, rule) == r &&
           __atomic_load_n(&keyed->read.rule, __ATOMIC_ACQUIRE) == r;
}

static inline outcome not_laid_out(sluice__keyed *keyed, const sluice__rule *r)
{
    return __atomic_load_n(&keyed->read.rule, __ATOMIC_ACQUIRE) == r ? AGAIN : RESHAPE;
}

/* Stores a node for key with n states (a copy of `states`; NULL: fresh ones) made at
 * now, under the stripe's lock: DONE, AGAIN when another thread stored the key's
 * meanwhile, or as not_laid_out when the states are not laid out for r. */
static outcome store_new(sluice__keyed *keyed, sluice__limiter *limiter, const sluice__rule *rule,
                         const sluice__rule *r, guint64 hash, const char *key, guint n,
                         const sluice__state *states, gint64 now)
{
    guint stripe = stripe_of(hash);
    sluice__keyed_stripe *s = &keyed->stripes[stripe];
    outcome done = DONE;
    gsize at;
    sluice__lock_take(&s->lock);
    if (!laid_out(keyed, limiter, rule, r))
        done = not_laid_out(keyed, r);
    else if (find(array_of(keyed, stripe), hash, key, &at))
        done = AGAIN;
    if (done == DONE) {
        sluice__keyed_node *node = node_new(hash, key, n);
        if (states)
            memcpy(node->s, states, n * sizeof *states);
        node->changed = now;
        insert(keyed, stripe, node, now);
    }
    sluice__lock_give(&s->lock);
    return done;
}

/* A decision on a key that has no state (none was found) at now, under mine (the
 * key's rule under r): on a fresh state, which is stored, under the stripe's lock,
 * only when it admitted something. */
static SLUICE__OUT_OF_LINE outcome decide_fresh(sluice__keyed *keyed, sluice__limiter *limiter,
                                                const sluice__rule *rule, const sluice__rule *r,
                                                const sluice__rule *mine, guint64 hash,
                                                const char *key, gint64 now, gint64 epoch,
                                                gint64 permits, gint64 reserve_us,
                                                sluice__verdict *verdict)
{
    guint n = sluice__rule_bands(mine);
    sluice__state fresh[1 + SLUICE__MAX_BANDS];
    memset(fresh, 0, n * sizeof fresh[0]);
    sluice__decide(mine, fresh, now, epoch, permits, reserve_us, verdict);
    gboolean started = FALSE;
    for (guint i = 0; i < n; i++)
        started = started || fresh[i].started;
    if (!started) /* nothing to store */
        return laid_out(keyed, limiter, rule, r) ? DONE : not_laid_out(keyed, r);

    outcome done = store_new(keyed, limiter, rule, r, hash, key, n, fresh, now);
    if (done != DONE)
        for (guint i = 0; i < n; i++)
            sluice__state_clear(&fresh[i]);
    return done;
}

/* Takes node's lock for a change at a time read before it (*now, after reading its
 * count of decisions `seq`), under rule r, the newest when the decision began: AGAIN
 * or RESHAPE, the lock not held, when the node was unlinked or decided on since, or
 * r is not the rule the states are laid out for. *now becomes the change's time
 * (sluice__memory_in_order). */
static inline outcome lock_node(sluice__keyed *keyed, sluice__limiter *limiter,
                                const sluice__rule *rule, const sluice__rule *r,
                                sluice__keyed_node *node, guint64 seq, gint64 *now)
{
    sluice__lock_take(&node->lock);
    if (G_UNLIKELY(node->dead || __atomic_load_n(&node->seq, __ATOMIC_RELAXED) != seq ||
                   !laid_out(keyed, limiter, rule, r))) {
        outcome o = node->dead ? AGAIN : not_laid_out(keyed, r);
        sluice__lock_give(&node->lock);
        return o;
    }
    __atomic_store_n(&node->seq, seq + 1, __ATOMIC_RELAXED);
    node->changed = *now = sluice__memory_in_order(*now, node->changed);
    return DONE;
}

/* What a call on a key does: a decision, or a change (change set). */
typedef struct {
    gint64 permits, reserve_us;
    sluice__verdict *verdict;
    sluice__keyed_change_func change;
    gpointer data;
} key_call;

/* Decides on key's states (or changes them), laid out for the newest rule of limiter:
 * FALSE when they are not. */
static inline __attribute__((always_inline)) gboolean on_key(sluice__keyed *keyed,
                                                             sluice__limiter *limiter,
                                                             const sluice__rule *rule,
                                                             const char *key, const key_call *c)
{
    guint64 hash = hash_key(key);
    guint stripe = stripe_of(hash);
    for (;;) {
        const sluice__rule *r = sluice__memory_newest(limiter, rule);
        const sluice__rule *mine = sluice__rule_now(r, rule, key); /* the key's rule under r */
        if (!c->change && G_UNLIKELY(sluice__override_decides(mine, c->verdict)))
            return TRUE; /* a reload made the key blocked or unlimited */
        sluice__reader *reader = sluice__read_enter();
        gsize at;
        sluice__keyed_node *node = find(array_of(keyed, stripe), hash, key, &at);
        guint64 seq = node ? __atomic_load_n(&node->seq, __ATOMIC_ACQUIRE) : 0;
        gint64 now = sluice__clock_now();
        gint64 epoch = r->epoch ? sluice__memory_since_epoch(now) : now;
        outcome o;
        if (G_UNLIKELY(!node)) {
            sluice__read_leave(reader);
            if (!c->change)
                o = decide_fresh(keyed, limiter, rule, r, mine, hash, key, now, epoch, c->permits,
                                 c->reserve_us, c->verdict);
            else if ((o = store_new(keyed, limiter, rule, r, hash, key, sluice__rule_bands(mine),
                                    NULL, now)) == DONE)
                o = AGAIN; /* a fresh state made: changed under the key's lock next time round */
        } else if (G_LIKELY((o = lock_node(keyed, limiter, rule, r, node, seq, &now)) == DONE)) {
            sluice__state *first = &node->s[0];
            if (!r->epoch)
                epoch = now;
            if (c->change) {
                c->change(mine, node->s, now, epoch, c->data);
            } else if (G_UNLIKELY(first->blocked_until != 0) && now < first->blocked_until) {
                sluice__blocked_verdict(sluice__rule_capacity(mine), first->blocked_until, now,
                                        c->verdict); /* sluice_block */
            } else {
                if (G_UNLIKELY(first->blocked_until != 0))
                    first->blocked_until = 0; /* the block is over */
                sluice__decide(mine, node->s, now, epoch, c->permits, c->reserve_us, c->verdict);
            }
            sluice__lock_give(&node->lock);
            sluice__read_leave(reader);
        } else {
            sluice__read_leave(reader);
        }
        if (o != AGAIN)
            return o == DONE;
    }
}

gboolean sluice__keyed_decide(sluice__keyed *keyed, sluice__limiter *limiter,
                              const sluice__rule *rule, const char *key, gint64 permits,
                              gint64 reserve_us, sluice__verdict *verdict)
{
    key_call c = {permits, reserve_us, verdict, NULL, NULL};
    return on_key(keyed, limiter, rule, key, &c);
}

SLUICE__OUT_OF_LINE gboolean sluice__keyed_change(sluice__keyed *keyed, sluice__limiter *limiter,
                                                  const sluice__rule *rule, const char *key,
                                                  sluice__keyed_change_func change, gpointer data)
{
    key_call c = {0, 0, NULL, change, data};
    return on_key(keyed, limiter, rule, key, &c);
}

gboolean sluice__keyed_release(sluice__keyed *keyed, const sluice__rule *rule, const char *key,
                               gint64 permits)
{
    guint64 hash = hash_key(key);
    guint stripe = stripe_of(hash);
    for (;;) {
        sluice__reader *reader = sluice__read_enter();
        gsize at;
        sluice__keyed_node *node = find(array_of(keyed, stripe), hash, key, &at);
        if (!node) {
            sluice__read_leave(reader);
            return TRUE; /* nothing held */
        }
        guint64 seq = __atomic_load_n(&node->seq, __ATOMIC_ACQUIRE);
        gint64 now = sluice__clock_now();
        sluice__lock_take(&node->lock);
        const sluice__rule *shape = __atomic_load_n(&keyed->read.rule, __ATOMIC_ACQUIRE);
        gboolean current = !node->dead && __atomic_load_n(&node->seq, __ATOMIC_RELAXED) == seq;
        if (current && shape) {
            __atomic_store_n(&node->seq, seq + 1, __ATOMIC_RELAXED);
            node->changed = now = sluice__memory_in_order(now, node->changed);
            if (sluice__rule_same_state(shape, rule))
                sluice__release(rule, node->s, now, permits);
        }
        sluice__lock_give(&node->lock);
        sluice__read_leave(reader);
        if (current)
            return shape != NULL;
    }
}

void sluice__keyed_reset(sluice__keyed *keyed, const char *key)
{
    guint64 hash = hash_key(key);
    guint stripe = stripe_of(hash);
    sluice__keyed_stripe *s = &keyed->stripes[stripe];
    GPtrArray *dead = dead_nodes();
    gsize at;
    sluice__lock_take(&s->lock);
    sluice__keyed_array *a = array_of(keyed, stripe);
    if (find(a, hash, key, &at))
        unlink_slot(s, a, at, dead);
    sluice__lock_give(&s->lock);
    retire_dead(dead);
}

gsize sluice__keyed_count(sluice__keyed *keyed)
{
    gsize n = 0;
    for (guint i = 0; i < SLUICE__KEYED_STRIPES; i++) {
        sluice__keyed_stripe *s = &keyed->stripes[i];
        sluice__lock_take(&s->lock);
        n += s->live;
        sluice__lock_give(&s->lock);
    }
    return n;
}

/* ---- a reload's change (the store's lock held) ------------------------------------ */

void sluice__keyed_unshape(sluice__keyed *keyed)
{
    __atomic_store_n(&keyed->read.rule, NULL, __ATOMIC_SEQ_CST);
}

void sluice__keyed_shape(sluice__keyed *keyed, const sluice__rule *rule)
{
    __atomic_store_n(&keyed->read.rule, rule, __ATOMIC_RELEASE);
}

static void forget_key(sluice__keyed_stripe *s, sluice__keyed_array *a, gsize i,
                       sluice__keyed_node *node, GPtrArray *dead, gpointer data)
{
    (void)node;
    (void)data;
    unlink_slot(s, a, i, dead);
}

void sluice__keyed_clear(sluice__keyed *keyed)
{
    visit_all(keyed, forget_key, NULL);
}

/* What sluice__keyed_remap does to each key. */
typedef struct {
    sluice__keyed_bands_func bands;
    sluice__keyed_move_func move;
    gpointer data;
} remapping;

/* Replaces the key's node by one laid out anew, unless its states stay. */
static void remap_key(sluice__keyed_stripe *s, sluice__keyed_array *a, gsize i,
                      sluice__keyed_node *node, GPtrArray *dead, gpointer data)
{
    const remapping *r = data;
    (void)s;
    guint n_to = r->bands(node_key(node), node->n, r->data);
    if (n_to == 0)
        return;
    sluice__keyed_node *moved = node_new(node->hash, node_key(node), n_to);
    sluice__lock_take(&node->lock);
    r->move(node_key(node), node->s, node->n, moved->s, r->data);
    moved->changed = node->changed;
    node->dead = TRUE;
    sluice__lock_give(&node->lock);
    slot_set(a, i, moved);
    g_ptr_array_add(dead, node);
}

void sluice__keyed_remap(sluice__keyed *keyed, sluice__keyed_bands_func bands,
                         sluice__keyed_move_func move, gpointer data)
{
    remapping r = {bands, move, data};
    visit_all(keyed, remap_key, &r);
}

/* ---- the store's life, and fork() ------------------------------------------------- */

void sluice__keyed_init(sluice__keyed *keyed)
{
    static gsize seeded;
    if (g_once_init_enter(&seeded)) {
        seed = sluice__key_seed();
        g_once_init_leave(&seeded, 1);
    }
    memset(keyed, 0, sizeof *keyed);
    for (guint i = 0; i < SLUICE__KEYED_STRIPES; i++)
        keyed->stripes[i].sweep_at = SWEEP_MIN;
}

void sluice__keyed_free(sluice__keyed *keyed)
{
    for (guint stripe = 0; stripe < SLUICE__KEYED_STRIPES; stripe++) {
        sluice__keyed_array *a = array_of(keyed, stripe);
        for (gsize i = 0; a && i <= a->mask; i++) {
            sluice__keyed_node *node = slot_get(a, i);
            if (node && node != REMOVED)
                node_free(node);
        }
        g_free(a);
    }
    sluice__retire_flush();
}

void sluice__keyed_fork_lock(sluice__keyed *keyed)
{
    for (guint i = 0; i < SLUICE__KEYED_STRIPES; i++)
        sluice__lock_take(&keyed->stripes[i].lock);
}

void sluice__keyed_fork_unlock(sluice__keyed *keyed)
{
    for (guint i = 0; i < SLUICE__KEYED_STRIPES; i++)
        sluice__lock_give(&keyed->stripes[i].lock);
}
