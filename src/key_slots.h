/* SPDX-License-Identifier: MIT */
/* Keyed slots: the fixed tables of the in-process stores before a remote backend
 * (the denial cache, prefetched permits), a slot per hash of the key. */
#ifndef SLUICE_KEY_SLOTS_H
#define SLUICE_KEY_SLOTS_H

#include <glib.h>

/* Keys longer than this have no slot (their calls go to the backend). */
#define SLUICE__KEY_SLOTS_MAX_KEY 128
/* Slots of one table: bounded memory whatever the keys. */
#define SLUICE__KEY_SLOTS 256

/* A key as a slot holds it: its bytes in whole words, zero-padded, and its length
 * (0: the slot is empty, as keys are never empty; G_MAXUINT32: no key, the
 * limit's single shared state). Every field is read and written atomically, so a
 * seqlock reader may compare it while a writer changes it. */
typedef struct {
    guint32 len;
    guint64 words[SLUICE__KEY_SLOTS_MAX_KEY / 8];
} sluice__slot_key;

/* A key to look for, packed once per call. */
typedef struct {
    sluice__slot_key key;
    guint32 hash;
} sluice__packed_key;

/* Packs key (NULL: no key); FALSE for a key too long to have a slot. */
gboolean sluice__key_pack(const char *key, sluice__packed_key *k);
/* The index of k's slot in a table of SLUICE__KEY_SLOTS. */
static inline guint sluice__key_index(const sluice__packed_key *k)
{
    return k->hash % SLUICE__KEY_SLOTS;
}
/* The lock that writers of k's slot in `table` take: one of a few stripes shared
 * by every table, so that fork() can hold them all. */
GMutex *sluice__key_stripe(gconstpointer table, const sluice__packed_key *k);

/* TRUE when s holds k (atomic loads of the words k's length uses). */
gboolean sluice__slot_key_holds(const sluice__slot_key *s, const sluice__packed_key *k);
/* Makes s hold k (releasing stores), its stripe held. */
void sluice__slot_key_set(sluice__slot_key *s, const sluice__packed_key *k);
/* Empties s (a releasing store), its stripe held. */
void sluice__slot_key_clear(sluice__slot_key *s);

/* fork(): takes every stripe, or lets them go. */
void sluice__key_stripes_lock(void);
void sluice__key_stripes_unlock(void);

#endif
