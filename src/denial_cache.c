/* The denial cache: denials a remote backend gave that still hold.
 *
 * Exact because a denied call consumes nothing: until its retry_after has passed,
 * only time and other callers' admissions change the key's state, and admissions
 * only push the time the permits could pass later (docs/algorithms.md checks this
 * per algorithm). So a denial of N permits answers every call of N or more
 * permits until then. Each limit's cache is a table of SLOTS slots indexed by a
 * hash of the key (a new denial replaces what its slot held), guarded by one of
 * STRIPES locks shared by all caches, which fork() holds. No clock is read under a
 * lock: the caller passes the time. */
#include "denial_cache.h"

#include <string.h>

#define SLOTS   256 /* per limit: bounded memory whatever the keys */
#define STRIPES 64  /* locks shared by every cache */

typedef struct {
    char *key;                /* owned; NULL: empty slot                            */
    gboolean no_key;          /* the limit's single shared state (key NULL)         */
    gconstpointer backend;    /* the backend that denied (kept until shutdown)   */
    const sluice__rule *rule; /* interned by the registry: equal rules, one pointer */
    gint64 permits;           /* the denied permits (a peek counts as one)          */
    gint64 sent_us;           /* when the denied command was sent                   */
    gint64 until_us;          /* it answers calls before this time                  */
    sluice__verdict verdict;
} slot;

struct sluice__denial_cache {
    slot slots[SLOTS];
};

static GMutex stripes[STRIPES];

sluice__denial_cache *sluice__denial_cache_of(sluice__denial_cache **where)
{
    sluice__denial_cache *c = g_atomic_pointer_get(where);
    if (G_LIKELY(c))
        return c;
    sluice__denial_cache *fresh = g_new0(sluice__denial_cache, 1);
    if (g_atomic_pointer_compare_and_exchange(where, NULL, fresh))
        return fresh;
    g_free(fresh); /* another thread made it first */
    return g_atomic_pointer_get(where);
}

void sluice__denial_cache_free(sluice__denial_cache *cache)
{
    if (!cache)
        return;
    for (guint i = 0; i < SLOTS; i++)
        g_free(cache->slots[i].key);
    g_free(cache);
}

/* The slot of key (NULL: the no-key slot), and its stripe; FALSE for a key too
 * long to keep. */
static gboolean locate(sluice__denial_cache *cache, const char *key, slot **s, GMutex **lock)
{
    guint h = 5381;
    if (key) {
        gsize n = 0;
        for (const char *p = key; *p; p++, n++) {
            if (n == SLUICE__DENIAL_CACHE_MAX_KEY)
                return FALSE;
            h = h * 33 + (guchar)*p;
        }
    }
    *s = &cache->slots[h % SLOTS];
    *lock = &stripes[(GPOINTER_TO_SIZE(cache) / sizeof(slot) + h) % STRIPES];
    return TRUE;
}

static gboolean holds(const slot *s, const char *key)
{
    return key ? s->key && strcmp(s->key, key) == 0 : s->no_key;
}

gboolean sluice__denial_cache_lookup(sluice__denial_cache *cache, gconstpointer backend,
                                     const sluice__rule *rule, const char *key, gint64 permits,
                                     gint64 now_us, sluice__verdict *v)
{
    slot *s;
    GMutex *lock;
    if (!cache || !locate(cache, key, &s, &lock))
        return FALSE;
    gint64 asked = MAX(permits, 1);
    g_mutex_lock(lock);
    gboolean hit = holds(s, key) && s->backend == backend && s->rule == rule &&
                   asked >= s->permits && now_us < s->until_us;
    if (hit)
        *v = s->verdict;
    gint64 sent_us = s->sent_us;
    g_mutex_unlock(lock);
    if (!hit)
        return FALSE;
    gint64 aged = MAX(0, now_us - sent_us);
    if (asked > sluice__rule_capacity(rule))
        v->retry_after_us = -1; /* can never pass, whatever the state */
    else
        v->retry_after_us = MAX(1, v->retry_after_us - aged);
    v->reset_after_us = MAX(0, v->reset_after_us - aged);
    return TRUE;
}

void sluice__denial_cache_store(sluice__denial_cache *cache, gconstpointer backend,
                                const sluice__rule *rule, const char *key, gint64 permits,
                                gint64 sent_us, const sluice__verdict *v)
{
    slot *s;
    GMutex *lock;
    if (v->allowed || !locate(cache, key, &s, &lock))
        return;
    gint64 holds_us = v->retry_after_us >= 0 ? v->retry_after_us : v->reset_after_us;
    if (holds_us <= 0)
        return;
    char *copy = NULL, *old = NULL;
    g_mutex_lock(lock);
    if (!holds(s, key)) {
        g_mutex_unlock(lock);
        copy = g_strdup(key); /* not under the lock */
        g_mutex_lock(lock);
        old = s->key;
        s->key = copy;
        s->no_key = key == NULL;
    }
    s->backend = backend;
    s->rule = rule;
    s->permits = MAX(permits, 1);
    s->sent_us = sent_us;
    s->until_us = sent_us + holds_us;
    s->verdict = *v;
    g_mutex_unlock(lock);
    g_free(old);
}

void sluice__denial_cache_forget(sluice__denial_cache *cache, const char *key)
{
    slot *s;
    GMutex *lock;
    if (!cache || !locate(cache, key, &s, &lock))
        return;
    g_mutex_lock(lock);
    if (holds(s, key))
        s->until_us = G_MININT64;
    g_mutex_unlock(lock);
}

void sluice__denial_cache_fork_lock(void)
{
    for (guint i = 0; i < STRIPES; i++)
        g_mutex_lock(&stripes[i]);
}

void sluice__denial_cache_fork_unlock(void)
{
    for (guint i = 0; i < STRIPES; i++)
        g_mutex_unlock(&stripes[i]);
}
