/* SPDX-License-Identifier: MIT */
/* libFuzzer harness of the shm backend's zone as another process may have left it:
 * a fresh 1 MiB zone with bytes written over it (the input is a list of patches:
 * a region, an offset in it, and bytes), then what a process does with a zone it
 * did not write: check its header (sluice__zone_wrap), repair each stripe as the
 * taker of a dead holder's lock does, rebuild the chunk pool, find and place
 * keys, read every log. Nothing may read or write outside the zone, and after
 * the repair every stripe holds up: its journal closed, its tags and count those
 * of its cells, every log's chain its own. (The harness is alone with the zone:
 * its locks, which a repair takes for the chunk pool, are made afresh.) */
#include <string.h>

#include <glib.h>

#include "fuzz.h"
#include "shm/chunks.h"
#include "shm/lock.h"
#include "shm/stripe.h"
#include "shm/zone.h"

#define ZONE_SIZE (1u << 20)

static guint8 *fresh; /* a formatted zone, copied for each input */
static guint8 *work;

/* Where a patch goes: regions of a zone that its readers take apart. */
static void region_of(const sluice__zone_layout *l, guint8 which, guint64 *off, guint64 *len)
{
    switch (which % 7) {
    case 0: /* the header */
        *off = 0, *len = sizeof(sluice__zone_header);
        break;
    case 1: /* the processes and limits */
        *off = l->procs_off, *len = l->chunks_off - l->procs_off;
        break;
    case 2: /* the chunks */
        *off = l->chunks_off, *len = (guint64)l->n_chunks * sizeof(sluice__zone_chunk);
        break;
    case 3: /* stripe 0 up to its tags: its counts and journal */
        *off = l->stripes_off, *len = offsetof(sluice__zone_stripe, tags);
        break;
    case 4: /* stripe 0's tags and cells */
        *off = l->stripes_off + offsetof(sluice__zone_stripe, tags);
        *len = sizeof(sluice__zone_stripe) - offsetof(sluice__zone_stripe, tags);
        break;
    case 5: /* the last stripe */
        *off = l->stripes_off + (guint64)(l->n_stripes - 1) * l->stripe_bytes;
        *len = sizeof(sluice__zone_stripe);
        break;
    default: /* anywhere */
        *off = 0, *len = l->size;
        break;
    }
}

/* Applies the input's patches: [region][offset: 3 bytes][length][bytes]... */
static void patch(const sluice__zone_layout *l, const uint8_t *data, size_t size)
{
    size_t at = 0;
    while (at + 5 <= size) {
        guint64 off, len;
        region_of(l, data[at], &off, &len);
        guint64 where = (data[at + 1] | data[at + 2] << 8 | (guint64)data[at + 3] << 16) % len;
        size_t n = MIN((size_t)data[at + 4], size - at - 5);
        n = MIN(n, (size_t)(len - where));
        memcpy(work + off + where, data + at + 5, n);
        at += 5 + n;
    }
}

/* After the repair: the stripe holds up. */
static void check_stripe(sluice__zone *z, guint32 si)
{
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, si);
    FUZZ_ASSERT(s->state == SLUICE__JOURNAL_IDLE && s->journal.n == 0, "journal left open");
    guint32 used = 0;
    for (guint32 i = 0; i < SLUICE__ZONE_CELLS; i++) {
        const sluice__zone_cell *c = &s->cells[i];
        used += c->meta != 0;
        FUZZ_ASSERT(s->tags[i] == (c->meta ? sluice__cell_tag(c->hash) : 0), "tag %u", i);
        if (c->meta == 0)
            continue;
        FUZZ_ASSERT(sluice__cell_limit(c->meta) < z->l.n_limits, "cell %u: limit", i);
        if (sluice__cell_flags(c->meta) & SLUICE__CELL_LOG) {
            FUZZ_ASSERT(sluice__chunks_check(z, si, i, sluice__chain_of(c->s[0]), (guint32)c->s[1]),
                        "cell %u: chain", i);
            sluice__runs r = {0};
            if (sluice__chunks_read(z, si, i, sluice__chain_of(c->s[0]), (guint32)c->s[1], FALSE,
                                    &r))
                FUZZ_ASSERT(r.len == (guint)c->s[1], "cell %u: %u runs, it says %u", i, r.len,
                            (guint)c->s[1]);
            g_free(r.runs);
        }
        FUZZ_ASSERT(sluice__stripe_find(s, c->hash) >= 0, "cell %u cannot be found", i);
    }
    FUZZ_ASSERT(s->used == used, "count %u, cells %u", s->used, used);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fresh) {
        static const guint64 secret[2] = {1, 2};
        fresh = g_malloc0(ZONE_SIZE);
        work = g_malloc(ZONE_SIZE);
        FUZZ_ASSERT(sluice__zone_format(fresh, ZONE_SIZE, SLUICE__ZONE_SHARE_SMALL, secret),
                    "cannot make a zone");
    }
    memcpy(work, fresh, ZONE_SIZE);
    sluice__zone_layout l = ((const sluice__zone_header *)fresh)->layout;
    patch(&l, data, size);

    GError *error = NULL;
    sluice__zone *z = sluice__zone_wrap(work, ZONE_SIZE, &error);
    if (!z) { /* refused: said why */
        FUZZ_ASSERT(error && error->message[0], "refused without a reason");
        g_error_free(error);
        return 0;
    }
    FUZZ_ASSERT(memcmp(&z->l, &l, sizeof l) == 0, "a layout other than its size's");
    FUZZ_ASSERT(sluice__zone_lock_init(&z->h->pool_lock), "cannot make a lock");
    sluice__chunks_rebuild(z);
    guint32 owned = 0;
    for (guint32 i = 0; i < z->l.n_chunks; i++)
        owned += sluice__zone_chunk_at(z, i)->owner != 0;
    FUZZ_ASSERT(z->h->pool_free + owned == z->l.n_chunks, "pool: %u free, %u owned",
                z->h->pool_free, owned);
    for (guint32 si = 0; si < z->l.n_stripes; si++) {
        sluice__stripe_repair(z, si);
        check_stripe(z, si);
    }
    /* keys found and placed in a repaired stripe */
    sluice__zone_stripe *s = sluice__zone_stripe_at(z, 0);
    sluice__cell_set busy = {{0}};
    for (guint64 h = 1; h < 64; h++) {
        gboolean lost;
        guint64 hash = h * G_GUINT64_CONSTANT(0x9e3779b97f4a7c15);
        gint found = sluice__stripe_find(s, hash);
        FUZZ_ASSERT(found < SLUICE__ZONE_CELLS, "found %d", found);
        gint cell = sluice__stripe_claim(z, s, hash, (gint64)h * 1000, &busy, &lost);
        FUZZ_ASSERT(cell >= 0 && cell < SLUICE__ZONE_CELLS, "claimed %d", cell);
    }
    sluice__zone_release(z);
    return 0;
}
