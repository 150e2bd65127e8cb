/* SPDX-License-Identifier: MIT */
/* A zone as one process has it: the file of /dev/shm it maps, made or checked. */
#ifndef SLUICE_SHM_ZONE_H
#define SLUICE_SHM_ZONE_H

#include <sys/types.h>

#include <glib.h>

#include "shm/layout.h"

typedef struct {
    guint8 *base;
    sluice__zone_layout l;  /* checked when attached; never read from the zone again */
    sluice__zone_header *h; /* == base */
    char *name;             /* the keyfile's shm                                 */
    char *path;             /* /dev/shm/sluice-NAME                              */
    gint proc;              /* this process's slot in the processes table, or -1 */
    guint32 owner;          /* the owner of this process's leases (0: none)      */
    pid_t pid;              /* the process that attached (a forked child is another) */
} sluice__zone;

/* The file of the zone called name: /dev/shm/sluice-NAME (g_free it). */
char *sluice__zone_path(const char *name);

/* Maps the zone called name, making it (size bytes, file mode `mode`, chunks
 * `share`) when there is none yet; many processes may do so at once, and one that
 * died while making it is taken over. An existing zone keeps its size. Refused
 * with *error (SLUICE_ERROR_BACKEND) when it belongs to another user, its mode is
 * wider than `mode`, it was made by another layout version, or it is smaller than
 * its header says. */
sluice__zone *sluice__zone_attach(const char *name, gint64 size, guint mode,
                                  sluice__zone_share share, GError **error);

/* Writes a fresh zone of `size` bytes at base (zeroed), with `share` and the
 * hash key `secret`, marked ready last. FALSE when it is too small, or its locks
 * cannot be made. */
gboolean sluice__zone_format(guint8 *base, guint64 size, sluice__zone_share share,
                             const guint64 secret[2]);

/* The same on bytes already mapped (length of them): the checks of a zone's header
 * and of everything a decision reads, for the fuzz test. NULL and *error when it
 * is refused; else a zone to sluice__zone_release (which leaves the bytes alone). */
sluice__zone *sluice__zone_wrap(guint8 *bytes, gsize length, GError **error);
void sluice__zone_release(sluice__zone *zone);

/* Unmaps the zone and gives up this process's slot (its leases are given back). */
void sluice__zone_detach(sluice__zone *zone);

/* Removes the zone's file: processes that have it mapped keep theirs, the next
 * to attach makes a new one. FALSE and *error when there is none or it cannot be
 * removed. */
gboolean sluice__zone_remove(const char *name, GError **error);

static inline sluice__zone_stripe *sluice__zone_stripe_at(const sluice__zone *z, guint32 i)
{
    return (sluice__zone_stripe *)(z->base + z->l.stripes_off + (guint64)i * z->l.stripe_bytes);
}

static inline sluice__zone_chunk *sluice__zone_chunk_at(const sluice__zone *z, guint32 i)
{
    return (sluice__zone_chunk *)(z->base + z->l.chunks_off) + i;
}

static inline sluice__zone_limit *sluice__zone_limit_at(const sluice__zone *z, guint32 i)
{
    return (sluice__zone_limit *)(z->base + z->l.limits_off) + i;
}

static inline sluice__zone_proc *sluice__zone_proc_at(const sluice__zone *z, guint32 i)
{
    return (sluice__zone_proc *)(z->base + z->l.procs_off) + i;
}

#endif
