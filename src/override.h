/* SPDX-License-Identifier: MIT */
/* Overrides: the rules of named keys of a limit ([override:NAME]), found with one
 * hash lookup on a limit that has them, and none on a limit that has not. */
#ifndef SLUICE_OVERRIDE_H
#define SLUICE_OVERRIDE_H

#include <glib.h>

#include "algorithm.h"
#include "rule.h"

/* One override as the keyfile writes it: `blocked`, `unlimited`, or the key's own
 * LIMIT/WINDOW[/BURST] (kind SLUICE__KIND_LIMIT). */
typedef struct {
    sluice__kind kind;
    gint64 limit, window_us, burst;
} sluice__override_spec;

/* The overrides of one limit's rule, immutable once made; kept until
 * sluice__overrides_clear (decisions may hold a rule of them). */
struct sluice__overrides {
    GHashTable *by_key;       /* key -> const sluice__rule * (its `of` is this)     */
    const sluice__rule *rule; /* the limit's rule that has them (interned), once
                               * sluice__overrides_own names it                   */
};

/* The rule that decides for key under rule (a limit's own): rule itself unless an
 * override names the key. A rule without overrides costs a load and a branch. */
static inline const sluice__rule *sluice__rule_for_key(const sluice__rule *rule, const char *key)
{
    if (G_LIKELY(!rule->overrides) || !key)
        return rule;
    const sluice__rule *found = g_hash_table_lookup(rule->overrides->by_key, key);
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
