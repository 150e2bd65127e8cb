/* SPDX-License-Identifier: MIT */
/* The limits of a zone: a record per limit name, with the rule its states are kept
 * under. A process's first keyfile must agree with the zone while others use it;
 * a reload changes the zone's rule (and, for another algorithm or per_key, or a
 * warm-up added or removed, starts the limit's states afresh under a new gen, as
 * sluice__rule_same_state has the memory backend do). */
#include "shm/limits.h"

#include <string.h>

#include <sluice/error.h>

#include "shm/hash.h"
#include "shm/procs.h"
#include "value.h"

#define NAME_DOMAIN 1

guint64 sluice__zone_name_hash(const sluice__zone *z, const char *name)
{
    return sluice__shm_hash(z->h->secret, NAME_DOMAIN, name, strlen(name));
}

static sluice__zone_rule zone_rule_of(const sluice__rule *r)
{
    sluice__zone_rule z;
    memset(&z, 0, sizeof z);
    z.algorithm = r->algorithm;
    z.per_key = r->per_key != FALSE;
    z.epoch = r->algorithm == SLUICE__FIXED_WINDOW && r->epoch;
    z.n_bands = r->n_bands;
    z.n_shadow = r->n_shadow;
    z.limit = r->limit;
    z.window_us = r->window_us;
    z.burst = r->burst;
    z.warmup_us = r->warmup_us;
    memcpy(z.bands, r->bands, sizeof z.bands);
    return z;
}

/* The bands from..to of r as the keyfile writes them: "1000/1h, 20000/1d". */
static char *bands_text(const sluice__zone_rule *r, guint from, guint to)
{
    GString *s = g_string_new(NULL);
    for (guint i = from; i < to && i < SLUICE__MAX_BANDS; i++) {
        g_autofree char *w = sluice__format_duration(r->bands[i].window_us);
        g_string_append_printf(s, "%s%" G_GINT64_FORMAT "/%s", s->len ? ", " : "",
                               r->bands[i].limit, w);
        if (r->bands[i].burst != r->bands[i].limit)
            g_string_append_printf(s, "/%" G_GINT64_FORMAT, r->bands[i].burst);
    }
    if (s->len == 0)
        g_string_append(s, "(none)");
    return g_string_free(s, FALSE);
}

/* "KEY = MINE here, THEIRS in the zone" for the first field where they differ. */
static char *difference(const sluice__zone_rule *mine, const sluice__zone_rule *theirs)
{
    static const char *const anchors[] = {"first_hit", "epoch"};
    const char *key = NULL;
    g_autofree char *a = NULL, *b = NULL;
    if (mine->algorithm != theirs->algorithm) {
        key = "algorithm";
        a = g_strdup(mine->algorithm < SLUICE__ALGORITHMS ? sluice__algorithm_name(mine->algorithm)
                                                          : "?");
        b = g_strdup(theirs->algorithm < SLUICE__ALGORITHMS
                         ? sluice__algorithm_name(theirs->algorithm)
                         : "?");
    } else if (mine->per_key != theirs->per_key) {
        key = "per_key";
        a = g_strdup(mine->per_key ? "true" : "false");
        b = g_strdup(theirs->per_key ? "true" : "false");
    } else if (mine->epoch != theirs->epoch) {
        key = "anchor";
        a = g_strdup(anchors[mine->epoch != 0]);
        b = g_strdup(anchors[theirs->epoch != 0]);
    } else if (mine->limit != theirs->limit) {
        key = "limit";
        a = g_strdup_printf("%" G_GINT64_FORMAT, mine->limit);
        b = g_strdup_printf("%" G_GINT64_FORMAT, theirs->limit);
    } else if (mine->window_us != theirs->window_us) {
        key = "window";
        a = sluice__format_duration(mine->window_us);
        b = sluice__format_duration(theirs->window_us);
    } else if (mine->burst != theirs->burst) {
        key = "burst";
        a = g_strdup_printf("%" G_GINT64_FORMAT, mine->burst);
        b = g_strdup_printf("%" G_GINT64_FORMAT, theirs->burst);
    } else if (mine->warmup_us != theirs->warmup_us) {
        key = "warmup";
        a = sluice__format_duration(mine->warmup_us);
        b = sluice__format_duration(theirs->warmup_us);
    } else if (mine->n_bands != theirs->n_bands ||
               memcmp(mine->bands, theirs->bands, mine->n_bands * sizeof(sluice__band)) != 0) {
        key = "bands";
        a = bands_text(mine, 0, mine->n_bands);
        b = bands_text(theirs, 0, theirs->n_bands);
    } else {
        key = "shadow_bands";
        a = bands_text(mine, mine->n_bands, mine->n_bands + mine->n_shadow);
        b = bands_text(theirs, theirs->n_bands, theirs->n_bands + theirs->n_shadow);
    }
    return g_strdup_printf("%s = %s here, %s in the zone", key, a, b);
}

typedef struct {
    const char *name;
    const sluice__rule *rule;
    gint index;
    gboolean fresh;
} placed;

/* The record of name_hash, or (*fresh) the first empty one that none of `taken`
 * is to have, or -1 when none is left. */
static gint find(sluice__zone *z, guint64 name_hash, GArray *taken, gboolean *fresh)
{
    gint empty = -1;
    for (guint32 i = 0; i < z->l.n_limits; i++) {
        sluice__zone_limit *l = sluice__zone_limit_at(z, i);
        if (l->state == SLUICE__LIMIT_VALID && l->name_hash == name_hash) {
            *fresh = FALSE;
            return (gint)i;
        }
        gboolean free = l->state == SLUICE__LIMIT_EMPTY && empty < 0;
        for (guint j = 0; free && j < taken->len; j++)
            free = g_array_index(taken, placed, j).index != (gint)i;
        if (free)
            empty = (gint)i;
    }
    *fresh = TRUE;
    return empty;
}

guint64 sluice__zone_band_id(const sluice__rule *r, guint i)
{
    sluice__band b = sluice__rule_band(r, i);
    guint64 id =
        sluice__shm_mix(sluice__shm_mix((guint64)b.limit, (guint64)b.window_us), (guint64)b.burst);
    return id ? id : 1;
}

gboolean sluice__zone_limits_put(sluice__zone *z, GHashTable *rules, gboolean first,
                                 gpointer backend, GHashTable *out, GError **error)
{
    if (!sluice__zone_tables_lock(z)) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND,
                    "zone %s: its tables' lock cannot be taken", z->path);
        return FALSE;
    }
    if (first)
        sluice__zone_procs_scan(z); /* a keyfile differs only from a live process's */
    gboolean shared = sluice__zone_procs_others(z) > 0;
    g_autoptr(GArray) all = g_array_new(FALSE, FALSE, sizeof(placed));
    GString *refused = NULL;
    GHashTableIter it;
    gpointer name, rule;
    g_hash_table_iter_init(&it, rules);
    while (g_hash_table_iter_next(&it, &name, &rule)) {
        placed p = {name, rule, -1, FALSE};
        guint64 h = sluice__zone_name_hash(z, name);
        p.index = find(z, h, all, &p.fresh);
        if (p.index < 0) {
            if (!refused)
                refused = g_string_new(NULL);
            g_string_append_printf(refused, "%s[limit:%s] no room: the zone holds %u limits",
                                   refused->len ? "\n" : "", (const char *)name, z->l.n_limits);
            continue;
        }
        sluice__zone_rule mine = zone_rule_of(rule);
        sluice__zone_limit *l = sluice__zone_limit_at(z, (guint32)p.index);
        if (!p.fresh && first && shared && memcmp(&mine, &l->rule, sizeof mine) != 0) {
            if (!refused)
                refused = g_string_new(NULL);
            g_autofree char *why = difference(&mine, &l->rule);
            g_string_append_printf(refused, "%s[limit:%s] %s, which another process uses",
                                   refused->len ? "\n" : "", (const char *)name, why);
        }
        g_array_append_val(all, p);
    }
    if (refused) {
        sluice__zone_tables_unlock(z);
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_CONFIG, "zone %s: %s", z->path, refused->str);
        g_string_free(refused, TRUE);
        return FALSE;
    }
    for (guint j = 0; j < all->len; j++) {
        placed *p = &g_array_index(all, placed, j);
        sluice__zone_limit *l = sluice__zone_limit_at(z, (guint32)p->index);
        sluice__zone_rule mine = zone_rule_of(p->rule);
        if (p->fresh || memcmp(&mine, &l->rule, sizeof mine) != 0) {
            gboolean reshaped = p->fresh || mine.algorithm != l->rule.algorithm ||
                                mine.per_key != l->rule.per_key ||
                                (mine.warmup_us > 0) != (l->rule.warmup_us > 0);
            __atomic_store_n(&l->state, SLUICE__LIMIT_WRITING, __ATOMIC_RELEASE);
            if (p->fresh) {
                l->name_hash = sluice__zone_name_hash(z, p->name);
                memset(l->name, 0, sizeof l->name);
                g_utf8_strncpy(l->name, p->name,
                               g_utf8_strlen(p->name, sizeof l->name - 4)); /* whole characters */
            }
            if (reshaped)
                __atomic_store_n(&l->gen, l->gen + 1, __ATOMIC_RELEASE);
            l->rule = mine;
            __atomic_store_n(&l->state, SLUICE__LIMIT_VALID, __ATOMIC_RELEASE);
        }
        sluice__shm_limit *s = g_new0(sluice__shm_limit, 1);
        s->backend = backend;
        s->index = (guint32)p->index;
        s->gen = l->gen;
        g_hash_table_replace(out, g_strdup(p->name), s);
    }
    sluice__zone_tables_unlock(z);
    return TRUE;
}
