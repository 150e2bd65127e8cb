/* SPDX-License-Identifier: MIT */
/* An adaptive limit's calls, as the engine sees them: decided in process whatever
 * the backend (each process measures its own downstream), each admitted call's
 * start kept for the thread that ends it, and its latency taken from the clock of
 * decisions when it ends.
 *
 * The starts are kept per thread, most recent last: a decorated body ends on the
 * thread that began it, innermost first, so the last start of its limit is its
 * own; sluice_acquire users end theirs likewise, and a call ended on another
 * thread than its admission is given back without a sample. Nothing is allocated:
 * past SLUICE__STARTS calls in flight on one thread, the oldest start is forgotten
 * (that call will end without a sample). */
#include "adaptive/adaptive.h"

#include <string.h>
#include <unistd.h>

#include "clock.h"

/* The most admissions one thread keeps the start of. */
#define SLUICE__STARTS 16

typedef struct {
    sluice__limiter *limiter;
    gint64 permits;
    gint64 start_us;
} start;

static __thread __attribute__((tls_model("initial-exec"))) struct {
    guint len;
    start at[SLUICE__STARTS];
} starts;

static void remember(sluice__limiter *limiter, gint64 permits, gint64 start_us)
{
    if (starts.len == SLUICE__STARTS) { /* the oldest is forgotten */
        memmove(&starts.at[0], &starts.at[1], (SLUICE__STARTS - 1) * sizeof(start));
        starts.len--;
    }
    starts.at[starts.len++] = (start){limiter, permits, start_us};
}

/* The start of the last admission of limiter on this thread, or -1; its permits
 * are taken off, and it is forgotten once none are left. */
static gint64 recall(sluice__limiter *limiter, gint64 permits)
{
    for (guint i = starts.len; i-- > 0;) {
        start *s = &starts.at[i];
        if (s->limiter != limiter)
            continue;
        gint64 t = s->start_us;
        s->permits -= permits;
        if (s->permits <= 0) {
            memmove(s, s + 1, (starts.len - i - 1) * sizeof(start));
            starts.len--;
        }
        return t;
    }
    return -1;
}

/* The limiter's adaptive part, made by the first call that needs it. Its seed: the
 * name's, so that a virtual clock replays the same windows; on the real clock the
 * process's too, so that processes do not close their windows in step. */
static sluice__adaptive *part(sluice__limiter *limiter)
{
    sluice__adaptive *a = g_atomic_pointer_get(&limiter->adaptive);
    if (G_LIKELY(a))
        return a;
    guint64 seed = g_str_hash(limiter->name);
    if (!sluice__clock_injected())
        seed = (seed << 32) ^ (guint64)getpid() ^ (guint64)g_get_monotonic_time();
    sluice__adaptive *fresh = sluice__adaptive_new(seed);
    if (g_atomic_pointer_compare_and_exchange(&limiter->adaptive, NULL, fresh))
        return fresh;
    sluice__adaptive_free(fresh); /* another thread made it first */
    return g_atomic_pointer_get(&limiter->adaptive);
}

void sluice__adaptive_decide(sluice__limiter *limiter, const sluice__rule *rule, gint64 permits,
                             sluice__verdict *v)
{
    sluice__adaptive *a = part(limiter);
    if (G_UNLIKELY(sluice__adaptive_tag(a) != rule))
        sluice__adaptive_configure(a, rule, rule->min_limit, rule->limit, rule->controller);
    gint64 limit, in_flight;
    gboolean admitted =
        permits <= rule->limit && sluice__adaptive_admit(a, permits, &limit, &in_flight);
    if (permits > rule->limit) { /* more than the limit may ever grow to */
        limit = sluice__adaptive_limit(a);
        in_flight = sluice__adaptive_in_flight(a);
    }
    /* a call in flight is expected back within about the last median latency */
    gint64 back_us = MAX(1, (sluice__adaptive_latency_ns(a) + 999) / 1000);
    *v = (sluice__verdict){.allowed = admitted,
                           .limit = limit,
                           .remaining = MAX(0, limit - in_flight),
                           .retry_after_us = -1};
    if (!admitted && permits <= rule->limit)
        v->retry_after_us = back_us;
    if (in_flight > 0)
        v->reset_after_us = back_us;
    if (admitted && permits > 0) {
        v->leased = permits;
        remember(limiter, permits, sluice__clock_now());
    }
}

void sluice__adaptive_end_calls(sluice__limiter *limiter, gint64 permits, sluice__call_end end)
{
    sluice__adaptive *a = g_atomic_pointer_get(&limiter->adaptive);
    if (!a || permits <= 0)
        return;
    gint64 started = recall(limiter, permits);
    gint64 now = sluice__clock_now();
    if (end == SLUICE__CALL_OK && started < 0)
        end = SLUICE__CALL_IGNORED; /* admitted on another thread: no latency */
    sluice__adaptive_end(a, permits, end, (now - started) * 1000, now * 1000);
}

void sluice__adaptive_dropped(sluice__limiter *limiter)
{
    sluice__adaptive *a = g_atomic_pointer_get(&limiter->adaptive);
    if (a)
        sluice__adaptive_end(a, 0, SLUICE__CALL_DROPPED, 0, sluice__clock_now() * 1000);
}

gint64 sluice__adaptive_current(sluice__limiter *limiter, const sluice__rule *rule)
{
    sluice__adaptive *a = g_atomic_pointer_get(&limiter->adaptive);
    gint64 limit = a && sluice__adaptive_tag(a) ? sluice__adaptive_limit(a) : rule->min_limit;
    return CLAMP(limit, rule->min_limit, rule->limit);
}

void sluice__adaptive_forget(sluice__limiter *limiter)
{
    sluice__adaptive *a = g_atomic_pointer_get(&limiter->adaptive);
    if (a)
        sluice__adaptive_reset(a);
}
