/* SPDX-License-Identifier: MIT */
/* Overrides: the rules of named keys of a limit ([override:NAME]), found with one
 * hash lookup on a limit that has them, and none on a limit that has not. */
#ifndef SLUICE_OVERRIDE_H
#define SLUICE_OVERRIDE_H

#include <string.h>

#include <glib.h>

#include "algorithm.h"
#include "key_hash.h"
#include "rule.h"

/* One override as the keyfile writes it: `blocked`, `unlimited`, or the key's own
 * LIMIT/WINDOW[/BURST] (kind SLUICE__KIND_LIMIT). */
typedef struct {
    sluice__kind kind;
    gint64 limit, window_us, burst;
} sluice__override_spec;

/* A slot of a limit's table of overrides: one key's override, alone on its cache
 * line with the key inline when it fits, so that a lookup that finds a key reads
 * one line, and a key without an override one line or the next. */
#define SLUICE__OVERRIDE_INLINE 48 /* keys shorter than this are held inline */
typedef struct {
    const sluice__rule *rule;          /* NULL: an empty slot */
    guint32 len;                       /* the key's length */
    guint16 tag;                       /* the top 16 bits of the key's hash */
    guint16 distance;                  /* slots from the key's own (its hash's) */
    char key[SLUICE__OVERRIDE_INLINE]; /* the key and its NUL; a longer key: a pointer
                                        * to a copy, its bytes stored here */
} __attribute__((aligned(64))) sluice__override_entry;
G_STATIC_ASSERT(sizeof(sluice__override_entry) == 64);

/* The overrides of one limit's rule, immutable once made; kept until
 * sluice__overrides_clear (decisions may hold a rule of them). Open addressing with
 * linear probing, laid out Robin Hood (a key is never further from its own slot
 * than the keys it passed), at most half full. */
struct sluice__overrides {
    const guint64 *homes;                /* a bit per slot: set when it is some key's own; small
                                          * enough to stay cached, so that most keys without an
                                          * override read no slot */
    const sluice__override_entry *slots; /* mask + 1 of them                  */
    gsize mask;                          /* slots - 1, a power of two minus 1 */
    guint64 seed;                        /* of the keys' hashes (key_hash.h) */
    guint n;                             /* keys                             */
    const sluice__rule *rule;            /* the limit's rule that has them (interned), once
                                          * sluice__overrides_own names it                 */
};

/* The slot's key. */
static inline const char *sluice__override_key(const sluice__override_entry *e)
{
    if (e->len < SLUICE__OVERRIDE_INLINE)
        return e->key;
    const char *copy;
    memcpy(&copy, e->key, sizeof copy);
    return copy;
}

/* The rule of key's override in o, NULL when key has none: one hash of the key, a
 * bit of `homes`, and when it is set the slots from the key's own until it is found,
 * or a slot is empty or holds a key nearer its own slot than key would be (then key
 * is not in the table). */
static inline const sluice__rule *sluice__overrides_find(const sluice__overrides *o,
                                                         const char *key)
{
    gsize len = strlen(key);
    guint64 h = sluice__key_hash(key, len, o->seed);
    guint16 tag = (guint16)(h >> 48);
    gsize home = h & o->mask;
    if (!(o->homes[home / 64] >> (home % 64) & 1))
        return NULL; /* no key's own slot: no key of the table hashes like key */
    for (gsize i = home, distance = 0;; i = (i + 1) & o->mask, distance++) {
        const sluice__override_entry *e = &o->slots[i];
        if (!e->rule || e->distance < distance)
            return NULL;
        if (e->tag == tag && e->len == len && memcmp(sluice__override_key(e), key, len) == 0)
            return e->rule;
    }
}

/* The rule that decides for key under rule (a limit's own): rule itself unless an
 * override names the key. A rule without overrides costs a load and a branch. */
static inline const sluice__rule *sluice__rule_for_key(const sluice__rule *rule, const char *key)
{
    if (G_LIKELY(!rule->overrides) || !key)
        return rule;
    const sluice__rule *found = sluice__overrides_find(rule->overrides, key);
    return found ? found : rule;
}

/* The limit's own rule of a rule that sluice__rule_for_key gave: itself, or the
 * rule whose override it is. */
static inline const sluice__rule *sluice__rule_base(const sluice__rule *rule)
{
    return rule->of ? rule->of->rule : rule;
}

/* The rule that decides for key now that `current` is the limit's own rule, for a
 * caller that found `found` (sluice__rule_for_key) under an earlier one: found
 * when nothing changed since (no lookup), else found again. */
static inline const sluice__rule *sluice__rule_now(const sluice__rule *current,
                                                   const sluice__rule *found, const char *key)
{
    return sluice__rule_base(found) == current ? found : sluice__rule_for_key(current, key);
}

/* TRUE when rule (sluice__rule_for_key's) decides without its algorithm, an
 * override's `blocked` (denied for good: retry -1) or `unlimited` (allowed, no
 * limit): *v is its verdict. */
gboolean sluice__override_decides(const sluice__rule *rule, sluice__verdict *v);

/* The override rule that spec makes of base (a limit's own rule): its own limit,
 * window and burst and none of base's bands, or `blocked` or `unlimited`;
 * everything else as base. */
void sluice__override_rule(const sluice__rule *base, const sluice__override_spec *spec,
                           sluice__rule *out);

/* The overrides of base (a limit's own rule, its overrides NULL) made of specs
 * (key -> sluice__override_spec *), interned: the same base and specs give the
 * same overrides. The caller sets base->overrides to it, interns that rule, and
 * names it with sluice__overrides_own. Not thread-safe (the registry's lock). */
sluice__overrides *sluice__overrides_intern(const sluice__rule *base, GHashTable *specs);
/* Names the interned rule that has the overrides. */
void sluice__overrides_own(sluice__overrides *overrides, const sluice__rule *rule);
/* How many keys have an override. */
guint sluice__overrides_count(const sluice__overrides *overrides);

/* Frees every overrides made (sluice_shutdown: no decision may run). */
void sluice__overrides_clear(void);

#endif
