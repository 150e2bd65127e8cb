/* SPDX-License-Identifier: MIT */
/* Overrides (src/override.h): each limit's table of key -> rule, made at a load or
 * reload, interned so that reloading the same keyfile makes nothing new, and kept
 * until sluice_shutdown, as rules are. Keys that share an override share its rule. */
#include "override.h"

#include <string.h>

/* What an interned overrides was made of, to find it again. */
typedef struct {
    sluice__overrides overrides;
    sluice__rule base;             /* the limit's rule without overrides */
    GHashTable *specs;             /* key -> sluice__override_spec * (copies) */
    GHashTable *rules;             /* the distinct rules of the table, as a set (owned) */
    sluice__override_entry *slots; /* the table's (owned) */
    guint64 *homes;                /* the table's (owned) */
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

/* Puts key and its rule in m's table: Robin Hood, a key that has come further from
 * its own slot takes the slot of one that has come less far, which moves on. */
static void table_put(made *m, const char *key, const sluice__rule *rule)
{
    sluice__override_entry e = {.rule = rule, .len = (guint32)strlen(key)};
    if (e.len < SLUICE__OVERRIDE_INLINE) {
        memcpy(e.key, key, e.len + 1);
    } else {
        char *copy = g_strdup(key);
        memcpy(e.key, &copy, sizeof copy);
    }
    guint64 h = sluice__key_hash(key, e.len, m->overrides.seed);
    e.tag = (guint16)(h >> 48);
    gsize home = h & m->overrides.mask;
    m->homes[home / 64] |= G_GUINT64_CONSTANT(1) << (home % 64);
    for (gsize at = home;; at = (at + 1) & m->overrides.mask) {
        sluice__override_entry *slot = &m->slots[at];
        if (!slot->rule) {
            *slot = e;
            break;
        }
        if (slot->distance < e.distance) {
            sluice__override_entry passed = *slot;
            *slot = e;
            e = passed;
        }
        g_assert(e.distance < G_MAXUINT16);
        e.distance++;
    }
    m->overrides.n++;
}

/* m's table for n keys, empty: at most half full. */
static void table_new(made *m, guint n)
{
    gsize slots = 16;
    while (slots < 2 * (gsize)n)
        slots *= 2;
    m->slots =
        g_aligned_alloc0(slots, sizeof(sluice__override_entry), G_ALIGNOF(sluice__override_entry));
    m->homes = g_new0(guint64, (slots + 63) / 64);
    m->overrides.slots = m->slots;
    m->overrides.homes = m->homes;
    m->overrides.mask = slots - 1;
    m->overrides.seed = sluice__key_seed();
}

static void table_free(made *m)
{
    for (gsize i = 0; i <= m->overrides.mask; i++) {
        char *copy;
        if (m->slots[i].rule && m->slots[i].len >= SLUICE__OVERRIDE_INLINE) {
            memcpy(&copy, m->slots[i].key, sizeof copy);
            g_free(copy);
        }
    }
    g_aligned_free(m->slots);
    g_free(m->homes);
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
    table_new(m, g_hash_table_size(specs));
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, specs);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        g_hash_table_insert(m->specs, g_strdup(key),
                            g_memdup2(value, sizeof(sluice__override_spec)));
        table_put(m, key, rule_of(m, value));
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
    return overrides ? overrides->n : 0;
}

void sluice__overrides_clear(void)
{
    for (guint i = 0; all && i < all->len; i++) {
        made *m = g_ptr_array_index(all, i);
        table_free(m);
        g_hash_table_unref(m->rules);
        g_hash_table_unref(m->specs);
        g_free(m);
    }
    g_clear_pointer(&all, g_ptr_array_unref);
}
