/* The memory backend: every algorithm in-process, state per limiter and key.
 *
 * Each limiter has a store under one mutex: a state for calls without a key and a
 * hash table of per-key states. A key's state is created only when it admits
 * something, and states that are back to full capacity are swept out once the
 * table has doubled since the last sweep, so memory follows the keys that are
 * active, not every key ever seen. A key holds one state per band of its rule.
 * A reload that changes the algorithm or per_key starts the store afresh; other
 * changes apply to the state as it is, and a band that stays (the same limit,
 * window and burst) keeps its state when others come and go. */
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
    sluice__state keyless[1 + SLUICE__MAX_BANDS];
    GHashTable *keyed; /* char * -> keyed_states *                     */
    guint sweep_at;    /* sweep when the table reaches this size        */
};

static GMutex stores_lock;
static GHashTable *stores; /* every store, for fork(): sluice__memory_stores_lock */

/* A key's states, one per band of the rule (sluice__rule_bands). */
typedef struct {
    guint n;
    sluice__state s[];
} keyed_states;

static keyed_states *keyed_states_new(guint n)
{
    keyed_states *k = g_malloc0(sizeof *k + n * sizeof(sluice__state));
    k->n = n;
    return k;
}

static void keyed_states_free(gpointer p)
{
    keyed_states *k = p;
    for (guint i = 0; i < k->n; i++)
        sluice__state_clear(&k->s[i]);
    g_free(k);
}

static void keyless_clear(sluice__memory_store *store)
{
    for (guint i = 0; i < G_N_ELEMENTS(store->keyless); i++)
        sluice__state_clear(&store->keyless[i]);
}

sluice__memory_store *sluice__memory_store_new(void)
{
    sluice__memory_store *store = g_new0(sluice__memory_store, 1);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&store->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    store->keyed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, keyed_states_free);
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
    keyless_clear(store);
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

static gboolean same_bands(const sluice__rule *a, const sluice__rule *b)
{
    return a->n_bands == b->n_bands && a->n_shadow == b->n_shadow &&
           memcmp(a->bands, b->bands, sizeof a->bands) == 0;
}

/* Moves the states of `old`, laid out by the bands of `from`, to `out`, laid out by
 * those of `to`: the rule's own state, and each band's that `to` still has (the
 * same limit, window and burst); what is left in `old` is cleared. */
static void remap(const sluice__rule *from, const sluice__rule *to, sluice__state *old,
                  sluice__state *out)
{
    guint n_from = sluice__rule_bands(from), n_to = sluice__rule_bands(to);
    memset(out, 0, n_to * sizeof *out);
    out[0] = old[0];
    memset(&old[0], 0, sizeof old[0]);
    for (guint j = 1; j < n_to; j++) {
        for (guint i = 1; i < n_from; i++) {
            if (memcmp(&to->bands[j - 1], &from->bands[i - 1], sizeof(sluice__band)) == 0) {
                out[j] = old[i];
                memset(&old[i], 0, sizeof old[i]);
                break;
            }
        }
    }
    for (guint i = 0; i < n_from; i++)
        sluice__state_clear(&old[i]);
}

/* With the lock held: forgets every state when the rule keeps state differently,
 * and lays the states out anew when its bands changed. */
static void reshape(sluice__memory_store *store, const sluice__rule *rule)
{
    if (store->shaped && sluice__rule_same_state(&store->shape, rule)) {
        if (same_bands(&store->shape, rule))
            return;
        sluice__state moved[1 + SLUICE__MAX_BANDS] = {{0}};
        remap(&store->shape, rule, store->keyless, moved);
        memcpy(store->keyless, moved, sizeof moved);
        GHashTableIter it;
        gpointer value;
        g_hash_table_iter_init(&it, store->keyed);
        while (g_hash_table_iter_next(&it, NULL, &value)) {
            keyed_states *k = keyed_states_new(sluice__rule_bands(rule));
            remap(&store->shape, rule, ((keyed_states *)value)->s, k->s);
            g_hash_table_iter_replace(&it, k);
        }
        store->shape = *rule;
        return;
    }
    g_hash_table_remove_all(store->keyed);
    keyless_clear(store);
    store->shape = *rule;
    store->shaped = TRUE;
    store->sweep_at = SWEEP_MIN;
}

static gboolean is_idle(gpointer key, gpointer value, gpointer now)
{
    (void)key;
    return ((keyed_states *)value)->s[0].idle_at <= *(gint64 *)now;
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
        sluice__decide(rule, store->keyless, now, epoch, permits, reserve_us, verdict);
    } else {
        keyed_states *k = g_hash_table_lookup(store->keyed, key);
        if (k) {
            sluice__decide(rule, k->s, now, epoch, permits, reserve_us, verdict);
        } else {
            guint n = sluice__rule_bands(rule);
            sluice__state fresh[1 + SLUICE__MAX_BANDS];
            memset(fresh, 0, n * sizeof fresh[0]);
            sluice__decide(rule, fresh, now, epoch, permits, reserve_us, verdict);
            gboolean started = FALSE;
            for (guint i = 0; i < n; i++)
                started = started || fresh[i].started;
            if (started) { /* only an admission stores anything */
                if (g_hash_table_size(store->keyed) >= store->sweep_at)
                    sweep(store, now);
                k = keyed_states_new(n);
                memcpy(k->s, fresh, n * sizeof fresh[0]);
                g_hash_table_insert(store->keyed, g_strdup(key), k);
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
        keyed_states *k = key ? g_hash_table_lookup(store->keyed, key) : NULL;
        sluice__state *state = key ? (k ? k->s : NULL) : store->keyless;
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
        keyless_clear(store);
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
