/* SPDX-License-Identifier: MIT */
/* The six algorithms on one key's state: pure arithmetic on a time the caller gives.
 *
 * Every algorithm first works out what the state is now, decides without touching
 * the state, and stores only an admission (denied calls and peeks consume nothing).
 * Times are microseconds; token_bucket and gcra keep W / L exact in fractions of a
 * microsecond. The numbers stay under 2^53 for the rules config.c accepts (products
 * that may not are split), so lua/ computes the same numbers in doubles. */
#include "algorithm.h"

#include <string.h>

/* ---- runs: a FIFO ring of (time, permits) ----------------------------------- */

static sluice__run *run_at(sluice__runs *r, guint i)
{
    return &r->runs[(r->head + i) % r->cap];
}

static void runs_push(sluice__runs *r, gint64 t, gint64 n, guint32 owner)
{
    if (r->len > 0) {
        sluice__run *last = run_at(r, r->len - 1);
        if (last->t >= t && last->owner == owner) { /* same time (or a clock that
                                                     * stepped back): merge */
            last->n += (gint32)n;
            r->total += n;
            return;
        }
        t = MAX(t, last->t); /* another owner's: after it, the runs stay in order */
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
    *run_at(r, r->len) = (sluice__run){t, (gint32)n, owner};
    r->len++;
    r->total += n;
}

/* Takes n permits off the oldest runs. */
static void runs_take(sluice__runs *r, gint64 n)
{
    while (n > 0 && r->len > 0) {
        sluice__run *first = run_at(r, 0);
        gint64 k = MIN(n, (gint64)first->n);
        first->n -= (gint32)k;
        r->total -= k;
        n -= k;
        if (first->n == 0) {
            r->head = (r->head + 1) % r->cap;
            r->len--;
        }
    }
}

/* Takes up to n permits off the runs of owner, oldest first (the others keep their
 * order); returns how many it took. */
static gint64 runs_take_owned(sluice__runs *r, guint32 owner, gint64 n)
{
    gint64 taken = 0;
    guint kept = 0;
    for (guint i = 0; i < r->len; i++) {
        sluice__run run = *run_at(r, i);
        if (run.owner == owner && taken < n) {
            gint64 k = MIN(n - taken, (gint64)run.n);
            run.n -= (gint32)k;
            taken += k;
        }
        if (run.n > 0)
            *run_at(r, kept++) = run;
    }
    r->len = kept;
    r->total -= taken;
    return taken;
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
    gint64 epoch;     /* now in µs since the Unix epoch              */
    gint64 need;      /* permits asked, 1 for a peek                  */
    gboolean consume; /* FALSE for a peek or for more than capacity  */
    gint64 reserve_us;
} call;

/* fixed_window: the window running at now and its count. */
static void window_now(const sluice__rule *rule, const sluice__state *s, gint64 now, gint64 epoch,
                       gint64 *start, gint64 *count)
{
    gint64 w = rule->window_us;
    gboolean expired = !s->started || now >= s->a + w;
    /* a new window starts now, or (anchor = epoch) at the last multiple of w since
     * the epoch */
    gint64 phase = rule->epoch ? ((epoch % w) + w) % w : 0;
    *start = expired ? now - phase : s->a;
    *count = expired ? 0 : s->b;
}

static void fixed_window(const call *c, sluice__verdict *v)
{
    sluice__state *s = c->s;
    gint64 w = c->rule->window_us, limit = c->rule->limit;
    gint64 start, count;
    window_now(c->rule, s, c->now, c->epoch, &start, &count);

    v->allowed = count + c->need <= limit;
    if (v->allowed && c->consume) {
        count += c->need;
        s->a = start;
        s->b = count;
        s->started = TRUE;
    }
    v->remaining = MAX(0, limit - count); /* a penalty, or a lower limit, may pass it */
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
        runs_push(log, c->now, c->need, c->s->owner);
        c->s->started = TRUE;
    }
    v->remaining = MAX(0, limit - log->total); /* a penalty, or a lower limit, may pass it */
    v->reset_after_us = log->total > 0 ? runs_newest(log) + w - c->now : 0;
}

/* sliding_window: the window running at now, its count and the previous one's. */
static void windows_now(const sluice__rule *rule, const sluice__state *s, gint64 now, gint64 *start,
                        gint64 *cur, gint64 *prev)
{
    gint64 w = rule->window_us;
    *start = now - (((now % w) + w) % w);
    *cur = *prev = 0;
    if (s->started && *start == s->a) {
        *cur = s->b;
        *prev = s->c;
    } else if (s->started && *start == s->a + w) {
        *prev = s->b;
    } else if (s->started && *start < s->a) { /* a clock that stepped back */
        *start = s->a;
        *cur = s->b;
        *prev = s->c;
    }
}

static void sliding_window(const call *c, sluice__verdict *v)
{
    sluice__state *s = c->s;
    gint64 w = c->rule->window_us, w_ms = w / 1000, limit = c->rule->limit;
    gint64 start, cur, prev;
    windows_now(c->rule, s, c->now, &start, &cur, &prev);
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

/* ---- exact rates: token_bucket and gcra ----------------------------------------
 * The emission interval T = W / L is kept exact: a time or duration is a span, q
 * whole µs plus r/L µs (0 <= r < L, q rounded toward minus infinity). The answers
 * in µs are rounded up (docs/algorithms.md). lua/prelude.lua computes the same. */

typedef sluice__span span;

typedef struct {
    gint64 l, w;   /* L and W (µs)          */
    gint64 tq, tr; /* T = tq + tr / L µs    */
} rate;

static rate rate_of(const sluice__rule *rule)
{
    return (rate){rule->limit, rule->window_us, rule->window_us / rule->limit,
                  rule->window_us % rule->limit};
}

/* floor(a * b / d) and a * b mod d, for a, b >= 0 and d > 0; the quotient fits. */
static gint64 muldivmod(gint64 a, gint64 b, gint64 d, gint64 *rest)
{
    gint64 p;
    if (!__builtin_mul_overflow(a, b, &p)) {
        *rest = p % d;
        return p / d;
    }
    unsigned __int128 wide = (unsigned __int128)a * (unsigned __int128)b;
    *rest = (gint64)(wide % (unsigned __int128)d);
    return (gint64)(wide / (unsigned __int128)d);
}

static span span_add(gint64 l, span a, span b)
{
    span s = {a.q + b.q, a.r + b.r};
    if (s.r >= l) {
        s.q++;
        s.r -= l;
    }
    return s;
}

static span span_sub(gint64 l, span a, span b)
{
    span s = {a.q - b.q, a.r - b.r};
    if (s.r < 0) {
        s.q--;
        s.r += l;
    }
    return s;
}

static gboolean span_le(span a, span b)
{
    return a.q < b.q || (a.q == b.q && a.r <= b.r);
}

/* The span rounded up to whole µs. */
static gint64 span_ceil(span a)
{
    return a.r > 0 ? a.q + 1 : a.q;
}

/* k * T, for k >= 0. */
static span times_t(const rate *t, gint64 k)
{
    gint64 p;
    if (!__builtin_mul_overflow(k, t->tr, &p) && p < t->l)
        return (span){k * t->tq, p}; /* no carry into whole µs: no division */
    gint64 r, q = muldivmod(k, t->tr, t->l, &r);
    return (span){k * t->tq + q, r};
}

/* floor(x / T) = floor((x.q * L + x.r) / W), for x >= 0 (the caller bounds it). */
static gint64 per_t(const rate *t, span x)
{
    gint64 p;
    if (!__builtin_mul_overflow(x.q, t->l, &p) && !__builtin_add_overflow(p, x.r, &p))
        return p / t->w; /* one division */
    gint64 rest, q = muldivmod(x.q, t->l, t->w, &rest);
    return q + (rest + x.r) / t->w;
}

/* A rate and its capacity B * T, which cost divisions: each thread keeps those of
 * the last limit, window and burst it decided on. */
typedef struct {
    gint64 limit, window_us, burst; /* 0, 0, 0: none yet */
    rate t;
    span capacity;
} rate_memo;

static __thread __attribute__((tls_model("initial-exec"))) rate_memo memo;

static const rate_memo *rate_memo_of(const sluice__rule *rule)
{
    rate_memo *m = &memo;
    if (m->limit != rule->limit || m->window_us != rule->window_us || m->burst != rule->burst) {
        m->limit = rule->limit;
        m->window_us = rule->window_us;
        m->burst = rule->burst;
        m->t = rate_of(rule);
        m->capacity = times_t(&m->t, rule->burst);
    }
    return m;
}

/* The time a state stored as (q, r) in 1/d-ths of a µs, in 1/L-ths: when the limit
 * changed since (a reload), rounded up to the next whole µs: never earlier. */
static span stored_time(gint64 l, gint64 q, gint64 r, gint64 d)
{
    if (d != l && r > 0)
        return (span){q + 1, 0};
    return (span){q, d != l ? 0 : r};
}

/* token_bucket: the tokens at now and the time of the last refill. */
static void bucket_now(const sluice__state *s, const rate *t, gint64 burst, span now,
                       gint64 *tokens_out, span *last_out)
{
    gint64 tokens = burst;
    span last = now;
    if (s->started) {
        tokens = s->a;
        last = stored_time(t->l, s->b, s->c, s->d);
        if (tokens < burst && !span_le(now, last)) {
            span elapsed = span_sub(t->l, now, last);
            if (span_le(times_t(t, burst - tokens), elapsed)) {
                tokens = burst;
            } else {
                gint64 gained = per_t(t, elapsed);
                tokens += gained;
                last = span_add(t->l, last, times_t(t, gained));
            }
        }
        if (tokens >= burst) {
            tokens = burst;
            last = now;
        }
    }
    *tokens_out = tokens;
    *last_out = last;
}

static void token_bucket(const call *c, sluice__verdict *v)
{
    sluice__state *s = c->s;
    rate t = rate_memo_of(c->rule)->t;
    gint64 burst = c->rule->burst, tokens;
    span now = {c->now, 0}, last;
    bucket_now(s, &t, burst, now, &tokens, &last);
    /* when the need - tokens missing tokens are due, from now */
    span due_in = {0, 0};
    if (tokens < c->need)
        due_in = span_add(t.l, span_sub(t.l, last, now), times_t(&t, c->need - tokens));
    v->allowed = tokens >= c->need;
    v->wait_us = 0;
    if (!v->allowed && c->consume && c->reserve_us > 0 && span_ceil(due_in) <= c->reserve_us) {
        v->allowed = TRUE; /* a reservation: the tokens are the caller's, due later */
        v->wait_us = span_ceil(due_in);
    }
    if (v->allowed && c->consume) {
        tokens -= c->need;
        s->a = tokens;
        s->b = last.q;
        s->c = last.r;
        s->d = t.l;
        s->started = TRUE;
    }
    v->remaining = MAX(0, tokens);
    v->reset_after_us =
        tokens >= burst
            ? 0
            : span_ceil(span_add(t.l, span_sub(t.l, last, now), times_t(&t, burst - tokens)));
    v->retry_after_us = v->allowed ? -1 : span_ceil(due_in);
}

/* gcra in three steps (algorithm.h), for the memory backend's lock-free state: the
 * plan before the state is read, the admission and the next tat between reading it
 * and committing, the answer after. */
static void gcra_plan(const sluice__rule *rule, gint64 now_us, gint64 need, gboolean consume,
                      sluice__gcra_plan *p)
{
    const rate_memo *m = rate_memo_of(rule);
    gint64 l = m->t.l;
    p->rule = rule;
    p->l = l;
    p->consume = consume;
    p->now = (span){now_us, 0};
    p->inc = times_t(&m->t, need);
    p->never = !span_le(p->inc, m->capacity); /* more than the burst */
    p->latest = p->never ? p->now : span_sub(l, span_add(l, p->now, m->capacity), p->inc);
}

span sluice__gcra_tat(const sluice__gcra_plan *p, gboolean started, gint64 a, gint64 b, gint64 d)
{
    return started ? stored_time(p->l, a, b, d) : p->now;
}

/* new_ttl = max(tat - now, 0) + inc <= DVT, as now + DVT - inc, worked out ahead */
gboolean sluice__gcra_admits(const sluice__gcra_plan *p, span tat)
{
    return !p->never && span_le(tat, p->latest);
}

span sluice__gcra_next(const sluice__gcra_plan *p, span tat)
{
    return span_add(p->l, span_le(tat, p->now) ? p->now : tat, p->inc);
}

/* The answer's fields of a gcra decision on tat, v->allowed set. */
static void gcra_fields(const sluice__gcra_plan *p, span tat, sluice__verdict *v)
{
    const rate_memo *m = rate_memo_of(p->rule);
    gint64 l = p->l;
    span dvt = m->capacity, ttl = {0, 0}; /* ttl = tat - now, at least 0 */
    if (!span_le(tat, p->now))
        ttl = span_sub(l, tat, p->now);
    span new_ttl = span_add(l, ttl, p->inc);
    if (v->allowed && p->consume)
        ttl = new_ttl;
    v->remaining = span_le(dvt, ttl) ? 0 : per_t(&m->t, span_sub(l, dvt, ttl));
    v->reset_after_us = span_ceil(ttl);
    v->retry_after_us = v->allowed ? -1 : span_ceil(span_sub(l, new_ttl, dvt));
}

static void gcra(const call *c, sluice__verdict *v)
{
    sluice__state *s = c->s;
    sluice__gcra_plan p;
    gcra_plan(c->rule, c->now, c->need, c->consume, &p);
    span tat = sluice__gcra_tat(&p, s->started, s->a, s->b, s->d);
    v->allowed = sluice__gcra_admits(&p, tat);
    if (v->allowed && c->consume) {
        span next = sluice__gcra_next(&p, tat);
        s->a = next.q;
        s->b = next.r;
        s->d = p.l;
        s->started = TRUE;
    }
    gcra_fields(&p, tat, v);
}

/* ---- warm-up: token_bucket and gcra with warmup = U ------------------------------
 * Guava's SmoothWarmingUp with cold factor 3, its costs exact (docs/algorithms.md).
 * The state: the time the limiter is free again (a, b: a span) and the stored time
 * (c, in 1/(2L) µs: how long unused permits have piled up, 0 warm, U cold: U / T
 * stored permits); d is L. A call is admitted when the limiter is free, and pushes
 * the free time on by what its permits cost: T each, and for the stored time it
 * spends above U / 2, more, linearly up to 3 T at U. */

/* What spending stored time from b2 down to a2 (1/(2L) µs, both at or above the
 * threshold U L) costs over T per permit, in 1/L µs rounded up:
 * (b2 - a2) (a2 + b2 - 2 U L) / (2 L U). */
static gint64 warm_extra(gint64 a2, gint64 b2, gint64 l, gint64 u)
{
    if (b2 <= a2)
        return 0;
    unsigned __int128 p = (unsigned __int128)(b2 - a2) * (unsigned __int128)(a2 + b2 - 2 * u * l);
    unsigned __int128 d = (unsigned __int128)(2 * l) * (unsigned __int128)u;
    return (gint64)((p + d - 1) / d);
}

/* A duration in 1/L µs as a span. */
static span span_of(gint64 l, gint64 n)
{
    return (span){n / l, n % l};
}

/* The stored time of a state kept under another L (d), in 1/(2L) µs, rounded up
 * (colder: never admits earlier). */
static gint64 stored_warmth(gint64 l, gint64 c, gint64 d)
{
    if (d == l)
        return c;
    gint64 rest, q = muldivmod(c, l, d, &rest);
    return q + (rest > 0);
}

static void warmup(const call *c, sluice__verdict *v)
{
    sluice__state *s = c->s;
    rate t = rate_memo_of(c->rule)->t;
    gint64 l = t.l, w = t.w, u = c->rule->warmup_us;
    gint64 cold = 2 * u * l, threshold = u * l, cold_interval = 6 * w; /* 1/(2L) µs */
    span now = {c->now, 0}, next = now;
    gint64 stored = cold; /* a new limit starts cold */
    if (s->started) {
        next = stored_time(l, s->a, s->b, s->d);
        stored = MIN(cold, stored_warmth(l, s->c, s->d));
    }
    if (!span_le(now, next)) {
        /* idle since next: unused permits are stored again at 1/T; a gap shorter
         * than the cold interval 3T stores them only up to the threshold, so that
         * a caller coming back within it keeps warming (guava#3552) */
        span gap = span_sub(l, now, next);
        gint64 gap2 = gap.q >= u ? cold : 2 * (gap.q * l + gap.r);
        stored = gap2 >= cold_interval || gap2 >= cold ? MIN(cold, stored + gap2)
                                                       : MAX(stored, MIN(stored + gap2, threshold));
        next = now;
    }
    v->allowed = span_le(next, now);
    v->wait_us = 0;
    if (!v->allowed && c->consume && c->reserve_us > 0 &&
        span_ceil(span_sub(l, next, now)) <= c->reserve_us) {
        v->allowed = TRUE; /* a reservation: the permits are the caller's once free */
        v->wait_us = span_ceil(span_sub(l, next, now));
    }
    if (v->allowed && c->consume) {
        gint64 spent = c->need >= (stored + 2 * w - 1) / (2 * w) ? stored : 2 * c->need * w;
        gint64 extra = warm_extra(MAX(threshold, stored - spent), MAX(threshold, stored), l, u);
        next = span_add(l, span_add(l, next, times_t(&t, c->need)), span_of(l, extra));
        stored -= spent;
        s->a = next.q;
        s->b = next.r;
        s->c = stored;
        s->d = l;
        s->started = TRUE;
    }
    gboolean free_now = span_le(next, now);
    v->retry_after_us = v->allowed ? -1 : span_ceil(span_sub(l, next, now));
    v->remaining = free_now ? c->rule->limit : 0;
    /* back to a new limit's state once free and idle until cold: for as long as the
     * stored time lacks, at least the cold interval, at most U */
    span busy = free_now ? (span){0, 0} : span_sub(l, next, now);
    gint64 idle2 = stored >= cold ? 0 : MIN(cold, MAX(cold_interval, cold - stored));
    v->reset_after_us =
        stored >= cold && free_now ? 0 : span_ceil(span_add(l, busy, span_of(l, (idle2 + 1) / 2)));
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
        runs_push(leases, c->now + c->rule->window_us, c->need, c->s->owner);
        c->s->started = TRUE;
        v->leased = c->need;
    }
    v->remaining = limit - leases->total;
    v->reset_after_us = leases->total > 0 ? runs_newest(leases) - c->now : 0;
}

/* The permits a call is decided for: one for a peek; capacity + 1 for more than the
 * capacity, which keeps the arithmetic small and is denied either way. */
static inline gint64 need_of(gint64 permits, gint64 capacity)
{
    gint64 need = permits > 0 ? permits : 1;
    return need > capacity ? capacity + 1 : need;
}

/* TRUE when an admission is stored: not a peek, not more than the capacity, not dry. */
static inline gboolean consumes(gint64 permits, gint64 capacity, gboolean dry)
{
    return !dry && permits > 0 && permits <= capacity;
}

/* The fields of the answer the algorithm does not set (but may: wait_us, leased). */
static inline void verdict_start(sluice__verdict *v, gint64 capacity)
{
    v->limit = capacity;
    v->wait_us = 0;
    v->leased = 0;
    v->shadow_denied = FALSE;
    v->refused = 0;
    v->blocked = FALSE;
}

/* More permits than the capacity never pass, whatever the state. */
static inline void verdict_finish(sluice__verdict *v, gint64 permits, gint64 capacity)
{
    if (permits > capacity) {
        v->allowed = FALSE;
        v->retry_after_us = -1;
    }
}

/* One band: decides with `rule` on `state`; dry: as if the call consumed, but
 * without changing the state (the first pass of a rule with bands). Inlined into
 * the decision of a rule without bands, the common one. */
static inline __attribute__((always_inline)) void
decide_one(const sluice__rule *rule, sluice__state *state, gint64 now_us, gint64 epoch_us,
           gint64 permits, gint64 reserve_us, gboolean dry, sluice__verdict *v)
{
    gint64 capacity = sluice__rule_capacity(rule);
    call c = {rule,
              state,
              now_us,
              epoch_us,
              need_of(permits, capacity),
              consumes(permits, capacity, dry),
              permits <= capacity ? MIN(reserve_us, SLUICE__MAX_RESERVE_US) : 0};

    verdict_start(v, capacity);
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
        if (G_UNLIKELY(rule->warmup_us > 0))
            warmup(&c, v);
        else
            token_bucket(&c, v);
        break;
    case SLUICE__GCRA:
        if (G_UNLIKELY(rule->warmup_us > 0))
            warmup(&c, v);
        else
            gcra(&c, v);
        break;
    case SLUICE__CONCURRENCY:
        concurrency(&c, v);
        break;
    case SLUICE__ADAPTIVE: /* decided in process by src/adaptive/, never on a state */
        g_assert_not_reached();
    }
    verdict_finish(v, permits, capacity);
}

gboolean sluice__gcra_plannable(const sluice__rule *rule)
{
    return rule->algorithm == SLUICE__GCRA && sluice__rule_bands(rule) == 1 && rule->warmup_us == 0;
}

void sluice__gcra_plan_of(const sluice__rule *rule, gint64 now_us, gint64 permits,
                          sluice__gcra_plan *plan)
{
    gint64 capacity = sluice__rule_capacity(rule);
    gcra_plan(rule, now_us, need_of(permits, capacity), consumes(permits, capacity, FALSE), plan);
    plan->permits = permits;
}

void sluice__gcra_answer(const sluice__gcra_plan *plan, span tat, gboolean admitted,
                         sluice__verdict *v)
{
    gint64 capacity = sluice__rule_capacity(plan->rule);
    verdict_start(v, capacity);
    v->allowed = admitted;
    gcra_fields(plan, tat, v);
    verdict_finish(v, plan->permits, capacity);
}

/* Band i of rule (its own limit: 0) as decide_one decides it. */
static __attribute__((noinline)) void decide_band(const sluice__rule *rule, guint i,
                                                  sluice__state *state, gint64 now_us,
                                                  gint64 epoch_us, gint64 permits, gboolean dry,
                                                  sluice__verdict *v)
{
    sluice__rule r = *rule;
    if (i > 0) {
        r.limit = rule->bands[i - 1].limit;
        r.window_us = rule->bands[i - 1].window_us;
        r.burst = rule->bands[i - 1].burst;
    }
    decide_one(&r, state, now_us, epoch_us, permits, 0, dry, v);
}

/* sluice__decide for a rule with bands: all or nothing. First every band as if the
 * call consumed (nothing changes), then, when every enforced band admits, each
 * takes the permits (a shadow band only when it admits too). No reservations: a
 * waiting caller sleeps until the latest band's retry and asks again. */
static __attribute__((noinline)) void decide_bands(const sluice__rule *rule, sluice__state *states,
                                                   gint64 now_us, gint64 epoch_us, gint64 permits,
                                                   sluice__verdict *v)
{
    guint n = sluice__rule_bands(rule), enforced = 1 + rule->n_bands;
    sluice__verdict each[1 + SLUICE__MAX_BANDS] = {{0}};
    gboolean all = TRUE;
    for (guint i = 0; i < n; i++) {
        decide_band(rule, i, &states[i], now_us, epoch_us, permits, TRUE, &each[i]);
        if (i < enforced && !each[i].allowed)
            all = FALSE;
    }
    if (permits > 0 && all) {
        for (guint i = 0; i < n; i++) {
            if (i >= enforced && !each[i].allowed)
                continue;
            decide_band(rule, i, &states[i], now_us, epoch_us, permits, FALSE, &each[i]);
        }
    }
    /* the band with the fewest remaining (the first on a tie), the latest retry (-1
     * when one band can never pass the permits) and reset */
    guint tight = 0;
    gint64 retry = -1, reset = 0, idle = 0;
    gboolean never = FALSE;
    for (guint i = 0; i < n; i++) {
        idle = MAX(idle, each[i].reset_after_us);
        if (i >= enforced)
            continue;
        if (each[i].remaining < each[tight].remaining)
            tight = i;
        reset = MAX(reset, each[i].reset_after_us);
        if (!each[i].allowed && each[i].retry_after_us < 0)
            never = TRUE;
        else if (!each[i].allowed)
            retry = MAX(retry, each[i].retry_after_us);
    }
    *v = each[tight];
    v->allowed = all;
    v->retry_after_us = all || never ? -1 : retry;
    v->reset_after_us = reset;
    v->wait_us = 0;
    v->leased = 0;
    v->refused = 0;
    for (guint i = all ? enforced : 0; i < (all ? n : enforced); i++)
        v->refused |= each[i].allowed ? 0 : 1u << i;
    v->shadow_denied = all && v->refused != 0;
    states[0].idle_at = now_us + idle;
}

void sluice__decide(const sluice__rule *rule, sluice__state *states, gint64 now_us, gint64 epoch_us,
                    gint64 permits, gint64 reserve_us, sluice__verdict *v)
{
    if (rule->n_bands + rule->n_shadow != 0) {
        decide_bands(rule, states, now_us, epoch_us, permits, v);
        return;
    }
    decide_one(rule, &states[0], now_us, epoch_us, permits, reserve_us, FALSE, v);
    states[0].idle_at = now_us + v->reset_after_us;
}

void sluice__release(const sluice__rule *rule, sluice__state *state, gint64 now_us, gint64 permits)
{
    if (rule->algorithm != SLUICE__CONCURRENCY || permits <= 0)
        return;
    runs_drop_until(&state->log, now_us);
    runs_take(&state->log, permits - runs_take_owned(&state->log, state->owner, permits));
    state->idle_at = state->log.total > 0 ? runs_newest(&state->log) : now_us;
}

/* ---- penalties: permits taken without a call ------------------------------------ */

/* One band's penalty: `permits` (at most twice the capacity) counted as admitted at
 * now, until the band holds twice its capacity in use. */
static void penalize_one(const sluice__rule *rule, sluice__state *s, gint64 now, gint64 epoch,
                         gint64 permits)
{
    gint64 most = 2 * sluice__rule_capacity(rule);
    switch (rule->algorithm) {
    case SLUICE__FIXED_WINDOW:
        window_now(rule, s, now, epoch, &s->a, &s->b);
        s->b = MAX(s->b, MIN(s->b + permits, most));
        break;
    case SLUICE__SLIDING_LOG:
        runs_drop_until(&s->log, now - rule->window_us);
        if (s->log.total < most)
            runs_push(&s->log, now, MIN(permits, most - s->log.total), s->owner);
        break;
    case SLUICE__SLIDING_WINDOW: {
        gint64 start, cur, prev;
        windows_now(rule, s, now, &start, &cur, &prev);
        s->a = start;
        s->b = MAX(cur, MIN(cur + permits, most));
        s->c = prev;
        break;
    }
    case SLUICE__TOKEN_BUCKET: {
        rate t = rate_memo_of(rule)->t;
        gint64 tokens;
        span last;
        bucket_now(s, &t, rule->burst, (span){now, 0}, &tokens, &last);
        s->a = MIN(tokens, MAX(tokens - permits, -rule->burst));
        s->b = last.q;
        s->c = last.r;
        s->d = t.l;
        break;
    }
    case SLUICE__GCRA: {
        const rate_memo *m = rate_memo_of(rule);
        span at = {now, 0};
        span tat = s->started ? stored_time(m->t.l, s->a, s->b, s->d) : at;
        span most_tat = span_add(m->t.l, span_add(m->t.l, at, m->capacity), m->capacity);
        span next = span_add(m->t.l, span_le(tat, at) ? at : tat, times_t(&m->t, permits));
        if (span_le(most_tat, next))
            next = span_le(tat, most_tat) ? most_tat : tat;
        s->a = next.q;
        s->b = next.r;
        s->d = m->t.l;
        break;
    }
    default: /* concurrency: refused by the caller */
        return;
    }
    s->started = TRUE;
}

void sluice__penalize(const sluice__rule *rule, sluice__state *states, gint64 now_us,
                      gint64 epoch_us, gint64 permits)
{
    for (guint i = 0; i < sluice__rule_bands(rule); i++) {
        sluice__rule r = *rule;
        sluice__band b = sluice__rule_band(rule, i);
        r.limit = b.limit;
        r.window_us = b.window_us;
        r.burst = b.burst;
        r.n_bands = r.n_shadow = 0;
        penalize_one(&r, &states[i], now_us, epoch_us, MIN(permits, 2 * sluice__rule_capacity(&r)));
    }
    sluice__verdict v; /* a peek: when the states are full again */
    sluice__decide(rule, states, now_us, epoch_us, 0, 0, &v);
    states[0].idle_at = MAX(states[0].idle_at, states[0].blocked_until);
}
