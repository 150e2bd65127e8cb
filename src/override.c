/* SPDX-License-Identifier: MIT */
/* Overrides (src/override.h): each limit's table of key -> rule, made at a load or
 * reload, interned so that reloading the same keyfile makes nothing new, and kept
 * until sluice_shutdown, as rules are. Keys that share an override share its rule. */
#include "override.h"

#include <string.h>

/* What an interned overrides was made of, to find it again. */
typedef struct {
    sluice__overrides overrides;
    sluice__rule base; /* the limit's rule without overrides */
    GHashTable *specs; /* key -> sluice__override_spec * (copies) */
    GHashTable *rules; /* the distinct rules of by_key, as a set (owned) */
} made;

static GPtrArray *all; /* made *: every overrides since the first load */

gboolean sluice__override_decides(const sluice__rule *rule, sluice__verdict *v)
{
    if (G_LIKELY(rule->kind == SLUICE__KIND_LIMIT))
        return FALSE;
    if (rule->kind == SLUICE__KIND_UNLIMITED)
        *v = (sluice__verdict){
            .allowed = TRUE, .limit = G_MAXINT64, .remaining = G_MAXINT64, .retry_after_us = -1};
    else
        *v = (sluice__verdict){
            .limit = sluice__rule_capacity(rule), .retry_after_us = -1, .blocked = TRUE};
    return TRUE;
}

void sluice__override_rule(const sluice__rule *base, const sluice__override_spec *spec,
                           sluice__rule *out)
{
    memcpy(out, base, sizeof *out);
    out->overrides = NULL;
    out->kind = spec->kind;
    out->n_bands = out->n_shadow = 0;
    memset(out->bands, 0, sizeof out->bands);
    if (spec->kind == SLUICE__KIND_LIMIT) {
        out->limit = spec->limit;
        out->window_us = spec->window_us;
        out->burst = spec->burst;
    }
}

static gboolean same_specs(GHashTable *a, GHashTable *b)
{
    if (g_hash_table_size(a) != g_hash_table_size(b))
        return FALSE;
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, a);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        const sluice__override_spec *other = g_hash_table_lookup(b, key);
        const sluice__override_spec *mine = value;
        /* field by field: the padding after `kind` is not a spec's */
        if (!other || other->kind != mine->kind || other->limit != mine->limit ||
            other->window_us != mine->window_us || other->burst != mine->burst)
            return FALSE;
    }
    return TRUE;
}

/* A rule of m for spec: one per distinct rule. */
static sluice__rule *rule_of(made *m, const sluice__override_spec *spec)
{
    sluice__rule r;
    sluice__override_rule(&m->base, spec, &r);
    r.of = &m->overrides;
    sluice__rule *found = g_hash_table_lookup(m->rules, &r);
    if (!found) {
        found = g_memdup2(&r, sizeof r);
        g_hash_table_add(m->rules, found);
    }
    return found;
}

sluice__overrides *sluice__overrides_intern(const sluice__rule *base, GHashTable *specs)
{
    sluice__rule plain;
    memcpy(&plain, base, sizeof plain);
    plain.overrides = NULL;
    if (!all)
        all = g_ptr_array_new();
    for (guint i = 0; i < all->len; i++) {
        made *m = g_ptr_array_index(all, i);
        if (memcmp(&m->base, &plain, sizeof plain) == 0 && same_specs(m->specs, specs))
            return &m->overrides;
    }
    made *m = g_new0(made, 1);
    m->base = plain;
    m->specs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    m->rules = g_hash_table_new_full(sluice__rule_hash, sluice__rule_equal, g_free, NULL);
    m->overrides.by_key = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, specs);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        g_hash_table_insert(m->specs, g_strdup(key),
                            g_memdup2(value, sizeof(sluice__override_spec)));
        g_hash_table_insert(m->overrides.by_key, g_strdup(key), rule_of(m, value));
    }
    g_ptr_array_add(all, m);
    return &m->overrides;
}

void sluice__overrides_own(sluice__overrides *overrides, const sluice__rule *rule)
{
    overrides->rule = rule;
}

guint sluice__overrides_count(const sluice__overrides *overrides)
{
    return overrides ? g_hash_table_size(overrides->by_key) : 0;
}

void sluice__overrides_clear(void)
{
    for (guint i = 0; all && i < all->len; i++) {
        made *m = g_ptr_array_index(all, i);
        g_hash_table_unref(m->overrides.by_key);
        g_hash_table_unref(m->rules);
        g_hash_table_unref(m->specs);
        g_free(m);
    }
    g_clear_pointer(&all, g_ptr_array_unref);
}
