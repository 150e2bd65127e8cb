/* The memory backend: every algorithm in-process, state per limiter and key.
 *
 * Each limiter has a store under one mutex: a state for calls without a key and a
 * hash table of per-key states. A key's state is created only when it admits
 * something, and states that are back to full capacity are swept out once the
 * table has doubled since the last sweep, so memory follows the keys that are
 * active, not every key ever seen. A reload that changes the algorithm or
 * per_key starts the store afresh; other changes apply to the state as it is. */
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP */
#include "backend_memory.h"

#include <pthread.h>
#include <string.h>

#include "clock.h"

#define SWEEP_MIN 1024

struct sluice__memory_store {
    pthread_mutex_t lock; /* adaptive: spins briefly before it sleeps, as the
                           * critical section is a few dozen nanoseconds */
    gboolean shaped;      /* `shape` is set                              */
    sluice__rule shape;   /* the rule the states below were kept under   */
    sluice__state keyless;
    GHashTable *keyed; /* char * -> sluice__state *                    */
    guint sweep_at;    /* sweep when the table reaches this size        */
};

static GMutex stores_lock;
static GHashTable *stores; /* every store, for fork(): sluice__memory_stores_lock */

static void state_free(gpointer p)
{
    sluice__state_clear(p);
    g_free(p);
}

sluice__memory_store *sluice__memory_store_new(void)
{
    sluice__memory_store *store = g_new0(sluice__memory_store, 1);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&store->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    store->keyed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, state_free);
    store->sweep_at = SWEEP_MIN;
    g_mutex_lock(&stores_lock);
    if (!stores)
        stores = g_hash_table_new(NULL, NULL);
    g_hash_table_add(stores, store);
    g_mutex_unlock(&stores_lock);
    return store;
}

void sluice__memory_store_free(sluice__memory_store *store)
{
    if (!store)
        return;
    g_mutex_lock(&stores_lock);
    g_hash_table_remove(stores, store);
    if (g_hash_table_size(stores) == 0)
        g_clear_pointer(&stores, g_hash_table_unref);
    g_mutex_unlock(&stores_lock);
    g_hash_table_unref(store->keyed);
    sluice__state_clear(&store->keyless);
    pthread_mutex_destroy(&store->lock);
    g_free(store);
}

void sluice__memory_stores_lock(void)
{
    g_mutex_lock(&stores_lock);
    if (!stores)
        return;
    GHashTableIter it;
    gpointer store;
    g_hash_table_iter_init(&it, stores);
    while (g_hash_table_iter_next(&it, &store, NULL))
        pthread_mutex_lock(&((sluice__memory_store *)store)->lock);
}

void sluice__memory_stores_unlock(void)
{
    if (stores) {
        GHashTableIter it;
        gpointer store;
        g_hash_table_iter_init(&it, stores);
        while (g_hash_table_iter_next(&it, &store, NULL))
            pthread_mutex_unlock(&((sluice__memory_store *)store)->lock);
    }
    g_mutex_unlock(&stores_lock);
}

gsize sluice__memory_store_keys(sluice__memory_store *store)
{
    pthread_mutex_lock(&store->lock);
    gsize n = g_hash_table_size(store->keyed);
    pthread_mutex_unlock(&store->lock);
    return n;
}

/* With the lock held: forgets every state when the rule keeps state differently. */
static void reshape(sluice__memory_store *store, const sluice__rule *rule)
{
    if (store->shaped && sluice__rule_same_state(&store->shape, rule))
        return;
    g_hash_table_remove_all(store->keyed);
    sluice__state_clear(&store->keyless);
    store->shape = *rule;
    store->shaped = TRUE;
    store->sweep_at = SWEEP_MIN;
}

static gboolean is_idle(gpointer key, gpointer value, gpointer now)
{
    (void)key;
    return ((sluice__state *)value)->idle_at <= *(gint64 *)now;
}

static void sweep(sluice__memory_store *store, gint64 now)
{
    g_hash_table_foreach_remove(store->keyed, is_idle, &now);
    store->sweep_at = MAX(SWEEP_MIN, 2 * g_hash_table_size(store->keyed));
}

/* The time now_us on the clock of decisions, in µs since the Unix epoch: the
 * wall clock (read again at each decision, so that a window follows it when it is
 * set), or under a virtual clock (sluice_clock_set) the virtual time itself, as
 * on Redis where it replaces TIME. */
static gint64 since_epoch(gint64 now_us)
{
    return sluice__clock_injected() ? now_us : g_get_real_time();
}

static gboolean memory_decide(sluice__backend *backend, sluice__limiter *limiter,
                              const sluice__rule *rule, const char *key, gint64 permits,
                              gint64 reserve_us, sluice__verdict *verdict, GError **error)
{
    sluice__memory_store *store = limiter->memory;
    (void)backend;
    (void)error;

    pthread_mutex_lock(&store->lock);
    gint64 now = sluice__clock_now(); /* under the lock: times stay in order */
    /* the newest rule, not the caller's: a caller that read the rule before a
     * reload must not take the state back to the old rule's shape */
    const sluice__rule *current = sluice__limiter_rule(limiter);
    if (current)
        rule = current;
    gint64 epoch = rule->epoch ? since_epoch(now) : now;
    reshape(store, rule);
    if (!key) {
        sluice__decide(rule, &store->keyless, now, epoch, permits, reserve_us, verdict);
    } else {
        sluice__state *state = g_hash_table_lookup(store->keyed, key);
        if (state) {
            sluice__decide(rule, state, now, epoch, permits, reserve_us, verdict);
        } else {
            sluice__state fresh = {0};
            sluice__decide(rule, &fresh, now, epoch, permits, reserve_us, verdict);
            if (fresh.started) { /* only an admission stores anything */
                if (g_hash_table_size(store->keyed) >= store->sweep_at)
                    sweep(store, now);
                g_hash_table_insert(store->keyed, g_strdup(key), g_memdup2(&fresh, sizeof fresh));
            }
        }
    }
    pthread_mutex_unlock(&store->lock);
    return TRUE;
}

static void memory_release(sluice__backend *backend, sluice__limiter *limiter,
                           const sluice__rule *rule, const char *key, gint64 permits)
{
    sluice__memory_store *store = limiter->memory;
    (void)backend;

    pthread_mutex_lock(&store->lock);
    if (store->shaped && sluice__rule_same_state(&store->shape, rule)) {
        sluice__state *state = key ? g_hash_table_lookup(store->keyed, key) : &store->keyless;
        if (state)
            sluice__release(rule, state, sluice__clock_now(), permits);
    }
    pthread_mutex_unlock(&store->lock);
}

static gboolean memory_reset(sluice__backend *backend, sluice__limiter *limiter, const char *key,
                             GError **error)
{
    sluice__memory_store *store = limiter->memory;
    (void)backend;
    (void)error;

    pthread_mutex_lock(&store->lock);
    if (key)
        g_hash_table_remove(store->keyed, key);
    else
        sluice__state_clear(&store->keyless);
    pthread_mutex_unlock(&store->lock);
    return TRUE;
}

static void memory_free(sluice__backend *backend)
{
    g_free(backend);
}

static const sluice__backend_funcs memory_funcs = {
    .name = "memory",
    .decide = memory_decide,
    .release = memory_release,
    .reset = memory_reset,
    .free = memory_free,
};

sluice__backend *sluice__backend_memory_new(void)
{
    sluice__backend *backend = g_new0(sluice__backend, 1);
    backend->funcs = &memory_funcs;
    return backend;
}
