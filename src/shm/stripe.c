/* SPDX-License-Identifier: MIT */
/* A stripe: 256 cells in one robust lock's care, found by an 8-bit tag per cell
 * (16 compared at once) from the group of 16 where the key's hash points.
 *
 * A change of cells is a journal's: before a cell is first written, the journal
 * keeps it as it was (the stripe's state says CHANGING); once every cell is
 * written the state says RELEASING, and the chains of runs the cells let go of
 * go back to the pool; then IDLE. A process that dies anywhere in between leaves
 * the lock to the next taker with EOWNERDEAD (or the journal not IDLE), which
 * puts the cells back as they were and gives back the chains taken for them
 * (CHANGING), or gives back what was being let go of (RELEASING); then it checks
 * every cell against the bounds of the zone. Stores are kept in program order
 * (a process stops at an instruction, its stores so far all land). */
#include "shm/stripe.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "shm/chunks.h"
#include "shm/lock.h"
#include "value.h"

#define ORDERED() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#define GROUPS    (SLUICE__ZONE_CELLS / 16)

/* The group of 16 cells where hash h's search starts. */
static inline guint32 home_group(guint64 h)
{
    return (guint32)(h >> 40) % GROUPS;
}

/* Bit k: tags[k] == tag, for the 16 tags of a group. */
static inline guint32 group_match(const guint8 *tags, guint8 tag)
{
#if defined(__SSE2__)
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)tags);
    return (guint32)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)tag)));
#else
    guint32 m = 0;
    for (guint32 k = 0; k < 16; k++)
        m |= (guint32)(tags[k] == tag) << k;
    return m;
#endif
}

gint sluice__stripe_find(const sluice__zone_stripe *s, guint64 h)
{
    guint8 tag = sluice__cell_tag(h);
    guint32 g0 = home_group(h);
    for (guint32 g = 0; g < GROUPS; g++) {
        guint32 base = ((g0 + g) % GROUPS) * 16;
        for (guint32 m = group_match(&s->tags[base], tag); m; m &= m - 1) {
            guint32 i = base + (guint32)__builtin_ctz(m);
            if (s->cells[i].hash == h && s->cells[i].meta != 0)
                return (gint)i;
        }
    }
    return -1;
}

gboolean sluice__cell_evictable(const sluice__zone *z, const sluice__zone_cell *c, gint64 now_us)
{
    if (c->meta == 0 || c->idle_at <= now_us)
        return TRUE;
    guint32 limit = sluice__cell_limit(c->meta);
    if (limit >= z->l.n_limits)
        return TRUE;
    const sluice__zone_limit *l = sluice__zone_limit_at(z, limit);
    return __atomic_load_n(&l->state, __ATOMIC_RELAXED) != SLUICE__LIMIT_VALID ||
           (__atomic_load_n(&l->gen, __ATOMIC_RELAXED) & 0xfff) != sluice__cell_gen(c->meta);
}

gint sluice__stripe_claim(const sluice__zone *z, const sluice__zone_stripe *s, guint64 h,
                          gint64 now_us, const sluice__cell_set *busy, gboolean *lost)
{
    guint32 g0 = home_group(h);
    *lost = FALSE;
    for (guint32 g = 0; g < GROUPS; g++) { /* a free cell */
        guint32 base = ((g0 + g) % GROUPS) * 16;
        for (guint32 m = group_match(&s->tags[base], 0); m; m &= m - 1) {
            guint32 i = base + (guint32)__builtin_ctz(m);
            if (!sluice__cell_set_has(busy, i))
                return (gint)i;
        }
    }
    guint32 now_ms = (guint32)(now_us / 1000);
    gint oldest = -1;
    guint32 oldest_age = 0;
    for (guint32 k = 0; k < SLUICE__ZONE_CELLS; k++) { /* one worth nothing, or the oldest */
        guint32 i = (g0 * 16 + k) % SLUICE__ZONE_CELLS;
        if (sluice__cell_set_has(busy, i))
            continue;
        if (sluice__cell_evictable(z, &s->cells[i], now_us))
            return (gint)i;
        guint32 age = now_ms - s->cells[i].used_ms;
        if (oldest < 0 || age > oldest_age) {
            oldest = (gint)i;
            oldest_age = age;
        }
    }
    *lost = oldest >= 0;
    return oldest;
}

sluice__zone_chain *sluice__stripe_change(sluice__zone_stripe *s, guint32 i)
{
    sluice__zone_journal *j = &s->journal;
    for (guint32 k = 0; k < j->n; k++)
        if (j->e[k].cell == i)
            return &j->e[k].alloc;
    g_assert(j->n < SLUICE__ZONE_BANDS); /* a decision changes a cell per band */
    sluice__zone_undo *e = &j->e[j->n];
    e->cell = i;
    e->reserved = 0;
    e->before = s->cells[i];
    e->alloc = (sluice__zone_chain){0, 0};
    ORDERED();
    j->n++;
    ORDERED();
    s->state = SLUICE__JOURNAL_CHANGING;
    ORDERED();
    return &e->alloc;
}

/* TRUE when cell c holds a block. */
static gboolean is_block(const sluice__zone_cell *c)
{
    return c->meta != 0 && (sluice__cell_flags(c->meta) & SLUICE__CELL_BLOCK);
}

/* The block filter of the blocks that the cells of s hold. */
static guint64 block_filter(const sluice__zone_stripe *s)
{
    guint64 filter = 0;
    for (guint32 i = 0; i < SLUICE__ZONE_CELLS; i++)
        if (is_block(&s->cells[i]))
            filter |= sluice__block_bit((guint64)s->cells[i].s[1]);
    return filter;
}

void sluice__stripe_write(sluice__zone_stripe *s, guint32 i, const sluice__zone_cell *c)
{
    gboolean was = s->cells[i].meta != 0, was_block = is_block(&s->cells[i]);
    if (is_block(c)) /* before the cell: a death in between leaves a bit too many */
        s->blocked |= sluice__block_bit((guint64)c->s[1]);
    ORDERED();
    s->cells[i] = *c;
    s->tags[i] = c->meta ? sluice__cell_tag(c->hash) : 0;
    __atomic_store_n(&s->used, s->used + (guint32)(c->meta != 0) - (guint32)was, __ATOMIC_RELAXED);
    if (was_block) /* a block gone: its bit may be no other's */
        s->blocked = block_filter(s);
}

/* Gives back the chain that cell e->cell held before the change, if it holds it
 * no more. */
static void let_go(sluice__zone *z, guint32 si, sluice__zone_stripe *s, const sluice__zone_undo *e)
{
    const sluice__zone_cell *before = &e->before;
    if (e->cell >= SLUICE__ZONE_CELLS || !(sluice__cell_flags(before->meta) & SLUICE__CELL_LOG))
        return;
    const sluice__zone_cell *now = &s->cells[e->cell];
    if (now->meta != 0 && (sluice__cell_flags(now->meta) & SLUICE__CELL_LOG) &&
        now->s[0] == before->s[0])
        return;
    sluice__chunks_give(z, si, sluice__chain_of(before->s[0]));
}

void sluice__stripe_commit(sluice__zone *z, guint32 si)
{
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    sluice__zone_journal *j = &s->journal;
    if (j->n == 0)
        return;
    ORDERED();
    s->state = SLUICE__JOURNAL_RELEASING; /* what the cells hold now stays */
    ORDERED();
    for (guint32 k = 0; k < j->n; k++)
        let_go(z, si, s, &j->e[k]);
    ORDERED();
    s->state = SLUICE__JOURNAL_IDLE;
    ORDERED();
    j->n = 0;
}

void sluice__stripe_repair(sluice__zone *z, guint32 si)
{
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    sluice__zone_journal *j = &s->journal;
    guint32 n = MIN(j->n, (guint32)SLUICE__ZONE_BANDS);
    if (s->state == SLUICE__JOURNAL_CHANGING) { /* undone: the cells as they were */
        for (guint32 k = n; k-- > 0;)
            if (j->e[k].cell < SLUICE__ZONE_CELLS)
                s->cells[j->e[k].cell] = j->e[k].before;
        for (guint32 k = 0; k < n; k++)
            sluice__chunks_give(z, si, j->e[k].alloc);
    } else if (s->state == SLUICE__JOURNAL_RELEASING) { /* done: finish letting go */
        for (guint32 k = 0; k < n; k++)
            let_go(z, si, s, &j->e[k]);
    }
    s->state = SLUICE__JOURNAL_IDLE;
    j->n = 0;
    /* every cell as the bounds of the zone allow; tags and count from the cells */
    guint32 used = 0;
    for (guint32 i = 0; i < SLUICE__ZONE_CELLS; i++) {
        sluice__zone_cell *c = &s->cells[i];
        gboolean bad = c->meta != 0 && sluice__cell_limit(c->meta) >= z->l.n_limits;
        if (!bad && c->meta != 0 && (sluice__cell_flags(c->meta) & SLUICE__CELL_LOG))
            bad = c->s[1] < 0 || c->s[1] > SLUICE__ZONE_MAX_RUNS ||
                  !sluice__chunks_check(z, si, i, sluice__chain_of(c->s[0]), (guint32)c->s[1]);
        if (bad)
            memset(c, 0, sizeof *c); /* forgotten: what it says cannot be read */
        s->tags[i] = c->meta ? sluice__cell_tag(c->hash) : 0;
        used += c->meta != 0;
    }
    __atomic_store_n(&s->used, used, __ATOMIC_RELAXED);
    s->blocked = block_filter(s);
}

static gboolean locked(sluice__zone *z, guint32 si, sluice__lock_result r)
{
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    if (r == SLUICE__LOCK_BUSY || r == SLUICE__LOCK_BROKEN)
        return FALSE;
    if (r == SLUICE__LOCKED_ORPHAN || s->state != SLUICE__JOURNAL_IDLE) {
        sluice__stripe_repair(z, si);
        __atomic_fetch_add(&z->h->repairs, 1, __ATOMIC_RELAXED);
    }
    if (r == SLUICE__LOCKED_ORPHAN)
        sluice__zone_lock_repaired(&s->lock);
    return TRUE;
}

gboolean sluice__stripe_lock(sluice__zone *z, guint32 si)
{
    return locked(z, si, sluice__zone_lock(&sluice__zone_stripe_at(z, si)->lock));
}

gboolean sluice__stripe_trylock(sluice__zone *z, guint32 si)
{
    return locked(z, si, sluice__zone_trylock(&sluice__zone_stripe_at(z, si)->lock));
}

void sluice__stripe_unlock(sluice__zone *z, guint32 si)
{
    sluice__zone_unlock(&sluice__zone_stripe_at(z, si)->lock);
}
