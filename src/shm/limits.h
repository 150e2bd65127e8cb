/* SPDX-License-Identifier: MIT */
/* The limits of a zone: each limit's rule kept beside its states, so that the
 * processes sharing a zone are told when their keyfiles disagree. */
#ifndef SLUICE_SHM_LIMITS_H
#define SLUICE_SHM_LIMITS_H

#include <glib.h>

#include "rule.h"
#include "shm/zone.h"

/* A limit as this process decides it in the zone: its record. */
typedef struct {
    gpointer backend; /* the backend it belongs to                        */
    guint32 index;    /* its record in the zone                           */
    guint32 gen;      /* the record's gen when it was put                 */
    guint config_gen; /* the backend's configure that made it             */
} sluice__shm_limit;

/* The number that tells band i of rule's states apart from its others' (i > 0):
 * its limit, window and burst, so that a band a reload keeps keeps its states. */
guint64 sluice__zone_band_id(const sluice__rule *rule, guint i);

/* The hash that names a limit in the zone. */
guint64 sluice__zone_name_hash(const sluice__zone *z, const char *name);

/* Puts the rules (name -> const sluice__rule *) into the zone, the tables locked:
 * a limit the zone has not seen gets a record; one whose rule changed gets the
 * new rule, and a new gen when its states are kept differently (another
 * algorithm or per_key: they start fresh, as on the memory backend). With
 * `first` (this process's sluice_init), a rule that differs from the zone's while
 * another process is attached is refused instead (SLUICE_ERROR_CONFIG, naming
 * the field and both values). Fills `out` (name -> sluice__shm_limit *, which it
 * owns) for each rule; FALSE and *error, with nothing changed, on refusal or when
 * the zone has no record left. */
gboolean sluice__zone_limits_put(sluice__zone *z, GHashTable *rules, gboolean first,
                                 gpointer backend, GHashTable *out, GError **error);

/* The current gen of limit `index` (a cell of another gen is fresh). */
static inline guint32 sluice__zone_limit_gen(const sluice__zone *z, guint32 index)
{
    return __atomic_load_n(&sluice__zone_limit_at(z, index)->gen, __ATOMIC_RELAXED);
}

#endif
