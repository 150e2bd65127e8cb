/* SPDX-License-Identifier: MIT */
/* The engine: applies a rule (permits, wait, shadow mode, on_error) through a backend.
 *
 * It knows nothing of Redis or of the macros: it asks the backend (the in-process
 * one, the memory backend, by a direct call that the decision's entry points
 * inline: src/inlining.h), turns a failure into the on_error verdict, and sleeps
 * waiting callers exactly until their permits are due (woken early when
 * concurrency permits are given back). */
#include "engine.h"

#include <sluice/error.h>

#include "adaptive/adaptive.h"
#include "memory/memory.h"
#include "clock.h"
#include "denial_cache.h"
#include "inject.h"
#include "override.h"
#include "prefetch.h"
#include "counters.h"
#include "inlining.h"

static sluice__backend *backend; /* atomic */
static sluice__backend *local;   /* atomic: the memory backend */

/* A give-back increments `releases`, then wakes `wake` only when a thread sleeps on it
 * for one (`sleepers`): a waiter counts itself and reads `releases` under wake_lock,
 * a give-back writes `releases` and reads `sleepers` (all sequentially consistent),
 * so one of the two sees the other, and a release with no one waiting takes no lock
 * and makes no system call. */
static GMutex wake_lock; /* with `wake`: waiters sleep here until due or given back */
static GCond wake;
static guint64 releases;                         /* atomic: counts give-backs    */
static gint sleepers;                            /* atomic: threads that wait for one */
static sluice__engine_release_func release_hook; /* atomic */

static gint denial_cache_on = TRUE; /* atomic: [sluice] denial_cache */

void sluice__engine_breakers(sluice__breaker_func func, gpointer data)
{
    sluice__backend *b = g_atomic_pointer_get(&backend);
    if (b && b->funcs->breakers)
        b->funcs->breakers(b, func, data);
}

void sluice__engine_set_backends(sluice__backend *b, sluice__backend *l, gboolean denial_cache)
{
    g_atomic_pointer_set(&backend, b);
    g_atomic_pointer_set(&local, l);
    g_atomic_int_set(&denial_cache_on, denial_cache);
}

/* TRUE when b is a remote backend (one that is not in process). */
static gboolean remote(sluice__backend *b)
{
    return b != g_atomic_pointer_get(&local) && !b->funcs->in_process;
}

/* b when the give-backs of permits under rule are its own (every process that
 * shares it makes them: concurrency on shm), else NULL (this process's: the
 * engine counts them; adaptive is always in process). */
static sluice__backend *shared_releases(sluice__backend *b, const sluice__rule *rule)
{
    return b && b->funcs->releases && rule->algorithm == SLUICE__CONCURRENCY ? b : NULL;
}

/* TRUE when the verdicts of b for rule may be kept by the denial cache: a remote
 * backend, not concurrency (a release frees permits early), not a token_bucket
 * reservation, and the cache on. */
static gboolean cacheable(sluice__backend *b, const sluice__rule *rule, gint64 reserve_us)
{
    return remote(b) && rule->algorithm != SLUICE__CONCURRENCY && reserve_us == 0 &&
           g_atomic_int_get(&denial_cache_on);
}

void sluice__engine_unlimited(sluice_decision *out)
{
    *out = (sluice_decision){TRUE, G_MAXINT64, G_MAXINT64, -1, 0, FALSE};
}

void sluice__engine_to_decision(const sluice__verdict *v, sluice_decision *out)
{
    out->allowed = v->allowed;
    out->limit = v->limit;
    out->remaining = v->remaining;
    out->retry_after_ms = v->allowed ? -1 : sluice__ceil_ms(v->retry_after_us);
    out->reset_after_ms = sluice__ceil_ms(v->reset_after_us);
    out->blocked = !v->allowed && v->blocked;
}

/* The backend failed: *v becomes the on_error verdict (decided by the memory
 * backend for on_error = local; adaptive, decided in process anyway, takes the
 * verdict as allow would). */
static SLUICE__OUT_OF_LINE void fall_back(sluice__limiter *limiter, const sluice__rule *rule,
                                          const char *key, gint64 permits, gint64 reserve_us,
                                          sluice__verdict *v)
{
    *v = (sluice__verdict){.allowed = sluice__engine_policy_allows(rule),
                           .limit = sluice__rule_capacity(rule),
                           .retry_after_us = -1};
    if (rule->on_error == SLUICE__ON_ERROR_LOCAL && rule->algorithm != SLUICE__ADAPTIVE) {
        sluice__backend *l = g_atomic_pointer_get(&local);
        l->funcs->decide(l, limiter, rule, key, permits, reserve_us, v, NULL);
    }
}

/* Where a verdict came from. */
typedef enum {
    FROM_BACKEND,
    FROM_DENIAL_CACHE, /* a denial that still holds */
    FROM_PREFETCH,     /* permits this process had in hand */
} verdict_source;

/* Counts a verdict answered in process (from the denial cache or the permits in
 * hand) in the limiter's stats and in site (may be NULL); from the backend, nothing. */
static void count_source(sluice__limiter *limiter, sluice__counters *site, verdict_source from)
{
    if (from == FROM_BACKEND)
        return;
    sluice__counters_in_process(limiter->counters, from == FROM_PREFETCH);
    if (site)
        sluice__counters_in_process(site, from == FROM_PREFETCH);
}

/* The permits to ask the backend b for when a call wants `permits` under rule: the
 * rule's prefetch when it is more (then the rest is kept in hand), else 0. */
static gint64 prefetching(sluice__backend *b, const sluice__rule *rule, gint64 permits,
                          gint64 reserve_us)
{
    return rule->prefetch > permits && permits > 0 && reserve_us == 0 && remote(b) ? rule->prefetch
                                                                                   : 0;
}

/* Asks the backend for `permits` (sent at `sent`) and keeps a denial in the cache;
 * FALSE and *failure when it failed. */
static gboolean ask_backend(sluice__backend *b, sluice__limiter *limiter, const sluice__rule *rule,
                            const char *key, gint64 permits, gint64 reserve_us, gboolean keep,
                            gint64 sent, sluice__verdict *v, GError **failure)
{
    if (!b->funcs->decide(b, limiter, rule, key, permits, reserve_us, v, failure))
        return FALSE;
    if (keep && !v->allowed)
        sluice__denial_cache_store(sluice__denial_cache_of(&limiter->denials), b, rule, key,
                                   permits, sent, v);
    else if (keep)
        sluice__denial_cache_admitted(g_atomic_pointer_get(&limiter->denials), key);
    return TRUE;
}

/* Asks the remote backend b: answers from the denial cache or the permits in hand,
 * or makes a round trip (for the rule's prefetch when that is more, then for
 * `permits` if it was refused). FALSE and *failure when the backend failed. *from:
 * where the verdict came from; *start is set when a round trip begins, if it is not
 * yet. */
static SLUICE__OUT_OF_LINE gboolean ask_remote(sluice__backend *b, sluice__limiter *limiter,
                                               const sluice__rule *rule, const char *key,
                                               gint64 permits, gint64 reserve_us,
                                               sluice__verdict *v, verdict_source *from,
                                               gint64 *start, GError **failure)
{
    gboolean keep = cacheable(b, rule, reserve_us);
    gint64 want = prefetching(b, rule, permits, reserve_us);
    gint64 sent = 0;
    if (keep || want) {
        sent = sluice__clock_now(); /* before the command goes: see denial_cache_store */
        if (keep && sluice__denial_cache_lookup(g_atomic_pointer_get(&limiter->denials), b, rule,
                                                key, permits, sent, v)) {
            *from = FROM_DENIAL_CACHE;
            return TRUE;
        }
        if (want && sluice__prefetch_take(g_atomic_pointer_get(&limiter->prefetched), b, rule, key,
                                          permits, sent, v)) {
            *from = FROM_PREFETCH;
            return TRUE;
        }
    }
    if (*start < 0)
        *start = sluice__stats_clock_ns(); /* every round trip is timed */
    if (sluice__injected_failure(failure))
        return FALSE;
    if (want) {
        /* the backend counts all `want` as admitted now; the rest is kept in hand */
        if (!ask_backend(b, limiter, rule, key, want, 0, FALSE, sent, v, failure))
            return FALSE;
        if (v->allowed) {
            sluice__prefetch_keep(sluice__prefetch_of(&limiter->prefetched), b, rule, key,
                                  want - permits, sent, v);
            v->remaining += want - permits;
            return TRUE;
        }
    }
    return ask_backend(b, limiter, rule, key, permits, reserve_us, keep, sent, v, failure);
}

/* Decides an adaptive rule in process, whatever the backend: FALSE and *failure
 * only when a failure is injected. */
static SLUICE__OUT_OF_LINE gboolean ask_adaptive(sluice__limiter *limiter, const sluice__rule *rule,
                                                 gint64 permits, sluice__verdict *v,
                                                 GError **failure)
{
    if (sluice__injected_failure(failure))
        return FALSE;
    sluice__adaptive_decide(limiter, rule, permits, v);
    return TRUE;
}

/* Decides in process (the memory backend, or an adaptive rule) or asks the remote
 * backend (ask_remote); on failure applies on_error. Returns FALSE with *error
 * when the backend failed (then *v holds the policy's verdict). */
static gboolean ask(sluice__limiter *limiter, const sluice__rule *rule, const char *key,
                    gint64 permits, gint64 reserve_us, sluice__verdict *v, verdict_source *from,
                    gint64 *start, GError **error)
{
    sluice__backend *b = g_atomic_pointer_get(&backend);
    GError *failure = NULL;
    if (G_UNLIKELY(rule->algorithm == SLUICE__ADAPTIVE)
            ? ask_adaptive(limiter, rule, permits, v, &failure)
        : remote(b)
            ? ask_remote(b, limiter, rule, key, permits, reserve_us, v, from, start, &failure)
            : G_LIKELY(!sluice__injected_failure(&failure)) &&
                  (G_LIKELY(b == g_atomic_pointer_get(&local))
                       ? sluice__memory_decide(b, limiter, rule, key, permits, reserve_us, v,
                                               &failure)
                       : b->funcs->decide(b, limiter, rule, key, permits, reserve_us, v, &failure)))
        return TRUE;
    fall_back(limiter, rule, key, permits, reserve_us, v);
    g_propagate_error(error, failure);
    return FALSE;
}

/* An asynchronous ask in flight. */
typedef struct {
    sluice__limiter *limiter;
    const sluice__rule *rule;
    char *key;
    gint64 permits, reserve_us;
    gint64 want;   /* the permits asked for to keep the rest in hand, or 0 */
    gboolean keep; /* a denial goes to the denial cache */
    sluice__backend *backend;
    gint64 sent; /* when the first command was sent */
    GMainContext *context;
    sluice__decided_func done;
    gpointer data;
} asking;

static void asked(const sluice__verdict *v, GError *failure, gpointer p);

/* Sends a's command: for a->want permits when it is not 0, else for a->permits. */
static void send_async(asking *a)
{
    sluice__backend *b = a->backend;
    gint64 permits = a->want ? a->want : a->permits;
    gint64 reserve_us = a->want ? 0 : a->reserve_us;
    GError *failure = NULL;
    if (b->funcs->decide_async) {
        b->funcs->decide_async(b, a->limiter, a->rule, a->key, permits, reserve_us, a->context,
                               asked, a);
    } else {
        sluice__verdict v;
        if (b->funcs->decide(b, a->limiter, a->rule, a->key, permits, reserve_us, &v, &failure))
            asked(&v, NULL, a);
        else
            asked(NULL, failure, a);
    }
}

static void asked(const sluice__verdict *v, GError *failure, gpointer p)
{
    asking *a = p;
    sluice__verdict verdict;
    if (failure) {
        fall_back(a->limiter, a->rule, a->key, a->permits, a->reserve_us, &verdict);
    } else if (a->want) {
        gint64 want = a->want;
        a->want = 0;
        if (!v->allowed) { /* not `want`: ask again for what the call needs */
            send_async(a);
            return;
        }
        /* the backend counted all `want` as admitted; the rest is kept in hand */
        sluice__prefetch_keep(sluice__prefetch_of(&a->limiter->prefetched), a->backend, a->rule,
                              a->key, want - a->permits, a->sent, v);
        verdict = *v;
        verdict.remaining += want - a->permits;
    } else {
        verdict = *v;
        if (a->keep && !v->allowed)
            sluice__denial_cache_store(sluice__denial_cache_of(&a->limiter->denials), a->backend,
                                       a->rule, a->key, a->permits, a->sent, v);
        else if (a->keep)
            sluice__denial_cache_admitted(g_atomic_pointer_get(&a->limiter->denials), a->key);
    }
    a->done(&verdict, failure, a->data);
    g_free(a->key);
    g_free(a);
}

void sluice__engine_ask_async(sluice__limiter *limiter, const sluice__rule *rule, const char *key,
                              gint64 permits, gint64 reserve_us, GMainContext *context,
                              sluice__decided_func done, gpointer data)
{
    sluice__backend *b = g_atomic_pointer_get(&backend);
    if (rule->algorithm == SLUICE__ADAPTIVE) { /* in process: at once */
        sluice__verdict v;
        GError *failure = NULL;
        if (!ask_adaptive(limiter, rule, permits, &v, &failure))
            fall_back(limiter, rule, key, permits, reserve_us, &v);
        done(&v, failure, data);
        return;
    }
    gboolean keep = cacheable(b, rule, reserve_us);
    gint64 want = prefetching(b, rule, permits, reserve_us);
    gint64 sent = keep || want ? sluice__clock_now() : 0;
    sluice__verdict near;
    verdict_source from = FROM_BACKEND;
    if (keep && sluice__denial_cache_lookup(g_atomic_pointer_get(&limiter->denials), b, rule, key,
                                            permits, sent, &near))
        from = FROM_DENIAL_CACHE;
    else if (want && sluice__prefetch_take(g_atomic_pointer_get(&limiter->prefetched), b, rule, key,
                                           permits, sent, &near))
        from = FROM_PREFETCH;
    if (from != FROM_BACKEND) {
        count_source(limiter, NULL, from);
        done(&near, NULL, data);
        return;
    }
    asking *a = g_new(asking, 1);
    *a = (asking){limiter, rule, g_strdup(key), permits, reserve_us, want,
                  keep,    b,    sent,          context, done,       data};
    GError *failure = NULL;
    if (sluice__injected_failure(&failure))
        asked(NULL, failure, a);
    else
        send_async(a);
}

guint64 sluice__engine_releases(void)
{
    return __atomic_load_n(&releases, __ATOMIC_SEQ_CST);
}

/* Sleeps until `until` (monotonic µs), or until permits are given back after the
 * caller saw `seen` releases (seen may be NULL: then only `until` ends it); when
 * the give-backs are a backend's (`shared`, shared_releases), as it waits for them. */
static void sleep_until(gint64 until, const guint64 *seen, sluice__backend *shared)
{
    if (sluice__clock_sleep_injected(until))
        return;
    if (seen && shared) {
        shared->funcs->wait_release(shared, *seen, until);
        return;
    }
    g_mutex_lock(&wake_lock);
    if (seen)
        __atomic_add_fetch(&sleepers, 1, __ATOMIC_SEQ_CST);
    while (!(seen && __atomic_load_n(&releases, __ATOMIC_SEQ_CST) != *seen) &&
           g_get_monotonic_time() < until)
        g_cond_wait_until(&wake, &wake_lock, until);
    if (seen)
        __atomic_sub_fetch(&sleepers, 1, __ATOMIC_SEQ_CST);
    g_mutex_unlock(&wake_lock);
}

sluice__next sluice__engine_next(const sluice__rule *rule, const sluice__verdict *v, gint64 wait_us,
                                 gint64 deadline, gint64 (*now)(void), gint64 *until)
{
    if (v->allowed) {
        if (v->wait_us <= 0)
            return SLUICE__NEXT_FINISH;
        *until = now() + v->wait_us; /* a reservation: the permits are the caller's once due */
        return SLUICE__NEXT_RESERVED;
    }
    if (wait_us <= 0 || v->retry_after_us < 0)
        return SLUICE__NEXT_FINISH;
    gint64 t = now();
    if (t >= deadline)
        return SLUICE__NEXT_FINISH;
    /* a release ends the wait of calls in flight (concurrency, adaptive) */
    gboolean concurrency =
        rule->algorithm == SLUICE__CONCURRENCY || rule->algorithm == SLUICE__ADAPTIVE;
    *until = t + v->retry_after_us;
    if (*until > deadline) {
        /* not due in time; only a release (concurrency) can free permits sooner */
        if (!concurrency)
            return SLUICE__NEXT_FINISH;
        *until = deadline;
    }
    return concurrency ? SLUICE__NEXT_RELEASE : SLUICE__NEXT_RETRY;
}

gint64 sluice__engine_reserve_us(const sluice__rule *rule, gint64 wait_us, gint64 deadline,
                                 gint64 (*now)(void))
{
    if (wait_us <= 0 || rule->algorithm != SLUICE__TOKEN_BUCKET)
        return 0;
    return MAX(1, deadline - now());
}

/* The decision loop: asks, and while the rule lets the caller wait, sleeps until
 * the permits are due and asks again. *waited: it slept at least once. */
static SLUICE__OUT_OF_LINE sluice__outcome decide(sluice__limiter *limiter,
                                                  const sluice__rule *rule, const char *key,
                                                  gint64 permits, gint64 wait_us,
                                                  sluice_decision *out, gint64 *taken,
                                                  gboolean *waited, verdict_source *from,
                                                  gint64 *start, GError **error)
{
    sluice__verdict v;
    gint64 deadline = wait_us > 0 ? sluice__clock_now() + wait_us : 0;
    for (;;) {
        sluice__backend *shared = shared_releases(g_atomic_pointer_get(&backend), rule);
        guint64 seen = 0; /* the give-backs seen before asking */
        if ((rule->algorithm == SLUICE__CONCURRENCY || rule->algorithm == SLUICE__ADAPTIVE) &&
            wait_us > 0)
            seen = shared ? shared->funcs->releases(shared) : sluice__engine_releases();
        gint64 reserve_us = sluice__engine_reserve_us(rule, wait_us, deadline, sluice__clock_now);
        if (!ask(limiter, rule, key, permits, reserve_us, &v, from, start, error)) {
            sluice__engine_to_decision(&v, out);
            return SLUICE__OUTCOME_ERROR;
        }
        gint64 until;
        sluice__next next =
            sluice__engine_next(rule, &v, wait_us, deadline, sluice__clock_now, &until);
        if (next == SLUICE__NEXT_FINISH)
            break;
        sleep_until(until, next == SLUICE__NEXT_RELEASE ? &seen : NULL, shared);
        *waited = TRUE;
        if (next == SLUICE__NEXT_RESERVED)
            break;
    }
    *taken = rule->algorithm == SLUICE__ADAPTIVE ? -v.leased : v.leased;
    return sluice__engine_settle(limiter, rule, &v, out);
}

sluice__outcome sluice__engine_settle(sluice__limiter *limiter, const sluice__rule *rule,
                                      const sluice__verdict *v, sluice_decision *out)
{
    sluice__engine_to_decision(v, out);
    if (G_UNLIKELY(v->refused != 0)) /* a rule with bands: which refused */
        sluice__counters_refused(limiter->counters, v->refused);
    if (v->allowed) /* a shadow band that would have refused is counted as shadow_denied */
        return v->shadow_denied ? SLUICE__OUTCOME_SHADOW_DENIED : SLUICE__OUTCOME_ALLOWED;
    if (!rule->shadow)
        return v->blocked ? SLUICE__OUTCOME_BLOCKED : SLUICE__OUTCOME_DENIED;
    out->allowed = TRUE; /* shadow: decided and counted, never enforced */
    out->retry_after_ms = -1;
    out->blocked = FALSE;
    return SLUICE__OUTCOME_SHADOW_DENIED;
}

gint64 sluice__engine_timing_start(void)
{
    /* in process a decision costs about two clock reads: time one in eight */
    gboolean timed = remote(g_atomic_pointer_get(&backend)) || sluice__stats_sample();
    return timed ? sluice__stats_clock_ns() : -1;
}

int sluice__engine_count(sluice__limiter *limiter, sluice__counters *site, sluice__outcome outcome,
                         gboolean waited, gint64 start)
{
    gint64 elapsed = start >= 0 ? sluice__stats_clock_ns() - start : -1;
    sluice__counters_count(limiter->counters, outcome, waited, elapsed);
    if (site)
        sluice__counters_count(site, outcome, waited, elapsed);
    switch (outcome) {
    case SLUICE__OUTCOME_ERROR:
        return SLUICE_FAILED;
    case SLUICE__OUTCOME_DENIED:
    case SLUICE__OUTCOME_BLOCKED:
        return SLUICE_DENIED;
    default:
        return SLUICE_ALLOWED;
    }
}

/* A decision in process (the memory backend) that does not wait: decide without
 * its waiting loop. Timed one in eight, from the decision's own first clock read
 * (the real clock's). */
static int decide_in_process(sluice__limiter *limiter, const sluice__rule *rule, const char *key,
                             gint64 permits, sluice_decision *out, gint64 *taken,
                             sluice__counters *site, GError **error)
{
    gint64 start = -1;
    gboolean timed = sluice__stats_sample();
    if (timed && sluice__clock_injected())
        start = sluice__stats_clock_ns();
    else if (timed)
        sluice__clock_watch();
    sluice__verdict v;
    verdict_source from = FROM_BACKEND;
    sluice__outcome outcome = SLUICE__OUTCOME_ERROR;
    if (ask(limiter, rule, key, permits, 0, &v, &from, &start, error)) {
        *taken = G_UNLIKELY(rule->algorithm == SLUICE__ADAPTIVE) ? -v.leased : v.leased;
        outcome = sluice__engine_settle(limiter, rule, &v, out);
    } else {
        sluice__engine_to_decision(&v, out);
    }
    if (timed && start < 0)
        start = sluice__clock_watched_ns();
    count_source(limiter, site, from); /* a reload may have made the backend remote */
    return sluice__engine_count(limiter, site, outcome, FALSE, start);
}

/* A decision an override makes without the backend (sluice__override_decides). */
static SLUICE__OUT_OF_LINE int decide_by_override(sluice__limiter *limiter,
                                                  const sluice__rule *rule, sluice_decision *out,
                                                  sluice__counters *site)
{
    sluice__verdict v;
    sluice__override_decides(rule, &v);
    sluice__outcome outcome = sluice__engine_settle(limiter, rule, &v, out);
    return sluice__engine_count(limiter, site, outcome, FALSE, -1);
}

int sluice__engine_acquire(sluice__limiter *limiter, const char *key, gint64 permits,
                           gint64 wait_us, sluice_decision *out, gint64 *taken,
                           sluice__counters *site, GError **error)
{
    const sluice__rule *rule = sluice__limiter_rule(limiter);

    *taken = 0;
    if (!rule) {
        sluice__engine_unlimited(out);
        return SLUICE_ALLOWED;
    }
    if (!rule->per_key)
        key = NULL;
    rule = sluice__rule_for_key(rule, key); /* no lookup for a rule without overrides */
    if (G_UNLIKELY(rule->kind != SLUICE__KIND_LIMIT))
        return decide_by_override(limiter, rule, out, site);
    if (wait_us < 0)
        wait_us = rule->wait_us;
    if (rule->shadow)
        wait_us = 0;
    if (wait_us <= 0 &&
        (!remote(g_atomic_pointer_get(&backend)) || rule->algorithm == SLUICE__ADAPTIVE))
        return decide_in_process(limiter, rule, key, permits, out, taken, site, error);

    /* answered in process (memory, the denial cache) a decision costs about two
     * clock reads: time one in eight; a round trip is always timed (ask) */
    gint64 start = sluice__stats_sample() ? sluice__stats_clock_ns() : -1;
    gboolean waited = FALSE;
    verdict_source from = FROM_BACKEND;
    sluice__outcome outcome =
        decide(limiter, rule, key, permits, wait_us, out, taken, &waited, &from, &start, error);
    count_source(limiter, site, from);
    return sluice__engine_count(limiter, site, outcome, waited, start);
}

/* Wakes callers waiting for calls in flight to end (concurrency, adaptive). */
static void released(void)
{
    __atomic_add_fetch(&releases, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&sleepers, __ATOMIC_SEQ_CST) > 0) {
        g_mutex_lock(&wake_lock);
        g_cond_broadcast(&wake);
        g_mutex_unlock(&wake_lock);
    }
    sluice__engine_release_func hook = __atomic_load_n(&release_hook, __ATOMIC_ACQUIRE);
    if (hook)
        hook();
}

void sluice__engine_release(sluice__limiter *limiter, const char *key, gint64 permits,
                            sluice__call_end end)
{
    const sluice__rule *rule = sluice__limiter_rule(limiter);
    if (!rule || permits <= 0)
        return;
    if (rule->algorithm == SLUICE__ADAPTIVE) {
        sluice__engine_end_calls(limiter, permits, end);
        return;
    }
    if (rule->algorithm != SLUICE__CONCURRENCY)
        return;
    if (!rule->per_key)
        key = NULL;
    rule = sluice__rule_for_key(rule, key);
    if (rule->kind != SLUICE__KIND_LIMIT)
        return;                          /* nothing was leased */
    permits = MIN(permits, rule->limit); /* no more leases than that; keeps Lua's %d exact */
    sluice__backend *b = g_atomic_pointer_get(&backend);
    b->funcs->release(b, limiter, rule, key, permits);
    released();
}

void sluice__engine_end_calls(sluice__limiter *limiter, gint64 calls, sluice__call_end end)
{
    sluice__adaptive_end_calls(limiter, calls, end);
    released();
}

void sluice__engine_fork_lock(void)
{
    g_mutex_lock(&wake_lock);
}

void sluice__engine_fork_unlock(void)
{
    g_mutex_unlock(&wake_lock);
}

void sluice__engine_on_release(sluice__engine_release_func hook)
{
    __atomic_store_n(&release_hook, hook, __ATOMIC_RELEASE);
}

/* What a per-key policy call (penalty, block) finds to do. */
typedef enum {
    POLICY_FAILED,  /* it cannot be done: *error set        */
    POLICY_NOTHING, /* nothing to do: done                  */
    POLICY_ACT,     /* on *rule and *key, through backend *b */
} policy_step;

/* The backend, rule and key a per-key policy call works on. */
static policy_step policy_target(sluice__limiter *limiter, const char **key,
                                 const sluice__rule **rule, sluice__backend **b, GError **error)
{
    *b = g_atomic_pointer_get(&backend);
    if (!*b) {
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED,
                            sluice_strerror(SLUICE_ERROR_NOT_INITIALIZED));
        return POLICY_FAILED;
    }
    *rule = limiter ? sluice__limiter_rule(limiter) : NULL;
    if (!*rule)
        return POLICY_NOTHING; /* not limited: nothing to take or block */
    if (!(*rule)->per_key)
        *key = NULL;
    *rule = sluice__rule_for_key(*rule, *key);
    /* an override's blocked or unlimited decides alone */
    return (*rule)->kind == SLUICE__KIND_LIMIT ? POLICY_ACT : POLICY_NOTHING;
}

/* A penalty of `permits` (block_us < 0), or a block of block_us, for key under
 * limiter: sluice__engine_penalize and sluice__engine_block. */
static gboolean apply_policy(sluice__limiter *limiter, const char *key, gint64 permits,
                             gint64 block_us, GError **error)
{
    const sluice__rule *rule;
    sluice__backend *b;
    policy_step step = policy_target(limiter, &key, &rule, &b, error);
    if (step != POLICY_ACT)
        return step == POLICY_NOTHING;
    gboolean blocking = block_us >= 0;
    if (rule->algorithm == SLUICE__ADAPTIVE) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_NOT_SUPPORTED,
                    "%s: adaptive is decided in each process apart, by its own latency; it "
                    "cannot be %s",
                    limiter->name, blocking ? "blocked" : "penalized");
        return FALSE;
    }
    if (!blocking && rule->warmup_us > 0) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_NOT_SUPPORTED,
                    "%s: a limit with warmup keeps no tokens to take; a penalty is not "
                    "defined for it",
                    limiter->name);
        return FALSE;
    }
    if (!blocking && rule->algorithm == SLUICE__CONCURRENCY) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_NOT_SUPPORTED,
                    "%s: concurrency counts calls in flight; a penalty has nothing to take",
                    limiter->name);
        return FALSE;
    }
    if (blocking ? !b->funcs->block : !b->funcs->penalize) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_NOT_SUPPORTED,
                    "the %s backend cannot %s a key", b->funcs->name,
                    blocking ? "block" : "penalize");
        return FALSE;
    }
    if (!blocking)
        return permits == 0 || b->funcs->penalize(b, limiter, rule, key, permits, error);
    if (!b->funcs->block(b, limiter, rule, key, block_us, error))
        return FALSE;
    sluice__denial_cache_forget(g_atomic_pointer_get(&limiter->denials), key);
    return TRUE;
}

gboolean sluice__engine_penalize(sluice__limiter *limiter, const char *key, gint64 permits,
                                 GError **error)
{
    return apply_policy(limiter, key, permits, -1, error);
}

gboolean sluice__engine_block(sluice__limiter *limiter, const char *key, gint64 duration_us,
                              GError **error)
{
    return apply_policy(limiter, key, 0, duration_us, error);
}

gboolean sluice__engine_reset(sluice__limiter *limiter, const char *key, GError **error)
{
    sluice__backend *b = g_atomic_pointer_get(&backend);
    sluice__backend *l = g_atomic_pointer_get(&local);
    if (!b) {
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED,
                            sluice_strerror(SLUICE_ERROR_NOT_INITIALIZED));
        return FALSE;
    }
    if (!limiter)
        return TRUE;
    const sluice__rule *rule = sluice__limiter_rule(limiter);
    if (rule && rule->algorithm == SLUICE__ADAPTIVE) { /* its state is in process only */
        sluice__adaptive_forget(limiter);
        released();
        return TRUE;
    }
    if (rule && !rule->per_key)
        key = NULL;
    if (l && l != b)
        l->funcs->reset(l, limiter, key, NULL); /* the state on_error = local kept */
    if (!b->funcs->reset(b, limiter, key, error))
        return FALSE;
    sluice__denial_cache_forget(g_atomic_pointer_get(&limiter->denials), key);
    sluice__prefetch_forget(g_atomic_pointer_get(&limiter->prefetched), key);
    released(); /* a reset frees concurrency permits too */
    return TRUE;
}

gboolean sluice__engine_zone(sluice_zone_info *out, GError **error)
{
    sluice__backend *b = g_atomic_pointer_get(&backend);
    if (!b) {
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED,
                            sluice_strerror(SLUICE_ERROR_NOT_INITIALIZED));
        return FALSE;
    }
    if (!b->funcs->zone || !b->funcs->zone(b, out)) {
        g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT,
                    "the keyfile's backend is %s, which has no zone (backend = shm has)",
                    b->funcs->name);
        return FALSE;
    }
    return TRUE;
}
