/* SPDX-License-Identifier: MIT */
/* The processes attached to a zone, and the tables' lock: who holds leases, and
 * whether they are still alive. */
#ifndef SLUICE_SHM_PROCS_H
#define SLUICE_SHM_PROCS_H

#include <glib.h>

#include "shm/zone.h"

/* Takes the lock of the processes and limits tables (repairing a limit left half
 * written by a process that died holding it). FALSE when it cannot be taken. */
gboolean sluice__zone_tables_lock(sluice__zone *z);
void sluice__zone_tables_unlock(sluice__zone *z);

/* Gives this process a slot (z->proc, z->owner); with the tables locked. When every
 * slot is taken, its leases have no owner (z->owner 0): they last their lifetime. */
void sluice__zone_procs_join(sluice__zone *z);
/* Gives the slot up; with the tables locked. */
void sluice__zone_procs_leave(sluice__zone *z);
/* Frees the slots of processes that are gone (their pid is not running, or runs
 * another process: its start time differs); with the tables locked. */
void sluice__zone_procs_scan(sluice__zone *z);
/* TRUE when the process that owner names is gone (its slot is freed then, so its
 * leases are no one's); FALSE while it runs, and when some process looked less
 * than 10 ms ago. Takes the tables' lock itself when it frees. */
gboolean sluice__zone_owner_dead(sluice__zone *z, guint32 owner);
/* How many processes other than this one are attached; with the tables locked. */
guint sluice__zone_procs_others(sluice__zone *z);

/* TRUE while the owner of a lease may still give it back: its process is alive,
 * or it has no owner (0). */
static inline gboolean sluice__zone_owner_alive(const sluice__zone *z, guint32 owner)
{
    if (owner == 0)
        return TRUE;
    guint32 slot = (owner >> 16) - 1;
    if (slot >= SLUICE__ZONE_PROCS)
        return FALSE;
    const sluice__zone_proc *p = sluice__zone_proc_at(z, slot);
    return __atomic_load_n(&p->state, __ATOMIC_RELAXED) == SLUICE__PROC_LIVE &&
           (__atomic_load_n(&p->gen, __ATOMIC_RELAXED) & 0xffff) == (owner & 0xffff);
}

/* The start time of process pid (clock ticks since boot), 0 when unknown; *zombie
 * (may be NULL): it has exited and waits for its parent. */
guint64 sluice__proc_start_time(pid_t pid, gboolean *zombie);

#endif
