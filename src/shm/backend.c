/* SPDX-License-Identifier: MIT */
/* The shm backend: the decisions of every limit in one zone that the processes of
 * a host share (docs/shm.md).
 *
 * A decision hashes its key (the zone's secret, the limit's record), takes the
 * key's stripe's lock, reads the time (not before the stripe's last decision),
 * reads each band's cell into a sluice__state (a sliding_log or concurrency log:
 * its runs, copied from their chunks, a dead process's leases left out), decides
 * as sluice__decide does, writes back what changed in one journaled change, and
 * lets go. A key's state gets a cell only when it admits something; one that
 * needs a cell takes a free one, else one whose state is back at full capacity,
 * else the one decided on longest ago. */
#include "shm/shm.h"

#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sluice/error.h>

#include "clock.h"
#include "inlining.h"
#include "override.h"
#include "shm/chunks.h"
#include "shm/hash.h"
#include "shm/limits.h"
#include "shm/procs.h"
#include "shm/stripe.h"
#include "value.h"

#define KEY_DOMAIN     2
#define KEYLESS_DOMAIN 3
/* How long a caller waiting for a concurrency permit sleeps at most before it asks
 * again: leases of a process that died are given back when someone asks. */
#define WAIT_SLICE_US (G_USEC_PER_SEC / 2)

typedef struct {
    sluice__backend base;
    sluice__zone *zone;
    GMutex lock;        /* the tables below                                  */
    GHashTable *limits; /* name -> sluice__shm_limit * of the running rules  */
    GPtrArray *all;     /* every sluice__shm_limit made: freed with the backend */
    guint config_gen;   /* atomic: bumped by each configure                  */
} shm_backend;

/* ---- a limiter's limit --------------------------------------------------------- */

static SLUICE__OUT_OF_LINE sluice__shm_limit *limit_lookup(shm_backend *b, sluice__limiter *limiter)
{
    g_mutex_lock(&b->lock);
    sluice__shm_limit *l = g_hash_table_lookup(b->limits, limiter->name);
    if (l)
        g_atomic_pointer_set(&limiter->shm, l);
    g_mutex_unlock(&b->lock);
    return l;
}

/* The limit a decision on limiter follows: the backend's for the running rule (the
 * newest, as the memory backend decides), found once per reload. */
static inline sluice__shm_limit *limit_of(shm_backend *b, sluice__limiter *limiter)
{
    sluice__shm_limit *l = g_atomic_pointer_get(&limiter->shm);
    if (G_LIKELY(l && l->backend == b && l->config_gen == (guint)g_atomic_int_get(&b->config_gen)))
        return l;
    return limit_lookup(b, limiter);
}

static gboolean zone_failed(shm_backend *b, GError **error)
{
    g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND,
                "zone %s: a lock of it cannot be taken (damaged); remove it with sluice zone "
                "--remove",
                b->zone->path);
    return FALSE;
}

/* ---- cells and states --------------------------------------------------------- */

/* A thread's rings for the runs of the logs it decides on, one per band. */
typedef struct {
    sluice__runs runs[SLUICE__ZONE_BANDS];
} scratch;

static void scratch_free(gpointer p)
{
    scratch *s = p;
    for (guint i = 0; i < SLUICE__ZONE_BANDS; i++)
        g_free(s->runs[i].runs);
    g_free(s);
}

static GPrivate scratch_key = G_PRIVATE_INIT(scratch_free);

static scratch *scratch_get(void)
{
    scratch *s = g_private_get(&scratch_key);
    if (G_UNLIKELY(!s)) {
        s = g_new0(scratch, 1);
        g_private_set(&scratch_key, s);
    }
    return s;
}

static inline gboolean logged(const sluice__rule *rule)
{
    return rule->algorithm == SLUICE__SLIDING_LOG || rule->algorithm == SLUICE__CONCURRENCY;
}

/* One band's cell as the decision reads it. */
typedef struct {
    guint64 hash;
    gint cell;            /* -1: none yet                                        */
    gboolean fresh;       /* no state was read (none, or of another gen)         */
    gboolean dropped;     /* dead owners' runs were left out of the log          */
    sluice__state before; /* as read (a log: its length, total and last run)   */
    sluice__run last;
} band_cell;

/* Reads the state of band cell bc into *st, for limit l under rule (a log into
 * ring). */
static void load(const sluice__zone *z, guint32 si, const sluice__zone_stripe *s,
                 const sluice__shm_limit *l, const sluice__rule *rule, band_cell *bc,
                 sluice__state *st, sluice__runs *ring)
{
    memset(st, 0, sizeof *st);
    bc->fresh = TRUE;
    bc->dropped = FALSE;
    gboolean log = logged(rule);
    if (log) {
        ring->head = 0;
        ring->len = 0;
        ring->total = 0;
        st->log = *ring;
    }
    if (bc->cell >= 0) {
        const sluice__zone_cell *c = &s->cells[bc->cell];
        guint32 flags = sluice__cell_flags(c->meta);
        if (sluice__cell_limit(c->meta) == l->index &&
            sluice__cell_gen(c->meta) == (l->gen & 0xfff) &&
            ((flags & SLUICE__CELL_LOG) != 0) == log) {
            bc->fresh = FALSE;
            st->started = (flags & SLUICE__CELL_STARTED) != 0;
            st->idle_at = c->idle_at;
            if (!log) {
                st->a = c->s[0];
                st->b = c->s[1];
                st->c = c->s[2];
                st->d = c->s[3];
            } else if (c->s[1] >= 0 && c->s[1] <= SLUICE__ZONE_MAX_RUNS &&
                       sluice__chunks_read(z, si, (guint32)bc->cell, sluice__chain_of(c->s[0]),
                                           (guint32)c->s[1], rule->algorithm == SLUICE__CONCURRENCY,
                                           ring)) {
                bc->dropped = ring->len != (guint32)c->s[1];
                st->log = *ring;
            } else {
                ring->len = 0; /* damaged: forgotten */
                ring->total = 0;
                st->log = *ring;
                bc->dropped = TRUE;
            }
        }
    }
    bc->before = *st;
    bc->last = st->log.len ? st->log.runs[st->log.len - 1] : (sluice__run){0, 0, 0};
}

/* TRUE when the decision changed st from what was read. */
static gboolean changed(const band_cell *bc, const sluice__state *st, gboolean log)
{
    const sluice__state *b = &bc->before;
    if (st->started != b->started)
        return TRUE;
    if (!log)
        return st->a != b->a || st->b != b->b || st->c != b->c || st->d != b->d;
    if (bc->dropped || st->log.head != 0 || st->log.len != b->log.len ||
        st->log.total != b->log.total)
        return TRUE;
    if (st->log.len == 0)
        return FALSE;
    const sluice__run *last = &st->log.runs[(st->log.head + st->log.len - 1) % st->log.cap];
    return last->t != bc->last.t || last->n != bc->last.n || last->owner != bc->last.owner;
}

/* The most owners whose runs squeeze_owned merges in one pass (more: the others'
 * are left as they are in that pass). */
#define SQUEEZE_OWNERS 64

/* Merges runs of r into the next later run of the same owner, oldest first, until
 * it has at most `most` runs or no two runs share an owner: their permits then
 * leave the window later than they would, never sooner, and each lease stays its
 * process's (given back when it dies). */
static void squeeze_owned(sluice__runs *r, guint32 most)
{
    while (r->len > most) {
        guint32 owners[SQUEEZE_OWNERS];
        guint last[SQUEEZE_OWNERS]; /* each owner's latest run so far, as i below */
        guint n_owners = 0, kept = 0, merged = 0;
        for (guint i = 0; i < r->len; i++) {
            sluice__run *run = &r->runs[(r->head + i) % r->cap];
            guint k = 0;
            while (k < n_owners && owners[k] != run->owner)
                k++;
            if (k < n_owners && r->len - merged > most) {
                sluice__run *older = &r->runs[(r->head + last[k]) % r->cap];
                run->n += older->n;
                older->n = 0; /* merged: dropped below */
                merged++;
            } else if (k == n_owners && n_owners < SQUEEZE_OWNERS) {
                owners[n_owners++] = run->owner;
            }
            if (k < n_owners)
                last[k] = i;
        }
        if (merged == 0)
            return; /* one run per owner */
        for (guint i = 0; i < r->len; i++) {
            sluice__run run = r->runs[(r->head + i) % r->cap];
            if (run.n > 0)
                r->runs[(r->head + kept++) % r->cap] = run;
        }
        r->len = kept;
    }
}

/* The last resort when nothing else makes room: merges the oldest runs of r, two
 * at a time, into the later one's time, until it has at most `most` runs; runs of
 * different processes merged so are no one's (they end with their window only). */
static void squeeze(sluice__runs *r, guint32 most)
{
    squeeze_owned(r, most);
    while (r->len > most && r->len >= 2) {
        sluice__run *a = &r->runs[r->head % r->cap], *b = &r->runs[(r->head + 1) % r->cap];
        b->n += a->n;
        if (a->owner != b->owner)
            b->owner = 0; /* no one's: it lasts its lifetime */
        r->head = (r->head + 1) % r->cap;
        r->len--;
    }
}

/* TRUE when cell i of s holds a log that may be freed (not one of `busy`). */
static gboolean log_cell(const sluice__zone_stripe *s, const sluice__cell_set *busy, guint32 i)
{
    const sluice__zone_cell *c = &s->cells[i];
    return !(busy && sluice__cell_set_has(busy, i)) && c->meta != 0 &&
           (sluice__cell_flags(c->meta) & SLUICE__CELL_LOG);
}

/* Frees cell i of stripe si (locked) in a change of its own. */
static void free_cell(sluice__zone *z, guint32 si, guint32 i)
{
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    sluice__zone_cell empty = {0};
    sluice__stripe_change(s, i);
    sluice__stripe_write(s, i, &empty);
    sluice__stripe_commit(z, si);
}

/* Gives back to the pool the chunks of evictable logs in stripe si (locked), other
 * than `busy`, until `need` are free; then, when `hard`, of the logs decided on
 * longest ago (evictions). */
static void free_logs(sluice__zone *z, guint32 si, const sluice__cell_set *busy, guint32 need,
                      gint64 now, gboolean hard)
{
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    for (guint32 i = 0; i < SLUICE__ZONE_CELLS && sluice__chunks_free(z) < need; i++)
        if (log_cell(s, busy, i) && sluice__cell_evictable(z, &s->cells[i], now))
            free_cell(z, si, i);
    guint32 now_ms = (guint32)(now / 1000);
    while (hard && sluice__chunks_free(z) < need) {
        gint oldest = -1;
        guint32 oldest_age = 0;
        for (guint32 i = 0; i < SLUICE__ZONE_CELLS; i++) {
            guint32 age = now_ms - s->cells[i].used_ms;
            if (log_cell(s, busy, i) && (oldest < 0 || age > oldest_age)) {
                oldest = (gint)i;
                oldest_age = age;
            }
        }
        if (oldest < 0)
            return;
        __atomic_store_n(&s->evictions, s->evictions + 1, __ATOMIC_RELAXED);
        free_cell(z, si, (guint32)oldest);
    }
}

/* Frees logs of other stripes (those not locked now), up to 64 of them or (hard)
 * every one, until `need` chunks are free: evictable ones, then (hard) the longest
 * idle. */
static void free_others(sluice__zone *z, guint32 si, guint32 need, gint64 now, gboolean hard)
{
    guint32 tries = hard ? z->l.n_stripes : MIN(z->l.n_stripes, 64u);
    for (guint32 k = 0; k < tries && sluice__chunks_free(z) < need; k++) {
        guint32 other = __atomic_fetch_add(&z->h->hand, 1, __ATOMIC_RELAXED) % z->l.n_stripes;
        if (other == si || !sluice__stripe_trylock(z, other))
            continue;
        free_logs(z, other, NULL, need, now, hard);
        sluice__stripe_unlock(z, other);
    }
}

/* Makes `need` chunks free for a log of stripe si (locked): evictable logs of this
 * stripe, then of others that are not locked now, then (hard) this stripe's
 * oldest. */
static void make_room(sluice__zone *z, guint32 si, const sluice__cell_set *busy, guint32 need,
                      gint64 now)
{
    free_logs(z, si, busy, need, now, FALSE);
    free_others(z, si, need, now, FALSE);
    if (sluice__chunks_free(z) < need)
        free_logs(z, si, busy, need, now, TRUE);
}

/* Fits log r into the chunks free for it in stripe si (locked), when the pool has
 * fewer than it needs after make_room: its runs of one process merged, then the
 * logs of every other stripe not locked now evicted, and, when that is not enough
 * either, its runs merged across processes (squeeze). */
static void fit_log(sluice__zone *z, guint32 si, sluice__runs *r, gint64 now)
{
    guint32 free = sluice__chunks_free(z);
    if (sluice__chunks_for(r->len) <= free)
        return;
    squeeze_owned(r, free * SLUICE__ZONE_RUNS);
    if (sluice__chunks_for(r->len) <= free)
        return;
    free_others(z, si, sluice__chunks_for(r->len), now, TRUE);
    free = sluice__chunks_free(z);
    if (sluice__chunks_for(r->len) > free)
        squeeze(r, free * SLUICE__ZONE_RUNS);
}

/* Writes n band states back for limit l under rule in stripe si (locked): each
 * that changed, in one change. A log that finds no room is squeezed to what there
 * is, or, with none at all, not written (*v is then a denial: nothing was taken). */
static void store(sluice__zone *z, guint32 si, const sluice__shm_limit *l, const sluice__rule *rule,
                  band_cell *cells, sluice__state *states, guint n, gint64 now, sluice__verdict *v)
{
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    gboolean log = logged(rule);
    gboolean any = FALSE;
    guint32 need = 0;
    sluice__cell_set busy = {{0}};
    for (guint i = 0; i < n; i++) {
        if (cells[i].cell >= 0)
            sluice__cell_set_add(&busy, (guint32)cells[i].cell);
        if (!changed(&cells[i], &states[i], log))
            continue;
        any = TRUE;
        if (log)
            need += sluice__chunks_for(states[i].log.len);
    }
    if (!any)
        return;
    if (log && sluice__chunks_free(z) < need)
        make_room(z, si, &busy, need, now);
    gint64 idle_at = states[0].idle_at;
    for (guint i = 0; i < n; i++) {
        band_cell *bc = &cells[i];
        sluice__state *st = &states[i];
        if (!changed(bc, st, log))
            continue;
        gboolean empty = log ? st->log.len == 0 : !st->started;
        if (bc->cell < 0 && empty)
            continue; /* nothing to keep, nowhere kept */
        if (bc->cell < 0) {
            gboolean lost;
            bc->cell = sluice__stripe_claim(z, s, bc->hash, now, &busy, &lost);
            if (bc->cell < 0)
                continue;
            sluice__cell_set_add(&busy, (guint32)bc->cell);
            if (lost)
                __atomic_store_n(&s->evictions, s->evictions + 1, __ATOMIC_RELAXED);
        }
        sluice__zone_chain *taken = sluice__stripe_change(s, (guint32)bc->cell);
        sluice__zone_cell c = {0};
        if (!empty) {
            guint32 flags = st->started ? SLUICE__CELL_STARTED : 0;
            c.meta = sluice__cell_meta(l->index, l->gen, flags | (log ? SLUICE__CELL_LOG : 0));
            c.used_ms = (guint32)(now / 1000);
            c.hash = bc->hash;
            c.idle_at = idle_at;
            c.s[0] = st->a;
            c.s[1] = st->b;
            c.s[2] = st->c;
            c.s[3] = st->d;
        }
        if (!empty && log) {
            fit_log(z, si, &st->log, now);
            if (st->log.len == 0 || !sluice__chunks_take(z, si, (guint32)bc->cell,
                                                         sluice__chunks_for(st->log.len), taken)) {
                v->allowed = FALSE; /* no room at all: not taken, not written */
                v->retry_after_us = MAX(v->retry_after_us, 1000);
                v->leased = 0;
                continue;
            }
            sluice__chunks_write(z, *taken, &st->log);
            c.s[0] = sluice__chain_word(*taken);
            c.s[1] = st->log.len;
            c.s[2] = st->log.total;
            c.s[3] = 0;
        }
        sluice__stripe_write(s, (guint32)bc->cell, &c);
    }
    sluice__stripe_commit(z, si);
}

/* The hash of key (NULL: the limit's shared state) under limit l. */
static inline guint64 key_hash(const sluice__zone *z, const sluice__shm_limit *l, const char *key)
{
    if (!key)
        return sluice__shm_hash(z->h->secret, (guint64)KEYLESS_DOMAIN << 32 | l->index, NULL, 0);
    return sluice__shm_hash(z->h->secret, (guint64)KEY_DOMAIN << 32 | l->index, key, strlen(key));
}

/* The time now_us on the clock of decisions, in µs since the Unix epoch (as the
 * memory backend's since_epoch). */
static gint64 since_epoch(gint64 now_us)
{
    return sluice__clock_injected() ? now_us : g_get_real_time();
}

/* Locks stripe si for a change at a time read before the lock is taken, and read
 * again when another decision took the lock in between (as the memory backend's
 * lock_in_order): so changes are in the order of their times. The time is never
 * before the stripe's last (another process's clock may be a hair behind); a
 * virtual clock's is taken as it is. */
static gboolean lock_at(sluice__zone *z, guint32 si, gint64 *now)
{
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    for (;;) {
        guint32 seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        *now = sluice__clock_now();
        if (!sluice__stripe_lock(z, si))
            return FALSE;
        if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) == seq) {
            __atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELEASE);
            if (*now < s->changed && !sluice__clock_injected())
                *now = s->changed;
            s->changed = *now;
            return TRUE;
        }
        sluice__stripe_unlock(z, si);
    }
}

/* The hash of band i of a key whose own is h, under rule. */
static inline guint64 band_hash(const sluice__rule *rule, guint64 h, guint i)
{
    return i == 0 ? h : sluice__shm_mix(h, sluice__zone_band_id(rule, i));
}

/* Finds the cells of a key's bands under rule in stripe s, reads their states. */
static void load_bands(sluice__zone *z, guint32 si, const sluice__shm_limit *l,
                       const sluice__rule *rule, guint64 h, band_cell *cells, sluice__state *states,
                       gint64 now)
{
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    scratch *sc = logged(rule) ? scratch_get() : NULL;
    for (guint i = 0; i < sluice__rule_bands(rule); i++) {
        cells[i].hash = band_hash(rule, h, i);
        cells[i].cell = sluice__stripe_find(s, cells[i].hash);
        if (cells[i].cell >= 0)
            s->cells[cells[i].cell].used_ms = (guint32)(now / 1000);
        load(z, si, s, l, rule, &cells[i], &states[i], sc ? &sc->runs[i] : NULL);
        states[i].owner = rule->algorithm == SLUICE__CONCURRENCY ? z->owner : 0;
    }
}

/* After a log decision: the scratch rings take back the buffers sluice__decide may
 * have grown. */
static void keep_rings(const sluice__rule *rule, const sluice__state *states)
{
    if (!logged(rule))
        return;
    scratch *sc = scratch_get();
    for (guint i = 0; i < sluice__rule_bands(rule); i++)
        sc->runs[i] = states[i].log;
}

/* The limit's rule a decision follows: the newest, as on the memory backend (a
 * caller that read the rule before a reload must not take the state back to the
 * old rule's shape), or, for a key with an override, the override under it. */
static const sluice__rule *rule_now(sluice__limiter *limiter, const sluice__rule *found,
                                    const char *key)
{
    const sluice__rule *current = sluice__limiter_rule(limiter);
    if (!current)
        current = sluice__rule_base(found);
    return key ? sluice__rule_now(current, found, key) : current;
}

/* A process forked after it attached: its own slot, for its own leases. */
static void join_if_forked(sluice__zone *z)
{
    if (G_LIKELY(z->pid == getpid()))
        return;
    if (sluice__zone_tables_lock(z)) {
        sluice__zone_procs_join(z);
        sluice__zone_tables_unlock(z);
    }
}

/* ---- blocks (sluice_block): a cell of their own beside a key's states ------------ */

/* The hash of the block of a key whose own is h. */
static inline guint64 block_hash(guint64 h)
{
    return sluice__shm_mix(h, G_GUINT64_CONSTANT(0xb10cb10cb10cb10c));
}

/* The cell of the block of the key of hash h in stripe s (locked) under limit l,
 * or -1. */
static gint block_cell(const sluice__zone_stripe *s, const sluice__shm_limit *l, guint64 h)
{
    if (G_LIKELY(!(s->blocked & sluice__block_bit(h)))) /* no block of the key: no lookup */
        return -1;
    gint c = sluice__stripe_find(s, block_hash(h));
    if (c < 0)
        return -1;
    guint32 meta = s->cells[c].meta;
    gboolean ours = sluice__cell_limit(meta) == l->index &&
                    sluice__cell_gen(meta) == (l->gen & 0xfff) &&
                    (sluice__cell_flags(meta) & SLUICE__CELL_BLOCK);
    return ours ? c : -1;
}

/* The end of the block in force on the key of hash h at now, or 0 (stripe si
 * locked); a block that has ended is cleared. */
static gint64 blocked_until(sluice__zone *z, guint32 si, const sluice__shm_limit *l, guint64 h,
                            gint64 now)
{
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    gint c = block_cell(s, l, h);
    if (G_LIKELY(c < 0))
        return 0;
    if (s->cells[c].s[0] > now)
        return s->cells[c].s[0];
    sluice__zone_cell empty = {0};
    sluice__stripe_change(s, (guint32)c);
    sluice__stripe_write(s, (guint32)c, &empty);
    sluice__stripe_commit(z, si);
    return 0;
}

/* Blocks the key of hash h until `until` (0: lifts its block), stripe si locked. */
static void set_block(sluice__zone *z, guint32 si, const sluice__shm_limit *l, guint64 h,
                      gint64 until, gint64 now)
{
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    gint c = block_cell(s, l, h);
    if (c < 0 && until == 0)
        return;
    if (c < 0) {
        sluice__cell_set busy = {{0}};
        gboolean lost;
        c = sluice__stripe_claim(z, s, block_hash(h), now, &busy, &lost);
        if (lost)
            __atomic_store_n(&s->evictions, s->evictions + 1, __ATOMIC_RELAXED);
    }
    sluice__zone_cell cell = {0};
    if (until != 0)
        cell = (sluice__zone_cell){.meta = sluice__cell_meta(l->index, l->gen, SLUICE__CELL_BLOCK),
                                   .used_ms = (guint32)(now / 1000),
                                   .hash = block_hash(h),
                                   .idle_at = until, /* kept until then, as a state would be */
                                   .s = {until, (gint64)h, 0, 0}};
    sluice__stripe_change(s, (guint32)c);
    sluice__stripe_write(s, (guint32)c, &cell);
    sluice__stripe_commit(z, si);
}

/* The most holders of leases a denied concurrency decision looks at. */
#define SUSPECTS 8

/* The owners (other than this process) of the leases of a log, at most SUSPECTS. */
static guint suspects_of(const sluice__zone *z, const sluice__runs *log, guint32 *out)
{
    guint n = 0;
    for (guint i = 0; i < log->len && n < SUSPECTS; i++) {
        guint32 owner = log->runs[(log->head + i) % log->cap].owner;
        gboolean seen = owner == 0 || owner == z->owner;
        for (guint k = 0; k < n && !seen; k++)
            seen = out[k] == owner;
        if (!seen)
            out[n++] = owner;
    }
    return n;
}

static gboolean shm_decide(sluice__backend *backend, sluice__limiter *limiter,
                           const sluice__rule *rule, const char *key, gint64 permits,
                           gint64 reserve_us, sluice__verdict *verdict, GError **error)
{
    shm_backend *b = (shm_backend *)backend;
    sluice__zone *z = b->zone;
    sluice__shm_limit *l = limit_of(b, limiter);
    if (G_UNLIKELY(!l)) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND,
                    "zone %s: [limit:%s] is not in the zone", z->path, limiter->name);
        return FALSE;
    }
    rule = rule_now(limiter, rule, key);
    if (G_UNLIKELY(sluice__override_decides(rule, verdict)))
        return TRUE; /* a reload made the key blocked or unlimited */
    if (rule->algorithm == SLUICE__CONCURRENCY)
        join_if_forked(z);
    guint64 h = key_hash(z, l, key);
    guint32 si = sluice__stripe_of(z, h);
    for (gboolean again = rule->algorithm == SLUICE__CONCURRENCY;;) {
        gint64 now;
        if (G_UNLIKELY(!lock_at(z, si, &now)))
            return zone_failed(b, error);
        gint64 until = blocked_until(z, si, l, h, now);
        if (G_UNLIKELY(until != 0)) { /* sluice_block */
            sluice__blocked_verdict(sluice__rule_capacity(rule), until, now, verdict);
            sluice__stripe_unlock(z, si);
            return TRUE;
        }
        band_cell cells[SLUICE__ZONE_BANDS];
        sluice__state states[SLUICE__ZONE_BANDS];
        load_bands(z, si, l, rule, h, cells, states, now);
        sluice__decide(rule, states, now, rule->epoch ? since_epoch(now) : now, permits, reserve_us,
                       verdict);
        store(z, si, l, rule, cells, states, sluice__rule_bands(rule), now, verdict);
        keep_rings(rule, states);
        guint32 suspects[SUSPECTS];
        guint n = again && !verdict->allowed ? suspects_of(z, &states[0].log, suspects) : 0;
        sluice__stripe_unlock(z, si);
        /* denied by leases of processes that may have died: once more without theirs */
        gboolean dead = FALSE;
        for (guint k = 0; k < n; k++)
            dead = sluice__zone_owner_dead(z, suspects[k]) || dead;
        if (!dead)
            return TRUE;
        again = FALSE;
    }
}

/* Wakes the processes waiting for a give-back. */
static void released(sluice__zone *z)
{
    __atomic_fetch_add(&z->h->release_seq, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &z->h->release_seq, FUTEX_WAKE, G_MAXINT, NULL, NULL, 0);
}

static void shm_release(sluice__backend *backend, sluice__limiter *limiter,
                        const sluice__rule *rule, const char *key, gint64 permits)
{
    shm_backend *b = (shm_backend *)backend;
    sluice__zone *z = b->zone;
    sluice__shm_limit *l = limit_of(b, limiter);
    rule = rule_now(limiter, rule, key);
    if (!l || rule->algorithm != SLUICE__CONCURRENCY)
        return;
    guint64 h = key_hash(z, l, key);
    guint32 si = sluice__stripe_of(z, h);
    gint64 now;
    if (!lock_at(z, si, &now)) {
        g_warning("zone %s: a lock of it cannot be taken (damaged): permits not given back",
                  z->path);
        return;
    }
    band_cell cells[SLUICE__ZONE_BANDS];
    sluice__state states[SLUICE__ZONE_BANDS];
    load_bands(z, si, l, rule, h, cells, states, now);
    sluice__release(rule, &states[0], now, permits);
    sluice__verdict ignored = {0};
    store(z, si, l, rule, cells, states, 1, now, &ignored);
    keep_rings(rule, states);
    sluice__stripe_unlock(z, si);
    released(z);
}

static gboolean shm_reset(sluice__backend *backend, sluice__limiter *limiter, const char *key,
                          GError **error)
{
    shm_backend *b = (shm_backend *)backend;
    sluice__zone *z = b->zone;
    sluice__shm_limit *l = limit_of(b, limiter);
    const sluice__rule *rule = sluice__limiter_rule(limiter);
    if (!l || !rule)
        return TRUE; /* no rule: nothing kept */
    guint64 h = key_hash(z, l, key);
    guint32 si = sluice__stripe_of(z, h);
    gint64 now;
    if (!lock_at(z, si, &now))
        return zone_failed(b, error);
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    sluice__zone_cell empty = {0};
    for (guint i = 0; i < sluice__rule_bands(rule); i++) { /* an override's is band 0's */
        gint c = sluice__stripe_find(s, band_hash(rule, h, i));
        if (c < 0)
            continue;
        sluice__stripe_change(s, (guint32)c);
        sluice__stripe_write(s, (guint32)c, &empty);
    }
    sluice__stripe_commit(z, si);
    set_block(z, si, l, h, 0, now); /* a reset lifts the key's block too */
    sluice__stripe_unlock(z, si);
    released(z);
    return TRUE;
}

/* A penalty of `permits` (block_us < 0) or a block of block_us for key under rule
 * (the key's: an override's, or the limit's own): the backend's penalize and block. */
static gboolean apply_policy(sluice__backend *backend, sluice__limiter *limiter,
                             const sluice__rule *rule, const char *key, gint64 permits,
                             gint64 block_us, GError **error)
{
    shm_backend *b = (shm_backend *)backend;
    sluice__zone *z = b->zone;
    sluice__shm_limit *l = limit_of(b, limiter);
    if (!l)
        return TRUE; /* no rule: nothing to take or block */
    guint64 h = key_hash(z, l, key);
    guint32 si = sluice__stripe_of(z, h);
    gint64 now;
    if (!lock_at(z, si, &now))
        return zone_failed(b, error);
    rule = rule_now(limiter, rule, key);
    if (block_us >= 0) {
        set_block(z, si, l, h, block_us > 0 ? now + block_us : 0, now);
    } else if (rule->kind == SLUICE__KIND_LIMIT && rule->algorithm != SLUICE__CONCURRENCY &&
               rule->algorithm != SLUICE__ADAPTIVE) { /* else a reload since: nothing to take */
        band_cell cells[SLUICE__ZONE_BANDS];
        sluice__state states[SLUICE__ZONE_BANDS];
        load_bands(z, si, l, rule, h, cells, states, now);
        sluice__penalize(rule, states, now, rule->epoch ? since_epoch(now) : now, permits);
        sluice__verdict ignored = {0};
        store(z, si, l, rule, cells, states, sluice__rule_bands(rule), now, &ignored);
        keep_rings(rule, states);
    }
    sluice__stripe_unlock(z, si);
    return TRUE;
}

static gboolean shm_penalize(sluice__backend *backend, sluice__limiter *limiter,
                             const sluice__rule *rule, const char *key, gint64 permits,
                             GError **error)
{
    return apply_policy(backend, limiter, rule, key, permits, -1, error);
}

static gboolean shm_block(sluice__backend *backend, sluice__limiter *limiter,
                          const sluice__rule *rule, const char *key, gint64 duration_us,
                          GError **error)
{
    return apply_policy(backend, limiter, rule, key, 0, duration_us, error);
}

static guint64 shm_releases(sluice__backend *backend)
{
    shm_backend *b = (shm_backend *)backend;
    return __atomic_load_n(&b->zone->h->release_seq, __ATOMIC_ACQUIRE);
}

static void shm_wait_release(sluice__backend *backend, guint64 seen, gint64 until_us)
{
    shm_backend *b = (shm_backend *)backend;
    guint32 *word = &b->zone->h->release_seq;
    gint64 now = g_get_monotonic_time();
    /* a slice at a time: a dead holder's leases come back only when asked for */
    gint64 end = MIN(until_us, now + WAIT_SLICE_US);
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == (guint32)seen && now < end) {
        struct timespec ts = {(end - now) / G_USEC_PER_SEC, (end - now) % G_USEC_PER_SEC * 1000};
        syscall(SYS_futex, word, FUTEX_WAIT, (guint32)seen, &ts, NULL, 0);
        now = g_get_monotonic_time();
    }
}

/* ---- the backend ---------------------------------------------------------------- */

static gboolean shm_configure(sluice__backend *backend, const sluice__config *config,
                              gboolean first, GError **error)
{
    shm_backend *b = (shm_backend *)backend;
    GHashTable *limits = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    if (!sluice__zone_limits_put(b->zone, config->rules, first, b, limits, error)) {
        g_hash_table_unref(limits);
        return FALSE;
    }
    g_mutex_lock(&b->lock);
    guint gen = (guint)g_atomic_int_get(&b->config_gen) + 1;
    GHashTableIter it;
    gpointer l;
    g_hash_table_iter_init(&it, limits);
    while (g_hash_table_iter_next(&it, NULL, &l)) {
        ((sluice__shm_limit *)l)->config_gen = gen;
        g_ptr_array_add(b->all, l);
    }
    g_hash_table_unref(b->limits);
    b->limits = limits;
    g_atomic_int_set(&b->config_gen, (gint)gen);
    g_mutex_unlock(&b->lock);
    return TRUE;
}

static gboolean shm_zone(sluice__backend *backend, sluice_zone_info *out)
{
    shm_backend *b = (shm_backend *)backend;
    sluice__zone *z = b->zone;
    if (sluice__zone_tables_lock(z)) { /* counts the live only */
        sluice__zone_procs_scan(z);
        sluice__zone_tables_unlock(z);
    }
    memset(out, 0, sizeof *out);
    g_strlcpy(out->name, z->name, sizeof out->name);
    g_strlcpy(out->path, z->path, sizeof out->path);
    out->size = (gint64)z->l.size;
    out->capacity = (gint64)z->l.n_stripes * SLUICE__ZONE_CELLS;
    for (guint32 i = 0; i < z->l.n_stripes; i++) {
        const sluice__zone_stripe *s = sluice__zone_stripe_at(z, i);
        out->keys += __atomic_load_n(&s->used, __ATOMIC_RELAXED);
        out->evictions += __atomic_load_n(&s->evictions, __ATOMIC_RELAXED);
    }
    out->repairs = __atomic_load_n(&z->h->repairs, __ATOMIC_RELAXED);
    out->chunks = z->l.n_chunks;
    out->chunks_free = sluice__chunks_free(z);
    for (guint32 i = 0; i < SLUICE__ZONE_PROCS; i++)
        out->processes += __atomic_load_n(&sluice__zone_proc_at(z, i)->state, __ATOMIC_RELAXED) ==
                          SLUICE__PROC_LIVE;
    return TRUE;
}

static void shm_free(sluice__backend *backend)
{
    shm_backend *b = (shm_backend *)backend;
    if (sluice__zone_tables_lock(b->zone)) {
        sluice__zone_procs_leave(b->zone);
        sluice__zone_tables_unlock(b->zone);
    }
    released(b->zone); /* its leases are no one's: waiters may pass */
    sluice__zone_detach(b->zone);
    g_hash_table_unref(b->limits);
    g_ptr_array_unref(b->all);
    g_mutex_clear(&b->lock);
    g_free(b);
}

static const sluice__backend_funcs shm_funcs = {
    .name = "shm",
    .in_process = TRUE,
    .decide = shm_decide,
    .release = shm_release,
    .penalize = shm_penalize,
    .block = shm_block,
    .reset = shm_reset,
    .configure = shm_configure,
    .zone = shm_zone,
    .releases = shm_releases,
    .wait_release = shm_wait_release,
    .free = shm_free,
};

char *sluice__shm_settings(const sluice__config *config)
{
    return g_strdup_printf("%s\n%" G_GINT64_FORMAT "\n%o", config->shm_name, config->shm_size,
                           config->shm_mode);
}

/* The chunks' share of a zone made for config: large when it has logs to keep. */
static sluice__zone_share share_for(const sluice__config *config)
{
    GHashTableIter it;
    gpointer rule;
    g_hash_table_iter_init(&it, config->rules);
    while (g_hash_table_iter_next(&it, NULL, &rule))
        if (logged(rule))
            return SLUICE__ZONE_SHARE_LARGE;
    return SLUICE__ZONE_SHARE_SMALL;
}

sluice__backend *sluice__backend_shm_new(const sluice__config *config, GError **error)
{
    GError *failure = NULL;
    sluice__zone *z = sluice__zone_attach(config->shm_name, config->shm_size, config->shm_mode,
                                          share_for(config), &failure);
    if (!z) {
        g_set_error(error, failure->domain, failure->code, "%s: [sluice] shm = %s: %s",
                    config->path ? config->path : "defaults", config->shm_name, failure->message);
        g_error_free(failure);
        return NULL;
    }
    if (sluice__zone_tables_lock(z)) {
        sluice__zone_procs_scan(z); /* the slots of processes that died */
        sluice__zone_procs_join(z);
        sluice__zone_tables_unlock(z);
    }
    shm_backend *b = g_new0(shm_backend, 1);
    b->base.funcs = &shm_funcs;
    b->zone = z;
    g_mutex_init(&b->lock);
    b->limits = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    b->all = g_ptr_array_new_with_free_func(g_free);
    return &b->base;
}
