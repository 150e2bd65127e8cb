/* The six algorithms on one key's state: pure arithmetic on a time the caller gives.
 *
 * Every algorithm first works out what the state is now, decides without touching
 * the state, and stores only an admission (denied calls and peeks consume nothing).
 * Times are microseconds; all arithmetic stays under 2^53 for the limits config.c
 * accepts, so lua/ can compute the same numbers in doubles. */
#include "algorithm.h"

#include <string.h>

/* ---- runs: a FIFO ring of (time, permits) ----------------------------------- */

static sluice__run *run_at(sluice__runs *r, guint i)
{
    return &r->runs[(r->head + i) % r->cap];
}

static void runs_push(sluice__runs *r, gint64 t, gint64 n)
{
    if (r->len > 0) {
        sluice__run *last = run_at(r, r->len - 1);
        if (last->t >= t) { /* same time (or a clock that stepped back): merge */
            last->n += n;
            r->total += n;
            return;
        }
    }
    if (r->len == r->cap) {
        guint cap = r->cap ? r->cap * 2 : 4;
        sluice__run *runs = g_new(sluice__run, cap);
        for (guint i = 0; i < r->len; i++)
            runs[i] = *run_at(r, i);
        g_free(r->runs);
        r->runs = runs;
        r->head = 0;
        r->cap = cap;
    }
    *run_at(r, r->len) = (sluice__run){t, n};
    r->len++;
    r->total += n;
}

/* Takes n permits off the oldest runs. */
static void runs_take(sluice__runs *r, gint64 n)
{
    while (n > 0 && r->len > 0) {
        sluice__run *first = run_at(r, 0);
        gint64 k = MIN(n, first->n);
        first->n -= k;
        r->total -= k;
        n -= k;
        if (first->n == 0) {
            r->head = (r->head + 1) % r->cap;
            r->len--;
        }
    }
}

/* Drops the runs whose time is at or before `until`. */
static void runs_drop_until(sluice__runs *r, gint64 until)
{
    while (r->len > 0 && run_at(r, 0)->t <= until)
        runs_take(r, run_at(r, 0)->n);
}

/* The time of the run at which `excess` permits have gone, oldest first. */
static gint64 runs_time_of(sluice__runs *r, gint64 excess)
{
    gint64 acc = 0;
    for (guint i = 0; i < r->len; i++) {
        acc += run_at(r, i)->n;
        if (acc >= excess)
            return run_at(r, i)->t;
    }
    return r->len ? run_at(r, r->len - 1)->t : 0;
}

static gint64 runs_newest(sluice__runs *r)
{
    return run_at(r, r->len - 1)->t;
}

void sluice__state_clear(sluice__state *state)
{
    g_free(state->log.runs);
    memset(state, 0, sizeof *state);
}

/* ---- the algorithms: each fills v from (rule, state, now, need, consume) ------- */

typedef struct {
    const sluice__rule *rule;
    sluice__state *s;
    gint64 now;
    gint64 need;      /* permits asked, 1 for a peek                  */
    gboolean consume; /* FALSE for a peek or for more than capacity  */
    gint64 reserve_us;
} call;

static void fixed_window(const call *c, sluice__verdict *v)
{
    sluice__state *s = c->s;
    gint64 w = c->rule->window_us, limit = c->rule->limit;
    gboolean expired = !s->started || c->now >= s->a + w;
    gint64 start = expired ? c->now : s->a;
    gint64 count = expired ? 0 : s->b;

    v->allowed = count + c->need <= limit;
    if (v->allowed && c->consume) {
        count += c->need;
        s->a = start;
        s->b = count;
        s->started = TRUE;
    }
    v->remaining = limit - count;
    v->reset_after_us = count > 0 ? start + w - c->now : 0;
    v->retry_after_us = v->allowed ? -1 : start + w - c->now;
}

static void sliding_log(const call *c, sluice__verdict *v)
{
    sluice__runs *log = &c->s->log;
    gint64 w = c->rule->window_us, limit = c->rule->limit;

    runs_drop_until(log, c->now - w);
    v->allowed = log->total + c->need <= limit;
    v->retry_after_us =
        v->allowed ? -1 : runs_time_of(log, log->total + c->need - limit) + w - c->now;
    if (v->allowed && c->consume) {
        runs_push(log, c->now, c->need);
        c->s->started = TRUE;
    }
    v->remaining = limit - log->total;
    v->reset_after_us = log->total > 0 ? runs_newest(log) + w - c->now : 0;
}

static void sliding_window(const call *c, sluice__verdict *v)
{
    sluice__state *s = c->s;
    gint64 w = c->rule->window_us, w_ms = w / 1000, limit = c->rule->limit;
    gint64 start = c->now - (((c->now % w) + w) % w);
    gint64 cur = 0, prev = 0;

    if (s->started && start == s->a) {
        cur = s->b;
        prev = s->c;
    } else if (s->started && start == s->a + w) {
        prev = s->b;
    } else if (s->started && start < s->a) { /* a clock that stepped back */
        start = s->a;
        cur = s->b;
        prev = s->c;
    }
    gint64 e_ms = MIN((c->now - start) / 1000, w_ms - 1);
    gint64 weight = w_ms - e_ms; /* the previous window's share, in w_ms parts */

    v->allowed = prev * weight + (cur + c->need) * w_ms <= limit * w_ms;
    if (v->allowed && c->consume) {
        cur += c->need;
        s->a = start;
        s->b = cur;
        s->c = prev;
        s->started = TRUE;
    }
    v->remaining = MAX(0, (limit * w_ms - prev * weight - cur * w_ms) / w_ms);
    v->reset_after_us = cur > 0 ? start + 2 * w - c->now : prev > 0 ? start + w - c->now : 0;
    v->retry_after_us = -1;
    if (v->allowed)
        return;
    /* later in this window, once the previous window's share has shrunk enough */
    if (cur + c->need <= limit && prev > 0) {
        gint64 e_due = w_ms - (limit - cur - c->need) * w_ms / prev;
        if (e_due < w_ms) {
            v->retry_after_us = start + e_due * 1000 - c->now;
            return;
        }
    }
    /* else in the next window, where this window becomes the previous one */
    gint64 e_next = cur > 0 ? MAX(0, w_ms - (limit - c->need) * w_ms / cur) : 0;
    v->retry_after_us = start + w + e_next * 1000 - c->now;
}

static void token_bucket(const call *c, sluice__verdict *v)
{
    sluice__state *s = c->s;
    gint64 burst = c->rule->burst, t = c->rule->interval_us;
    gint64 tokens = burst, last = c->now;

    if (s->started) {
        tokens = s->a;
        last = s->b;
        if (tokens < burst && c->now > last) {
            gint64 gained = (c->now - last) / t;
            tokens += gained;
            last += gained * t;
        }
        if (tokens >= burst) {
            tokens = burst;
            last = c->now;
        }
    }
    gint64 due = last + (c->need - tokens) * t;
    v->allowed = tokens >= c->need;
    v->wait_us = 0;
    if (!v->allowed && c->consume && c->reserve_us > 0 && due - c->now <= c->reserve_us) {
        v->allowed = TRUE; /* a reservation: the tokens are the caller's, due later */
        v->wait_us = due - c->now;
    }
    if (v->allowed && c->consume) {
        tokens -= c->need;
        s->a = tokens;
        s->b = last;
        s->started = TRUE;
    }
    v->remaining = MAX(0, tokens);
    v->reset_after_us = tokens >= burst ? 0 : last + (burst - tokens) * t - c->now;
    v->retry_after_us = v->allowed ? -1 : due - c->now;
}

static void gcra(const call *c, sluice__verdict *v)
{
    sluice__state *s = c->s;
    gint64 t = c->rule->interval_us, dvt = c->rule->burst * t;
    gint64 tat = s->started ? MAX(s->a, c->now) : c->now;
    gint64 new_tat = tat + c->need * t;
    gint64 allow_at = new_tat - dvt;
    gint64 ttl = tat - c->now;

    v->allowed = c->now >= allow_at;
    if (v->allowed && c->consume) {
        s->a = new_tat;
        s->started = TRUE;
        ttl = new_tat - c->now;
    }
    gint64 next = dvt - ttl;
    v->remaining = next > 0 ? next / t : 0;
    v->reset_after_us = ttl;
    v->retry_after_us = v->allowed ? -1 : allow_at - c->now;
}

static void concurrency(const call *c, sluice__verdict *v)
{
    sluice__runs *leases = &c->s->log;
    gint64 limit = c->rule->limit;

    runs_drop_until(leases, c->now);
    v->allowed = leases->total + c->need <= limit;
    v->retry_after_us =
        v->allowed ? -1 : runs_time_of(leases, leases->total + c->need - limit) - c->now;
    if (v->allowed && c->consume) {
        runs_push(leases, c->now + c->rule->window_us, c->need);
        c->s->started = TRUE;
        v->leased = c->need;
    }
    v->remaining = limit - leases->total;
    v->reset_after_us = leases->total > 0 ? runs_newest(leases) - c->now : 0;
}

void sluice__decide(const sluice__rule *rule, sluice__state *state, gint64 now_us, gint64 permits,
                    gint64 reserve_us, sluice__verdict *v)
{
    gint64 capacity = sluice__rule_capacity(rule);
    call c = {rule,
              state,
              now_us,
              permits > 0 ? permits : 1,
              permits > 0 && permits <= capacity,
              permits <= capacity ? reserve_us : 0};

    v->limit = capacity;
    v->wait_us = 0;
    v->leased = 0;
    if (c.need > capacity)
        c.need = capacity + 1; /* keeps the arithmetic small; denied either way */
    switch (rule->algorithm) {
    case SLUICE__FIXED_WINDOW:
        fixed_window(&c, v);
        break;
    case SLUICE__SLIDING_LOG:
        sliding_log(&c, v);
        break;
    case SLUICE__SLIDING_WINDOW:
        sliding_window(&c, v);
        break;
    case SLUICE__TOKEN_BUCKET:
        token_bucket(&c, v);
        break;
    case SLUICE__GCRA:
        gcra(&c, v);
        break;
    case SLUICE__CONCURRENCY:
        concurrency(&c, v);
        break;
    }
    if (permits > capacity) {
        v->allowed = FALSE;
        v->retry_after_us = -1;
    }
    state->idle_at = now_us + v->reset_after_us;
}

void sluice__release(const sluice__rule *rule, sluice__state *state, gint64 now_us, gint64 permits)
{
    if (rule->algorithm != SLUICE__CONCURRENCY || permits <= 0)
        return;
    runs_drop_until(&state->log, now_us);
    runs_take(&state->log, permits);
    state->idle_at = state->log.total > 0 ? runs_newest(&state->log) : now_us;
}
