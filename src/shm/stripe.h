/* SPDX-License-Identifier: MIT */
/* A stripe of a zone: 256 cells of per-key states under one robust lock, with a
 * journal that makes each change all or nothing for a process that dies in it. */
#ifndef SLUICE_SHM_STRIPE_H
#define SLUICE_SHM_STRIPE_H

#include <glib.h>

#include "shm/zone.h"

/* The stripe of a key whose (first band's) hash is h. */
static inline guint32 sluice__stripe_of(const sluice__zone *z, guint64 h)
{
    return (guint32)(((h & 0xffffffffu) * (guint64)z->l.n_stripes) >> 32);
}

/* Locks stripe si, first repairing it when its last holder died in a change (or
 * its journal says a change is open): the change is undone, or finished. FALSE
 * when its lock cannot be taken. */
gboolean sluice__stripe_lock(sluice__zone *z, guint32 si);
/* The same without waiting: FALSE when it is held. */
gboolean sluice__stripe_trylock(sluice__zone *z, guint32 si);
void sluice__stripe_unlock(sluice__zone *z, guint32 si);

/* The cell holding hash h's state in s, or -1. */
gint sluice__stripe_find(const sluice__zone_stripe *s, guint64 h);

/* A set of cells of a stripe: bit i for cell i. */
typedef struct {
    guint64 bits[SLUICE__ZONE_CELLS / 64];
} sluice__cell_set;

static inline void sluice__cell_set_add(sluice__cell_set *set, guint32 i)
{
    set->bits[i / 64] |= G_GUINT64_CONSTANT(1) << (i % 64);
}
static inline gboolean sluice__cell_set_has(const sluice__cell_set *set, guint32 i)
{
    return (set->bits[i / 64] >> (i % 64)) & 1;
}

/* TRUE when cell c holds nothing worth keeping at now_us: no state, a state back
 * at full capacity, or one of a limit whose states were started afresh. */
gboolean sluice__cell_evictable(const sluice__zone *z, const sluice__zone_cell *c, gint64 now_us);

/* The cell where hash h's new state goes, near its home: a free one, else one
 * whose state is evictable, else the one decided on longest ago (*lost: a state
 * not back at full capacity is given up); never one of `busy`. -1 when every cell
 * is busy. The caller changes it (sluice__stripe_change) and writes it. */
gint sluice__stripe_claim(const sluice__zone *z, const sluice__zone_stripe *s, guint64 h,
                          gint64 now_us, const sluice__cell_set *busy, gboolean *lost);

/* Opens a change of cell i (the journal keeps it as it is, once per change):
 * call before writing it. Returns where a chain taken for it goes. */
sluice__zone_chain *sluice__stripe_change(sluice__zone_stripe *s, guint32 i);
/* Writes cell i (opened with sluice__stripe_change) and its tag. */
void sluice__stripe_write(sluice__zone_stripe *s, guint32 i, const sluice__zone_cell *c);
/* Closes the change: what it wrote stays, and the chains the changed cells let go
 * of go back to the pool. */
void sluice__stripe_commit(sluice__zone *z, guint32 si);

/* The tag of a cell holding hash h: 8 of its bits, never 0 (a free cell's). */
static inline guint8 sluice__cell_tag(guint64 h)
{
    guint8 t = (guint8)(h >> 56);
    return t ? t : 1;
}

/* Repairs stripe si as a lock taken from a dead holder does (for the fuzz test,
 * which holds no lock). */
void sluice__stripe_repair(sluice__zone *z, guint32 si);

#endif
