/* SPDX-License-Identifier: MIT */
/* The chunk pool of a zone: the runs of sliding_log and concurrency states, in
 * chains of 64-byte chunks that a stripe takes and gives back. */
#ifndef SLUICE_SHM_CHUNKS_H
#define SLUICE_SHM_CHUNKS_H

#include <glib.h>

#include "algorithm.h"
#include "shm/zone.h"

/* Chunks needed for n runs. */
static inline guint32 sluice__chunks_for(guint32 runs)
{
    return (runs + SLUICE__ZONE_RUNS - 1) / SLUICE__ZONE_RUNS;
}

/* Takes `count` (> 0) chunks for cell `cell` of stripe `stripe`, which the caller
 * has locked, as one chain: *chain (in the stripe's journal) is written before the
 * pool lets them go, so that a death leaves them where the stripe's repair finds
 * them. FALSE (nothing taken) when the pool has fewer free, or its lock is broken. */
gboolean sluice__chunks_take(sluice__zone *z, guint32 stripe, guint32 cell, guint32 count,
                             sluice__zone_chain *chain);

/* Gives back the chunks of `chain` that stripe `stripe` (locked) still holds:
 * from its first, as long as they are the stripe's. */
void sluice__chunks_give(sluice__zone *z, guint32 stripe, sluice__zone_chain chain);

/* Makes the pool's free list again from the chunks' owners: every chunk no
 * stripe owns (its lock held, or no process attached). */
void sluice__chunks_rebuild(sluice__zone *z);

/* Free chunks now (a gauge: read without the lock). */
guint32 sluice__chunks_free(const sluice__zone *z);

/* Copies the `len` runs (total `total`) of `chain`, held by cell `cell` of
 * stripe `stripe`, into r (a ring it grows, head 0); runs whose owner is dead
 * (sluice__zone_owner_alive) are left out when `drop_dead`. FALSE when the chain
 * is not what the cell says (damaged: another process wrote over it). */
gboolean sluice__chunks_read(const sluice__zone *z, guint32 stripe, guint32 cell,
                             sluice__zone_chain chain, guint32 len, gboolean drop_dead,
                             sluice__runs *r);

/* Writes the runs of r into `chain` (taken for them, sluice__chunks_for(r->len)). */
void sluice__chunks_write(sluice__zone *z, sluice__zone_chain chain, const sluice__runs *r);

/* TRUE when `chain` is `len` runs that cell `cell` of stripe `stripe` holds. */
gboolean sluice__chunks_check(const sluice__zone *z, guint32 stripe, guint32 cell,
                              sluice__zone_chain chain, guint32 len);

#endif
