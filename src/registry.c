/* SPDX-License-Identifier: MIT */
/* The registry: descriptors, the limiter of each name, and binding them to rules.
 *
 * Descriptors form an intrusive list: both forms link their descriptors from
 * constructors before main (no allocation, no dependency on other constructors;
 * a guard's from the section sluice_guards, include/sluice/macros.h), and a guard
 * the section does not hold links itself at its first call. Limiters and rules are
 * created under one lock and never freed before sluice_shutdown, so the hot path
 * reads descriptor -> limiter -> rule with two atomic pointer loads and no lock,
 * and a lookup by name reads a published read-only table, also without a lock.
 * Rules are interned: a reload that brings back the same values reuses the same
 * rule, so reloading does not grow memory. */
#include "registry.h"

#include <string.h>

#include <sluice/macros.h>

#include "adaptive/in_flight.h"
#include "limit_name.h"
#include "memory/memory.h"
#include "denial_cache.h"
#include "override.h"
#include "prefetch.h"

static sluice_descriptor *descriptors; /* the list; pushed atomically         */
static GRWLock lock;                   /* guards everything below             */
static gboolean active;                /* between apply and clear              */
static GHashTable *limiters;           /* name -> sluice__limiter *            */
static GHashTable *rules;              /* interned sluice__rule *, as a set    */
static gboolean added;                 /* limiters gained a name since publish */
/* A read-only copy of `limiters` for lookups by name without a lock, published
 * atomically whenever a name is added; copies replaced since are kept (readers
 * may hold them) until shutdown. Names are few, so copies are too. */
static GHashTable *published;
static GPtrArray *retired;
/* Atomic: counts what may change the limiter a name finds (a publish, a clear). */
static guint generation;

/* The last name this thread found, while generation stays: a lookup of the same
 * string at the same address costs a comparison, not a hash. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
    const char *name;
    guint generation;
    sluice__limiter *limiter;
} last_found;

static void limiter_free(gpointer p)
{
    sluice__limiter *limiter = p;
    sluice__memory_store_free(limiter->memory);
    sluice__counters_free(limiter->counters);
    sluice__denial_cache_free(limiter->denials);
    sluice__prefetch_free(limiter->prefetched);
    sluice__adaptive_free(limiter->adaptive);
    g_free(limiter->redis_tag);
    g_free(limiter->name);
    g_free(limiter);
}

/* With the write lock held. */
static sluice__limiter *limiter_for(const char *name)
{
    sluice__limiter *limiter = g_hash_table_lookup(limiters, name);
    if (!limiter) {
        limiter = g_new0(sluice__limiter, 1);
        limiter->name = g_strdup(name);
        limiter->memory = sluice__memory_store_new();
        limiter->counters = sluice__counters_new();
        g_hash_table_insert(limiters, limiter->name, limiter);
        added = TRUE;
    }
    return limiter;
}

/* With the write lock held. */
static const sluice__rule *intern(const sluice__rule *rule)
{
    sluice__rule *found = g_hash_table_lookup(rules, rule);
    if (!found) {
        found = g_memdup2(rule, sizeof *rule);
        g_hash_table_add(rules, found);
    }
    return found;
}

/* With the write lock held: the interned rule of name in config, with its
 * overrides ([override:NAME]) when it has any. */
static const sluice__rule *intern_of(const sluice__config *config, const char *name,
                                     const sluice__rule *rule)
{
    GHashTable *specs = g_hash_table_lookup(config->overrides, name);
    if (!specs || g_hash_table_size(specs) == 0)
        return intern(rule);
    sluice__rule full = *rule;
    sluice__overrides *overrides = sluice__overrides_intern(rule, specs);
    full.overrides = overrides;
    const sluice__rule *interned = intern(&full);
    sluice__overrides_own(overrides, interned);
    return interned;
}

/* With the write lock held: makes lookups by name see every limiter. */
static void publish(void)
{
    if (!added)
        return;
    GHashTable *copy = g_hash_table_new(g_str_hash, g_str_equal);
    GHashTableIter it;
    gpointer name, limiter;
    g_hash_table_iter_init(&it, limiters);
    while (g_hash_table_iter_next(&it, &name, &limiter))
        g_hash_table_insert(copy, name, limiter);
    GHashTable *old = g_atomic_pointer_exchange(&published, copy);
    g_atomic_int_inc(&generation);
    if (old)
        g_ptr_array_add(retired, old);
    added = FALSE;
}

/* A descriptor's priv_registered: not yet linked, linked, or linked with a name no
 * rule can have (empty, too long, not UTF-8), found once when it is linked. */
enum { UNLINKED, LINKED, LINKED_BAD_NAME };

static void say_bad_name(const sluice_descriptor *d)
{
    g_warning("%s:%d: %s: the limit name is empty, too long or not UTF-8; the function "
              "is not limited",
              d->file, d->line, d->function);
}

/* With the write lock held: binds one descriptor, and says so when it has no rule. */
static void bind_one(sluice_descriptor *d)
{
    if (g_atomic_int_get(&d->priv_registered) == LINKED_BAD_NAME) {
        say_bad_name(d);
        return;
    }
    sluice__limiter *limiter = limiter_for(d->name);
    if (!limiter->rule)
        g_warning("%s:%d: %s is decorated with \"%s\", which has no rule: it is not limited",
                  d->file, d->line, d->function, d->name);
    sluice_descriptor_private *bound = d->priv;
    if (!bound) { /* its first binding: published with its limiter set */
        bound = g_aligned_alloc0(1, sizeof *bound, G_ALIGNOF(sluice_descriptor_private));
        bound->limiter = limiter;
        bound->counters = sluice__counters_new(); /* kept with the descriptor, as bound */
        g_atomic_pointer_set(&d->priv, bound);
    }
    g_atomic_pointer_set(&bound->limiter, limiter);
}

/* Links a descriptor into the list once; TRUE for the call that linked it. */
static gboolean link_once(sluice_descriptor *descriptor)
{
    if (g_atomic_int_get(&descriptor->priv_registered) != UNLINKED)
        return FALSE; /* the common case: no name to check */
    int state =
        sluice__limit_name_check(descriptor->name) == SLUICE__NAME_OK ? LINKED : LINKED_BAD_NAME;
    if (!g_atomic_int_compare_and_exchange(&descriptor->priv_registered, UNLINKED, state))
        return FALSE;
    sluice_descriptor *head;
    do {
        head = g_atomic_pointer_get(&descriptors);
        descriptor->priv_next = head;
    } while (!g_atomic_pointer_compare_and_exchange(&descriptors, head, descriptor));
    return TRUE;
}

void sluice__register(sluice_descriptor *descriptor)
{
    if (descriptor)
        link_once(descriptor);
}

sluice__limiter *sluice__registry_bind(sluice_descriptor *descriptor)
{
    gboolean linked_now = link_once(descriptor);
    /* no lock for what binding cannot change: a bad name (said once: by init and
     * each reload, or here by the call that linked a guard), or no sluice_init yet */
    if (g_atomic_int_get(&descriptor->priv_registered) == LINKED_BAD_NAME) {
        if (linked_now && g_atomic_int_get(&active))
            say_bad_name(descriptor);
        return NULL;
    }
    if (!g_atomic_int_get(&active))
        return NULL;
    g_rw_lock_writer_lock(&lock);
    if (active && !sluice__registry_limiter_of(g_atomic_pointer_get(&descriptor->priv))) {
        bind_one(descriptor);
        publish();
    }
    g_rw_lock_writer_unlock(&lock);
    return sluice__registry_limiter_of(g_atomic_pointer_get(&descriptor->priv));
}

sluice__limiter *sluice__registry_find(const char *name)
{
    guint now = (guint)g_atomic_int_get(&generation);
    if (last_found.name == name && last_found.generation == now && last_found.limiter &&
        strcmp(name, last_found.limiter->name) == 0)
        return last_found.limiter;
    GHashTable *table = g_atomic_pointer_get(&published);
    sluice__limiter *limiter = table ? g_hash_table_lookup(table, name) : NULL;
    last_found.name = name;
    last_found.generation = now;
    last_found.limiter = limiter;
    return limiter;
}

static void unset_rule(gpointer name, gpointer value, gpointer config_rules)
{
    if (!g_hash_table_contains(config_rules, name))
        g_atomic_pointer_set(&((sluice__limiter *)value)->rule, NULL);
}

void sluice__registry_apply(const sluice__config *config)
{
    GHashTableIter it;
    gpointer name, rule;

    g_rw_lock_writer_lock(&lock);
    if (!active) {
        limiters = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, limiter_free);
        rules = g_hash_table_new_full(sluice__rule_hash, sluice__rule_equal, g_free, NULL);
        retired = g_ptr_array_new_with_free_func((GDestroyNotify)g_hash_table_unref);
        g_atomic_int_set(&active, TRUE);
    }
    /* new names first, with their rules, published before the rule of any known
     * name changes: a caller that sees a rule of this keyfile finds all its names */
    g_hash_table_iter_init(&it, config->rules);
    while (g_hash_table_iter_next(&it, &name, &rule))
        if (!g_hash_table_contains(limiters, name))
            g_atomic_pointer_set(&limiter_for(name)->rule, intern_of(config, name, rule));
    publish();
    g_hash_table_iter_init(&it, config->rules);
    while (g_hash_table_iter_next(&it, &name, &rule)) {
        sluice__limiter *limiter = limiter_for(name);
        const sluice__rule *was = limiter->rule, *now = intern_of(config, name, rule);
        g_atomic_pointer_set(&limiter->rule, now);
        if (was != now) /* the refusals of the bands that stay follow them */
            sluice__counters_move_refused(limiter->counters, was, now);
    }
    g_hash_table_foreach(limiters, unset_rule, config->rules);
    for (sluice_descriptor *d = g_atomic_pointer_get(&descriptors); d; d = d->priv_next)
        bind_one(d);
    publish();
    g_rw_lock_writer_unlock(&lock);
}

void sluice__registry_clear(void)
{
    g_rw_lock_writer_lock(&lock);
    for (sluice_descriptor *d = g_atomic_pointer_get(&descriptors); d; d = d->priv_next)
        if (d->priv) /* kept, with the function's stats */
            g_atomic_pointer_set(&d->priv->limiter, NULL);
    if (active) {
        GHashTable *last = g_atomic_pointer_exchange(&published, NULL);
        g_atomic_int_inc(&generation); /* the limiters go: no thread may find one */
        if (last)
            g_hash_table_unref(last);
        g_ptr_array_unref(retired);
        g_hash_table_unref(limiters);
        g_hash_table_unref(rules);
        sluice__overrides_clear();
        limiters = rules = NULL;
        retired = NULL;
        added = FALSE;
        g_atomic_int_set(&active, FALSE);
    }
    g_rw_lock_writer_unlock(&lock);
}

gboolean sluice__registry_active(void)
{
    g_rw_lock_reader_lock(&lock);
    gboolean was_active = active;
    g_rw_lock_reader_unlock(&lock);
    return was_active;
}

gboolean sluice__registry_foreach_limiter(sluice__limiter_func fn, gpointer user_data)
{
    g_rw_lock_reader_lock(&lock);
    gboolean was_active = active;
    if (active) {
        GHashTableIter it;
        gpointer limiter;
        g_hash_table_iter_init(&it, limiters);
        while (g_hash_table_iter_next(&it, NULL, &limiter))
            fn(limiter, user_data);
    }
    g_rw_lock_reader_unlock(&lock);
    return was_active;
}

gsize sluice__registry_memory_keys(const char *name)
{
    sluice__limiter *limiter = sluice__registry_find(name);
    return limiter ? sluice__memory_store_keys(limiter->memory) : 0;
}

void sluice_descriptors_foreach(sluice_descriptor_func fn, gpointer user_data)
{
    if (!fn)
        return;
    g_rw_lock_reader_lock(&lock);
    for (sluice_descriptor *d = g_atomic_pointer_get(&descriptors); d; d = d->priv_next) {
        sluice__limiter *limiter =
            active ? g_hash_table_lookup(limiters, d->name ? d->name : "") : NULL;
        fn(d, limiter && sluice__limiter_rule(limiter) != NULL, user_data);
    }
    g_rw_lock_reader_unlock(&lock);
}
