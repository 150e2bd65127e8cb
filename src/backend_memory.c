/* SPDX-License-Identifier: MIT */
/* The memory backend: every algorithm in-process, state per limiter and key.
 *
 * Each limiter has a store. Its shared state (calls without a key) under a rule of
 * fixed_window, sliding_window, token_bucket or gcra is kept lock-free behind a
 * version word, alone on its cache lines: a decision reads the clock, then the
 * version, the state and the time of the last admission (reading the clock again
 * when that is later), decides on a copy, and commits an admission with one CAS
 * of the version (a denial checks the version is unchanged); when another decision
 * committed in between, it starts again on the new state, at its own time unless
 * the new admission's is later. So admissions are committed in the order of their
 * times, as under a lock, each decision uses a time its thread read during the
 * call, and no lock is held across a clock read. The rest (per-key states, and sliding_log and
 * concurrency, whose logs grow) is under the store's mutex, with the same rule: the
 * clock is read before the mutex is taken, and read again when another decision
 * took the mutex in between. A key's state is created only when it admits
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
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "clock.h"
#include "hand.h"
#include "inlining.h"
#include "spin_wait.h"

#define SWEEP_MIN 1024
#define LINE      128 /* a cache line, or the pair some CPUs fetch together */

/* One band's state kept lock-free: the fields of sluice__state those algorithms use,
 * each read and written atomically. */
typedef struct {
    gint64 started, a, b, c, d;
} hot_band;

/* The lock-free shared state: alone on its cache lines (no false sharing). */
typedef struct {
    guint64 version;                       /* even: stable; odd: being written                */
    const sluice__rule *rule;              /* the rule the state is laid out for (interned)   */
    gint64 decided;                        /* the time of the last admission committed        */
    hot_band bands[1 + SLUICE__MAX_BANDS]; /* the first in the version's 64 bytes */
    guint64 generation; /* resets and reshapes: permits in hand before are void */
} __attribute__((aligned(LINE))) hot_state;

struct sluice__memory_store {
    hot_state hot;
    pthread_mutex_t lock __attribute__((aligned(LINE))); /* adaptive: spins briefly before it
                                                          * sleeps, as the section is short */
    guint64 seq;        /* atomic: decisions under the lock so far          */
    gint64 changed;     /* the time of the last decision under the lock     */
    gboolean shaped;    /* `shape` is set                                   */
    sluice__rule shape; /* the rule the states below were kept under        */
    sluice__state keyless[1 + SLUICE__MAX_BANDS];
    GHashTable *keyed;    /* char * -> keyed_states *                         */
    guint sweep_at;       /* sweep when the table reaches this size           */
    guint64 fork_version; /* the version hot had when fork() held it          */
};

static guint64 hot_enter(hot_state *hot);
static void hot_leave(hot_state *hot, guint64 held);

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

#if defined(__x86_64__)
static gboolean have_prefetchw; /* set once, before any store is made */

static void detect_prefetchw(void)
{
    unsigned a, b, c, d;
    /* CPUID 0x80000001, ECX bit 8: PREFETCHW */
    have_prefetchw = __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8));
}
#endif

sluice__memory_store *sluice__memory_store_new(void)
{
    static gint made; /* atomic */
#if defined(__x86_64__)
    static gsize detected;
    if (g_once_init_enter(&detected)) {
        detect_prefetchw();
        g_once_init_leave(&detected, 1);
    }
#endif
    sluice__memory_store *store = g_aligned_alloc0(1, sizeof(sluice__memory_store), LINE);
    /* a store made where a freed one was must not take a thread's hand for its own */
    store->hot.generation = (guint64)(guint)g_atomic_int_add(&made, 1) << 32;
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
    g_aligned_free(store);
}

void sluice__memory_stores_lock(void)
{
    g_mutex_lock(&stores_lock);
    if (!stores)
        return;
    GHashTableIter it;
    gpointer store;
    g_hash_table_iter_init(&it, stores);
    while (g_hash_table_iter_next(&it, &store, NULL)) {
        sluice__memory_store *s = store;
        pthread_mutex_lock(&s->lock);
        s->fork_version = hot_enter(&s->hot); /* no lock-free decision half written */
    }
}

void sluice__memory_stores_unlock(void)
{
    if (stores) {
        GHashTableIter it;
        gpointer store;
        g_hash_table_iter_init(&it, stores);
        while (g_hash_table_iter_next(&it, &store, NULL)) {
            sluice__memory_store *s = store;
            hot_leave(&s->hot, s->fork_version);
            pthread_mutex_unlock(&s->lock);
        }
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

/* The time now_us on the clock of decisions, in µs since the Unix epoch: the
 * wall clock (read again at each decision, so that a window follows it when it is
 * set), or under a virtual clock (sluice_clock_set) the virtual time itself, as
 * on Redis where it replaces TIME. */
static gint64 since_epoch(gint64 now_us)
{
    return sluice__clock_injected() ? now_us : g_get_real_time();
}

/* A time read after a decision committed at `last`, for the next: the two
 * threads' reads of the counter clock may be out of order by a few ns
 * (src/counter_clock.c), so the time is at least `last`. A virtual clock's time
 * is taken as it is (a program may set it back). */
static inline gint64 in_order(gint64 now, gint64 last)
{
    return now < last && !sluice__clock_injected() ? last : now;
}

/* ---- the lock-free shared state ----------------------------------------------- */

static gboolean lock_free(const sluice__rule *rule)
{
    return rule->algorithm != SLUICE__SLIDING_LOG && rule->algorithm != SLUICE__CONCURRENCY;
}

/* Asks for the cache line at p as a write would (exclusive), so that a decision
 * that reads the shared state and then commits it with a CAS fetches the line
 * once, instead of shared for the read and again for the CAS. */
static inline void prefetch_for_write(const void *p)
{
#if defined(__x86_64__)
    if (G_LIKELY(have_prefetchw))
        __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#elif defined(__aarch64__)
    __asm__ volatile("prfm pstl1keep, %0" : : "Q"(*(const char *)p));
#else
    (void)p;
#endif
}

/* Acquire and release on the state's words stand for the fences of a seqlock
 * (which ThreadSanitizer does not model): a word read is read before the version
 * is checked again, and a word written is written after the version went odd. */
#define LOAD(x)     __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

/* Copies n bands of hot into states and into seen (what to compare them with). */
static inline __attribute__((always_inline)) void hot_load(hot_state *hot, sluice__state *states,
                                                           hot_band *seen, guint n)
{
    for (guint i = 0; i < n; i++) {
        hot_band *b = &hot->bands[i];
        seen[i] = (hot_band){LOAD(b->started), LOAD(b->a), LOAD(b->b), LOAD(b->c), LOAD(b->d)};
        states[i] = (sluice__state){.started = (gboolean)seen[i].started,
                                    .a = seen[i].a,
                                    .b = seen[i].b,
                                    .c = seen[i].c,
                                    .d = seen[i].d};
    }
}

/* Writes n bands of states into hot (the version held). */
static inline __attribute__((always_inline)) void hot_store(hot_state *hot,
                                                            const sluice__state *states, guint n)
{
    for (guint i = 0; i < n; i++) {
        hot_band *b = &hot->bands[i];
        STORE(b->started, (gint64)states[i].started);
        STORE(b->a, states[i].a);
        STORE(b->b, states[i].b);
        STORE(b->c, states[i].c);
        STORE(b->d, states[i].d);
    }
}

/* TRUE when n states are still as seen. */
static inline __attribute__((always_inline)) gboolean hot_same(const hot_band *seen,
                                                               const sluice__state *states, guint n)
{
    for (guint i = 0; i < n; i++)
        if (seen[i].started != (gint64)states[i].started || seen[i].a != states[i].a ||
            seen[i].b != states[i].b || seen[i].c != states[i].c || seen[i].d != states[i].d)
            return FALSE;
    return TRUE;
}

/* Takes the version from `seen` (even) to odd: TRUE when nothing was committed since. */
static gboolean hot_claim(hot_state *hot, guint64 seen)
{
    return __atomic_compare_exchange_n(&hot->version, &seen, seen + 1, FALSE, __ATOMIC_ACQ_REL,
                                       __ATOMIC_RELAXED);
}

/* Holds the version (waiting for a writer to finish); returns what it was. */
static guint64 hot_enter(hot_state *hot)
{
    guint spins = 0;
    for (;;) {
        guint64 v = __atomic_load_n(&hot->version, __ATOMIC_RELAXED);
        if (!(v & 1) && hot_claim(hot, v))
            return v;
        sluice__spin_wait(spins++);
    }
}

static void hot_leave(hot_state *hot, guint64 held)
{
    __atomic_store_n(&hot->version, held + 2, __ATOMIC_RELEASE);
}

/* The version of the state when no writer holds it (even), its line asked for as a
 * write would. */
static inline __attribute__((always_inline)) guint64 hot_stable(hot_state *hot, guint *spins)
{
    for (;;) {
        prefetch_for_write(&hot->version);
        guint64 v = __atomic_load_n(&hot->version, __ATOMIC_ACQUIRE);
        if (!(v & 1))
            return v;
        sluice__spin_wait((*spins)++);
    }
}

/* Decides on the lock-free shared state (n bands), laid out for rule: FALSE (and nothing
 * decided) when it is laid out for another rule. *decided_us: the time decided at.
 *
 * The clock is read before the state, and read again only when an admission at a
 * later time was committed since: so admissions are committed in the order of
 * their times (as under a lock), and a retry after another decision committed
 * seldom reads the clock between reading the state and the CAS. */
static inline __attribute__((always_inline)) gboolean
decide_hot_n(hot_state *hot, const sluice__rule *rule, guint n, gint64 permits, gint64 reserve_us,
             sluice__verdict *verdict, gint64 *decided_us)
{
    guint spins = 0;
    sluice__state states[1 + SLUICE__MAX_BANDS];
    hot_band seen[1 + SLUICE__MAX_BANDS];
    gint64 now = sluice__clock_now();
    for (;;) {
        guint64 v = hot_stable(hot, &spins);
        if (__atomic_load_n(&hot->rule, __ATOMIC_RELAXED) != rule)
            return FALSE;
        hot_load(hot, states, seen, n);
        if (G_UNLIKELY(now < LOAD(hot->decided)))
            now = in_order(sluice__clock_now(), LOAD(hot->decided)); /* not before that one's */
        sluice__decide(rule, states, now, rule->epoch ? since_epoch(now) : now, permits, reserve_us,
                       verdict);
        if (hot_same(seen, states, n)) { /* nothing to store: the state must be as read */
            if (__atomic_load_n(&hot->version, __ATOMIC_RELAXED) == v)
                break;
        } else if (hot_claim(hot, v)) {
            hot_store(hot, states, n);
            STORE(hot->decided, now);
            hot_leave(hot, v);
            break;
        }
    }
    *decided_us = now;
    return TRUE;
}

/* decide_hot_n for a rule with bands. */
static SLUICE__OUT_OF_LINE gboolean decide_hot_bands(hot_state *hot, const sluice__rule *rule,
                                                     gint64 permits, gint64 reserve_us,
                                                     sluice__verdict *verdict, gint64 *decided_us)
{
    return decide_hot_n(hot, rule, sluice__rule_bands(rule), permits, reserve_us, verdict,
                        decided_us);
}

/* decide_hot_n for a gcra rule without bands, in the three steps of algorithm.h: between
 * reading the state and the CAS only a comparison and an addition, so that another
 * thread's commit seldom falls in between (which would cost this one a retry and
 * the cache line's passage). */
static inline __attribute__((always_inline)) gboolean
decide_hot_gcra(hot_state *hot, const sluice__rule *rule, gint64 permits, sluice__verdict *verdict,
                gint64 *decided_us)
{
    guint spins = 0;
    hot_band *band = &hot->bands[0];
    sluice__gcra_plan plan;
    gint64 now = sluice__clock_now();
    sluice__gcra_plan_of(rule, now, permits, &plan);
    for (;;) {
        guint64 v = hot_stable(hot, &spins);
        if (__atomic_load_n(&hot->rule, __ATOMIC_RELAXED) != rule)
            return FALSE;
        gint64 last = LOAD(hot->decided);
        if (G_UNLIKELY(now < last)) { /* not before that one's */
            now = in_order(sluice__clock_now(), last);
            sluice__gcra_plan_of(rule, now, permits, &plan);
        }
        sluice__span tat = sluice__gcra_tat(&plan, (gboolean)LOAD(band->started), LOAD(band->a),
                                            LOAD(band->b), LOAD(band->d));
        gboolean admitted = sluice__gcra_admits(&plan, tat);
        if (admitted && plan.consume) {
            sluice__span next = sluice__gcra_next(&plan, tat);
            if (!hot_claim(hot, v))
                continue;
            STORE(band->started, (gint64)TRUE);
            STORE(band->a, next.q);
            STORE(band->b, next.r);
            STORE(band->d, plan.l);
            STORE(hot->decided, now);
            hot_leave(hot, v);
        } else if (__atomic_load_n(&hot->version, __ATOMIC_RELAXED) != v) {
            continue; /* nothing to store: the state must be as read */
        }
        sluice__gcra_answer(&plan, tat, admitted, verdict);
        *decided_us = now;
        return TRUE;
    }
}

/* decide_hot_n for the rule's bands: one (no bands, the common rule) unrolled, gcra
 * in three steps. */
static inline __attribute__((always_inline)) gboolean
decide_hot(hot_state *hot, const sluice__rule *rule, gint64 permits, gint64 reserve_us,
           sluice__verdict *verdict, gint64 *decided_us)
{
    /* both ways are common: told either is likely, GCC lays the other out of the
     * straight path, 2.5-3 ns slower */
    if (__builtin_expect_with_probability(sluice__gcra_plannable(rule), 1, 0.5))
        return decide_hot_gcra(hot, rule, permits, verdict, decided_us);
    if (G_LIKELY(sluice__rule_bands(rule) == 1))
        return decide_hot_n(hot, rule, 1, permits, reserve_us, verdict, decided_us);
    return decide_hot_bands(hot, rule, permits, reserve_us, verdict, decided_us);
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

/* How reshape_hot treats the shared state. */
typedef enum {
    HOT_KEEP,  /* the same bands: as it is        */
    HOT_REMAP, /* other bands: those that stay    */
    HOT_CLEAR, /* another algorithm or per_key     */
} hot_change;

/* With the lock held: the shared state laid out for rule (hot->rule = rule), the
 * version held while it changes so that lock-free decisions start again. */
static void reshape_hot(sluice__memory_store *store, const sluice__rule *rule, hot_change change)
{
    hot_state *hot = &store->hot;
    guint64 held = hot_enter(hot);
    if (change != HOT_KEEP) {
        sluice__state old[1 + SLUICE__MAX_BANDS], moved[1 + SLUICE__MAX_BANDS];
        memset(moved, 0, sizeof moved);
        if (change == HOT_REMAP) {
            hot_band seen[1 + SLUICE__MAX_BANDS];
            memset(old, 0, sizeof old);
            hot_load(hot, old, seen, sluice__rule_bands(&store->shape));
            remap(&store->shape, rule, old, moved);
        }
        hot_store(hot, moved, G_N_ELEMENTS(moved));
    }
    __atomic_store_n(&hot->rule, rule, __ATOMIC_RELAXED);
    __atomic_store_n(&hot->generation, hot->generation + 1, __ATOMIC_RELAXED);
    hot_leave(hot, held);
}

/* With the lock held: forgets every state when the rule keeps state differently,
 * and lays the states out anew when its bands changed. */
static SLUICE__OUT_OF_LINE void reshape(sluice__memory_store *store, const sluice__rule *rule)
{
    if (__atomic_load_n(&store->hot.rule, __ATOMIC_RELAXED) == rule)
        return; /* rules are interned: one pointer per rule */
    if (store->shaped && sluice__rule_same_state(&store->shape, rule)) {
        if (same_bands(&store->shape, rule)) {
            reshape_hot(store, rule, HOT_KEEP);
            return;
        }
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
        reshape_hot(store, rule, HOT_REMAP);
        store->shape = *rule;
        return;
    }
    g_hash_table_remove_all(store->keyed);
    keyless_clear(store);
    reshape_hot(store, rule, HOT_CLEAR);
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

/* Decides `permits` of a rule with prefetch from the thread's hand, or takes the
 * rule's prefetch from the shared state (keeping the rest in hand), or, when that
 * is refused, `permits` alone. FALSE as decide_hot. */
static SLUICE__OUT_OF_LINE gboolean decide_ahead(hot_state *hot, const sluice__rule *rule,
                                                 gint64 permits, sluice__verdict *verdict)
{
    guint64 generation = __atomic_load_n(&hot->generation, __ATOMIC_RELAXED);
    if (sluice__hand_take(hot, generation, rule, permits, sluice__clock_now(), verdict))
        return TRUE;
    gint64 decided_us;
    if (!decide_hot(hot, rule, rule->prefetch, 0, verdict, &decided_us))
        return FALSE;
    if (verdict->allowed) {
        gint64 left = rule->prefetch - permits;
        sluice__hand_keep(hot, generation, rule, left, decided_us, verdict);
        verdict->remaining += left;
        return TRUE;
    }
    return decide_hot(hot, rule, permits, 0, verdict, &decided_us);
}

/* The rule a decision follows: the newest, not the caller's (a caller that read
 * the rule before a reload must not take the state back to the old rule's shape). */
static const sluice__rule *newest(sluice__limiter *limiter, const sluice__rule *rule)
{
    const sluice__rule *current = sluice__limiter_rule(limiter);
    return current ? current : rule;
}

/* Takes the store's lock for a change at a time read before it: *now_us (and
 * *epoch_us, when given) are read first, and again when a change was made under
 * the lock since, so that changes stay in the order of their times (and *now_us
 * is never before the last change's: in_order). *rule is the newest rule then. */
static void lock_in_order(sluice__memory_store *store, sluice__limiter *limiter,
                          const sluice__rule **rule, gint64 *now_us, gint64 *epoch_us)
{
    for (;;) {
        guint64 seq = __atomic_load_n(&store->seq, __ATOMIC_ACQUIRE);
        const sluice__rule *r = newest(limiter, *rule);
        *now_us = sluice__clock_now();
        if (epoch_us)
            *epoch_us = r->epoch ? since_epoch(*now_us) : *now_us;
        pthread_mutex_lock(&store->lock);
        if (__atomic_load_n(&store->seq, __ATOMIC_RELAXED) == seq && newest(limiter, *rule) == r) {
            __atomic_store_n(&store->seq, seq + 1, __ATOMIC_RELAXED);
            store->changed = *now_us = in_order(*now_us, store->changed);
            if (epoch_us && !r->epoch)
                *epoch_us = *now_us;
            *rule = r;
            return;
        }
        pthread_mutex_unlock(&store->lock);
    }
}

/* A decision under the store's lock: per-key states, sliding_log and concurrency
 * (whose logs grow), and a rule that changed to one kept lock-free meanwhile. */
static SLUICE__OUT_OF_LINE gboolean decide_under_lock(sluice__backend *backend,
                                                      sluice__limiter *limiter,
                                                      const sluice__rule *rule, const char *key,
                                                      gint64 permits, gint64 reserve_us,
                                                      sluice__verdict *verdict, GError **error)
{
    sluice__memory_store *store = limiter->memory;
    gint64 now, epoch;
    lock_in_order(store, limiter, &rule, &now, &epoch);
    reshape(store, rule);
    if (!key && lock_free(rule)) {
        /* the rule changed to one kept lock-free since it was read */
        pthread_mutex_unlock(&store->lock);
        return sluice__memory_decide(backend, limiter, rule, key, permits, reserve_us, verdict,
                                     error);
    }
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

gboolean sluice__memory_decide(sluice__backend *backend, sluice__limiter *limiter,
                               const sluice__rule *rule, const char *key, gint64 permits,
                               gint64 reserve_us, sluice__verdict *verdict, GError **error)
{
    sluice__memory_store *store = limiter->memory;

    for (;;) {
        const sluice__rule *r = newest(limiter, rule);
        if (key || !lock_free(r))
            break;
        gint64 decided_us;
        if (r->prefetch > permits && permits > 0 && reserve_us == 0) {
            if (decide_ahead(&store->hot, r, permits, verdict))
                return TRUE;
        } else if (G_LIKELY(
                       decide_hot(&store->hot, r, permits, reserve_us, verdict, &decided_us))) {
            return TRUE;
        }
        pthread_mutex_lock(&store->lock); /* laid out for another rule: lay it out anew */
        reshape(store, newest(limiter, rule));
        pthread_mutex_unlock(&store->lock);
    }
    return decide_under_lock(backend, limiter, rule, key, permits, reserve_us, verdict, error);
}

static void memory_release(sluice__backend *backend, sluice__limiter *limiter,
                           const sluice__rule *rule, const char *key, gint64 permits)
{
    sluice__memory_store *store = limiter->memory;
    const sluice__rule *caller = rule;
    gint64 now;
    (void)backend;

    lock_in_order(store, limiter, &rule, &now, NULL);
    if (store->shaped && sluice__rule_same_state(&store->shape, caller)) {
        keyed_states *k = key ? g_hash_table_lookup(store->keyed, key) : NULL;
        sluice__state *state = key ? (k ? k->s : NULL) : store->keyless;
        if (state)
            sluice__release(caller, state, now, permits);
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
    if (key) {
        g_hash_table_remove(store->keyed, key);
    } else {
        keyless_clear(store);
        hot_state *hot = &store->hot;
        guint64 held = hot_enter(hot);
        sluice__state fresh[G_N_ELEMENTS(hot->bands)];
        memset(fresh, 0, sizeof fresh);
        hot_store(hot, fresh, G_N_ELEMENTS(fresh));
        __atomic_store_n(&hot->generation, hot->generation + 1, __ATOMIC_RELAXED);
        hot_leave(hot, held);
    }
    pthread_mutex_unlock(&store->lock);
    return TRUE;
}

static void memory_free(sluice__backend *backend)
{
    g_free(backend);
}

static const sluice__backend_funcs memory_funcs = {
    .name = "memory",
    .decide = sluice__memory_decide,
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
