/* SPDX-License-Identifier: MIT */
/* The chunk pool: free chunks in one list under the pool's robust lock.
 *
 * A chunk's owner says where it is: 0 in the pool, else the stripe (+ 1) whose
 * cell holds it. The pool's head moves in one store, and owners change only after
 * it: a process that dies while it holds the pool's lock leaves the list and the
 * owners out of step, and the next taker rebuilds the list from the owners (every
 * chunk whose owner is 0, or no stripe). Chunks that a stripe took or was giving
 * back when its process died are still its own; the stripe's repair gives them
 * back (sluice__chunks_give walks a chain only as far as the stripe owns it). */
#include "shm/chunks.h"

#include "shm/lock.h"
#include "shm/procs.h"
#include "value.h"

/* Store order for a process that may die between two stores (see stripe.c). */
#define ORDERED() __atomic_signal_fence(__ATOMIC_SEQ_CST)

void sluice__chunks_rebuild(sluice__zone *z)
{
    guint32 head = 0, free = 0;
    for (guint32 i = z->l.n_chunks; i-- > 0;) {
        sluice__zone_chunk *c = sluice__zone_chunk_at(z, i);
        if (c->owner > z->l.n_stripes)
            c->owner = 0; /* damaged: no stripe holds it */
        if (c->owner != 0)
            continue;
        c->next = head;
        c->count = 0;
        head = i + 1;
        free++;
    }
    z->h->pool_head = head;
    __atomic_store_n(&z->h->pool_free, free, __ATOMIC_RELAXED);
}

static void rebuild(gpointer z)
{
    sluice__chunks_rebuild(z);
}

static gboolean pool_lock(sluice__zone *z)
{
    return sluice__zone_lock_repairing(&z->h->pool_lock, rebuild, z, &z->h->repairs);
}

static void pool_unlock(sluice__zone *z)
{
    sluice__zone_unlock(&z->h->pool_lock);
}

/* The last of `count` free chunks from the pool's head, or 0 when the list is not
 * that (damaged: it is rebuilt, and the caller tries again). */
static guint32 walk_free(sluice__zone *z, guint32 count)
{
    guint32 at = z->h->pool_head;
    for (guint32 k = 1;; k++) {
        if (at == 0 || at > z->l.n_chunks || sluice__zone_chunk_at(z, at - 1)->owner != 0)
            return 0;
        if (k == count)
            return at;
        at = sluice__zone_chunk_at(z, at - 1)->next;
    }
}

gboolean sluice__chunks_take(sluice__zone *z, guint32 stripe, guint32 cell, guint32 count,
                             sluice__zone_chain *chain)
{
    if (count == 0 || !pool_lock(z))
        return FALSE;
    guint32 last = 0;
    for (int tries = 0; tries < 2 && z->h->pool_free >= count; tries++) {
        last = walk_free(z, count);
        if (last)
            break;
        sluice__chunks_rebuild(z);
    }
    if (!last || z->h->pool_free < count) {
        pool_unlock(z);
        return FALSE;
    }
    guint32 first = z->h->pool_head;
    *chain = (sluice__zone_chain){first, count};
    ORDERED();
    z->h->pool_head = sluice__zone_chunk_at(z, last - 1)->next; /* taken */
    __atomic_store_n(&z->h->pool_free, z->h->pool_free - count, __ATOMIC_RELAXED);
    ORDERED();
    for (guint32 at = first, k = 0; k < count; k++) {
        sluice__zone_chunk *c = sluice__zone_chunk_at(z, at - 1);
        c->owner = stripe + 1;
        c->cell = cell;
        c->count = 0;
        at = c->next;
        if (k + 1 == count)
            c->next = 0;
    }
    pool_unlock(z);
    return TRUE;
}

static void array_free(gpointer a)
{
    g_array_unref(a);
}

/* Indices of the chunks being given back (a thread's scratch). */
static GPrivate giving_key = G_PRIVATE_INIT(array_free);

/* The chunk after `at` in a chain of stripe's, or 0 when `at` is not one of its
 * chunks. */
static guint32 next_of(const sluice__zone *z, guint32 stripe, guint32 at)
{
    if (at == 0 || at > z->l.n_chunks)
        return 0;
    const sluice__zone_chunk *c = sluice__zone_chunk_at(z, at - 1);
    return c->owner == stripe + 1 ? c->next : 0;
}

/* TRUE when `at` is one of stripe's chunks. */
static gboolean owned(const sluice__zone *z, guint32 stripe, guint32 at)
{
    return at != 0 && at <= z->l.n_chunks && sluice__zone_chunk_at(z, at - 1)->owner == stripe + 1;
}

/* How many distinct chunks a walk from `first` meets while they are stripe's, at
 * most `most`: a damaged chain that runs in a circle is counted once around
 * (Floyd's cycle finding, in place). */
static guint32 distinct(const sluice__zone *z, guint32 stripe, guint32 first, guint32 most)
{
    guint32 len = 0;
    for (guint32 at = first; len < most && owned(z, stripe, at); at = next_of(z, stripe, at))
        len++;
    guint32 slow = first, fast = first;
    for (guint32 k = 0; k < len; k++) {
        slow = next_of(z, stripe, slow);
        fast = next_of(z, stripe, next_of(z, stripe, fast));
        if (!owned(z, stripe, fast) || !owned(z, stripe, slow))
            return len;     /* the walk ends: no circle */
        if (slow == fast) { /* a circle: mu chunks before it, lambda around */
            guint32 mu = 0, lambda = 1;
            for (slow = first; slow != fast; mu++) {
                slow = next_of(z, stripe, slow);
                fast = next_of(z, stripe, fast);
            }
            for (fast = next_of(z, stripe, slow); fast != slow; lambda++)
                fast = next_of(z, stripe, fast);
            return MIN(len, mu + lambda);
        }
    }
    return len;
}

void sluice__chunks_give(sluice__zone *z, guint32 stripe, sluice__zone_chain chain)
{
    if (chain.first == 0 || chain.count == 0 || !pool_lock(z))
        return;
    guint32 n = distinct(z, stripe, chain.first, MIN(chain.count, z->l.n_chunks));
    GArray *giving = g_private_get(&giving_key);
    if (!giving) {
        giving = g_array_new(FALSE, FALSE, sizeof(guint32));
        g_private_set(&giving_key, giving);
    }
    g_array_set_size(giving, 0);
    for (guint32 at = chain.first; giving->len < n; at = next_of(z, stripe, at))
        g_array_append_val(giving, at);
    if (giving->len > 0) {
        guint32 first = g_array_index(giving, guint32, 0);
        guint32 last = g_array_index(giving, guint32, giving->len - 1);
        sluice__zone_chunk_at(z, last - 1)->next = z->h->pool_head;
        ORDERED();
        z->h->pool_head = first; /* given */
        __atomic_store_n(&z->h->pool_free, z->h->pool_free + giving->len, __ATOMIC_RELAXED);
        ORDERED();
        /* last to first: a death in between leaves the stripe the first ones,
         * from which its repair walks */
        for (guint i = giving->len; i-- > 0;)
            sluice__zone_chunk_at(z, g_array_index(giving, guint32, i) - 1)->owner = 0;
    }
    pool_unlock(z);
}

guint32 sluice__chunks_free(const sluice__zone *z)
{
    return __atomic_load_n(&z->h->pool_free, __ATOMIC_RELAXED);
}

/* Makes room in r for n runs (head 0). */
static void reserve(sluice__runs *r, guint32 n)
{
    if (r->cap >= n && r->head == 0)
        return;
    guint cap = MAX(r->cap, 8);
    while (cap < n)
        cap *= 2;
    g_free(r->runs);
    r->runs = g_new(sluice__run, cap);
    r->cap = cap;
    r->head = 0;
}

gboolean sluice__chunks_check(const sluice__zone *z, guint32 stripe, guint32 cell,
                              sluice__zone_chain chain, guint32 len)
{
    if (chain.count != sluice__chunks_for(len) || (len > 0) != (chain.first != 0))
        return FALSE;
    guint32 at = chain.first, seen = 0;
    for (guint32 k = 0; k < chain.count; k++) {
        if (at == 0 || at > z->l.n_chunks)
            return FALSE;
        const sluice__zone_chunk *c = sluice__zone_chunk_at(z, at - 1);
        guint32 n = c->count;
        if (c->owner != stripe + 1 || c->cell != cell || n == 0 || n > SLUICE__ZONE_RUNS)
            return FALSE;
        seen += n;
        at = c->next;
    }
    return seen == len;
}

gboolean sluice__chunks_read(const sluice__zone *z, guint32 stripe, guint32 cell,
                             sluice__zone_chain chain, guint32 len, gboolean drop_dead,
                             sluice__runs *r)
{
    reserve(r, len + 1);
    r->len = 0;
    r->total = 0;
    if (!sluice__chunks_check(z, stripe, cell, chain, len))
        return FALSE;
    gint64 t = G_MININT64;
    for (guint32 at = chain.first, k = 0; k < chain.count; k++) {
        const sluice__zone_chunk *c = sluice__zone_chunk_at(z, at - 1);
        for (guint32 i = 0; i < c->count; i++) {
            sluice__run run = c->runs[i];
            if (run.n <= 0 || run.n > SLUICE__ZONE_MAX_RUNS || run.t < t)
                return FALSE; /* not runs sluice wrote */
            t = run.t;
            if (drop_dead && !sluice__zone_owner_alive(z, run.owner))
                continue;
            r->runs[r->len++] = run;
            r->total += run.n;
        }
        at = c->next;
    }
    return TRUE;
}

void sluice__chunks_write(sluice__zone *z, sluice__zone_chain chain, const sluice__runs *r)
{
    guint32 at = chain.first;
    for (guint32 i = 0; i < r->len && at != 0;) {
        sluice__zone_chunk *c = sluice__zone_chunk_at(z, at - 1);
        guint32 n = 0;
        for (; n < SLUICE__ZONE_RUNS && i < r->len; n++, i++)
            c->runs[n] = r->runs[(r->head + i) % r->cap];
        c->count = n;
        at = c->next;
    }
}
