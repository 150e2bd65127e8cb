/* SPDX-License-Identifier: MIT */
/* One script call of the redis backend: the command of a decision, written once in
 * RESP, and reading its reply. */
#include "redis/script.h"

#include <string.h>

#include "clock.h"
#include "redis/key.h"
#include "redis/resp.h"
#include "value.h"

char *sluice__redis_band_key(const char *state_key, const sluice__band *band)
{
    return g_strdup_printf("%s:band:%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT,
                           state_key, band->limit, band->window_us, band->burst);
}

/* ---- writing ------------------------------------------------------------------------ */

/* Most bytes a number takes as a bulk string: `$20\r\n`, 20 digits, `\r\n`. */
#define NUMBER_MAX 27
/* Most bytes `:band:L:W:B` adds to a key. */
#define BAND_SUFFIX_MAX (6 + 3 * 20 + 2)

typedef struct {
    char *at;
    guint argc;
} writer;

static void put_raw(writer *w, const char *data, gsize len)
{
    memcpy(w->at, data, len);
    w->at += len;
}

/* `$len\r\n` */
static void put_length(writer *w, gsize len)
{
    *w->at++ = '$';
    w->at += sluice__redis_decimal(w->at, (gint64)len);
    put_raw(w, "\r\n", 2);
}

static void put_bulk(writer *w, const char *data, gsize len)
{
    put_length(w, len);
    put_raw(w, data, len);
    put_raw(w, "\r\n", 2);
    w->argc++;
}

static void put_number(writer *w, gint64 v)
{
    char digits[24];
    put_bulk(w, digits, sluice__redis_decimal(digits, v));
}

/* The key that is key (len bytes) and suffix (n bytes). */
static void put_key(writer *w, const char *key, gsize len, const char *suffix, gsize n)
{
    put_length(w, len + n);
    put_raw(w, key, len);
    put_raw(w, suffix, n);
    put_raw(w, "\r\n", 2);
    w->argc++;
}

/* `:band:L:W:B` into out; its length. */
static gsize band_suffix(char *out, const sluice__band *b)
{
    gsize n = 0;
    memcpy(out, ":band:", 6);
    n += 6;
    n += sluice__redis_decimal(out + n, b->limit);
    out[n++] = ':';
    n += sluice__redis_decimal(out + n, b->window_us);
    out[n++] = ':';
    n += sluice__redis_decimal(out + n, b->burst);
    return n;
}

/* token_bucket and gcra: TRUE (and *t = T) when the rule's numbers stay whole µs
 * below 2^53 in doubles: T = window / limit a whole number and (burst + 1) * T <= 2^52. */
static gboolean whole_rate(const sluice__rule *rule, gint64 *t)
{
    if (rule->window_us % rule->limit != 0)
        return FALSE;
    *t = rule->window_us / rule->limit;
    return rule->burst < (G_GINT64_CONSTANT(1) << 52) / *t;
}

guint sluice__redis_decide_args(sluice__algorithm algorithm, gint64 t, gint64 burst, gint64 permits,
                                gint64 reserve_us, gint64 out[4])
{
    gint64 need = MIN(permits > 0 ? permits : 1, burst + 1);
    gboolean consume = permits > 0 && permits <= burst;
    if (algorithm == SLUICE__GCRA) {
        out[0] = consume ? need * t : 0;
        out[1] = burst * t;
        return 2;
    }
    out[0] = consume ? need * t : -need * t;
    out[1] = t;
    out[2] = burst * t;
    if (!consume || reserve_us <= 0)
        return 3;
    out[3] = need * t - MIN(reserve_us, SLUICE__MAX_RESERVE_US);
    return 4;
}

static sluice__lua_entry entry_of(const sluice__rule *rule, gboolean virtual, gint64 *t)
{
    if (rule->warmup_us > 0) /* token_bucket and gcra, without bands */
        return SLUICE__LUA_WARMUP;
    if (rule->n_bands + rule->n_shadow > 0)
        return SLUICE__LUA_BANDS;
    switch (rule->algorithm) {
    case SLUICE__FIXED_WINDOW:
        return rule->epoch || virtual ? SLUICE__LUA_EXACT : SLUICE__LUA_DECIDE;
    case SLUICE__TOKEN_BUCKET:
    case SLUICE__GCRA:
        return whole_rate(rule, t) ? SLUICE__LUA_DECIDE : SLUICE__LUA_EXACT;
    default:
        return SLUICE__LUA_DECIDE;
    }
}

void sluice__redis_call_init(sluice__redis_call *c, const sluice__rule *rule, const char *prefix,
                             gsize prefix_len, sluice__limiter *limiter, const char *key,
                             const char *op, gint64 permits, gint64 reserve_us)
{
    gboolean virtual = sluice__clock_injected(); /* tests, replay: never in normal operation */
    gint64 now = virtual ? sluice__clock_now() : 0, t = 0;
    /* a key's policy: penalize as a rule with bands is decided (every band pays), block
     * on the key's own state alone */
    gboolean blocking = strcmp(op, SLUICE__REDIS_OP_BLOCK) == 0;
    gboolean penalizing = strcmp(op, SLUICE__REDIS_OP_PENALIZE) == 0;
    guint bands = blocking ? 0 : rule->n_bands + rule->n_shadow;
    const char *tag = sluice__redis_name_tag(limiter);
    gsize tag_len = strlen(tag);
    gsize key_size = sluice__redis_key_size(prefix_len + tag_len, key);

    c->algorithm = rule->algorithm;
    c->entry = blocking     ? SLUICE__LUA_BLOCK
               : penalizing ? SLUICE__LUA_PENALIZE
                            : entry_of(rule, virtual, &t);
    /* fixed_window's decide takes permits: a peek, or more than the limit, is exact's */
    if (c->entry == SLUICE__LUA_DECIDE && rule->algorithm == SLUICE__FIXED_WINDOW &&
        (permits <= 0 || permits > rule->limit))
        c->entry = SLUICE__LUA_EXACT;
    c->capacity = sluice__rule_capacity(rule);
    c->permits = permits;
    c->t = t;
    c->reserve_us = reserve_us;
    c->window_us = rule->window_us;
    c->big = NULL;
    c->data = NULL;
    c->len = 0;

    /* only concurrency writes a seq key (STATE:seq); the others name none: a call names no
     * key it does not use, so that on a Cluster a slot being migrated answers it with
     * ASK or runs it, and TRYAGAIN (some of its keys moved, not all) comes only from
     * keys it really has */
    gboolean seq = rule->algorithm == SLUICE__CONCURRENCY;
    guint per_band = seq ? 2 : 1;

    /* what the arguments may take at most */
    gsize most = (1 + bands) * per_band * (key_size + BAND_SUFFIX_MAX + 4 + NUMBER_MAX) +
                 (10 + 3 * (1 + bands)) * NUMBER_MAX + 16;
    if (most <= SLUICE__REDIS_CALL_SMALL) {
        c->args = c->buf + SLUICE__REDIS_CALL_HEAD;
    } else {
        c->big = g_malloc(SLUICE__REDIS_CALL_HEAD + most);
        c->args = c->big + SLUICE__REDIS_CALL_HEAD;
    }

    writer w = {c->args, 0};
    put_number(&w, per_band * (1 + bands));
    /* the state key, written in place (a warm-up's state is in it too, in a layout of
     * its own: lua/prelude.lua's warm_up) */
    put_length(&w, key_size);
    c->key_at = (gsize)(w.at - c->args);
    c->key_len = sluice__redis_key_write(w.at, prefix, prefix_len, tag, tag_len, key);
    w.at += c->key_len;
    put_raw(&w, "\r\n", 2);
    w.argc++;
    const char *state_key = c->args + c->key_at;
    if (seq)
        put_key(&w, state_key, c->key_len, ":seq", 4);
    for (guint i = 0; i < bands; i++) {
        char suffix[BAND_SUFFIX_MAX + 4];
        gsize n = band_suffix(suffix, &rule->bands[i]);
        put_key(&w, state_key, c->key_len, suffix, n);
        if (seq) {
            memcpy(suffix + n, ":seq", 4);
            put_key(&w, state_key, c->key_len, suffix, n + 4);
        }
    }

    if (c->entry == SLUICE__LUA_BLOCK) {
        put_number(&w, permits); /* the block's duration, µs */
        put_number(&w, rule->window_us);
        if (virtual)
            put_number(&w, now);
    } else if (c->entry == SLUICE__LUA_WARMUP) {
        put_number(&w, permits);
        put_number(&w, rule->limit);
        put_number(&w, rule->window_us);
        put_number(&w, rule->warmup_us);
        put_number(&w, rule->algorithm == SLUICE__TOKEN_BUCKET ? reserve_us : 0);
        if (virtual)
            put_number(&w, now);
    } else if (c->entry == SLUICE__LUA_BANDS || c->entry == SLUICE__LUA_PENALIZE) {
        put_number(&w, c->entry == SLUICE__LUA_PENALIZE ? MIN(permits, 2 * SLUICE__MAX_PERMITS)
                                                        : permits);
        put_number(&w, reserve_us);
        put_number(&w, rule->epoch);
        if (virtual)
            put_number(&w, now);
        else
            put_bulk(&w, "", 0);
        put_number(&w, rule->n_bands);
        put_number(&w, rule->n_shadow);
        put_number(&w, rule->limit);
        put_number(&w, rule->window_us);
        put_number(&w, rule->burst);
        for (guint i = 0; i < bands; i++) {
            put_number(&w, rule->bands[i].limit);
            put_number(&w, rule->bands[i].window_us);
            put_number(&w, rule->bands[i].burst);
        }
    } else if (c->entry == SLUICE__LUA_DECIDE &&
               (rule->algorithm == SLUICE__TOKEN_BUCKET || rule->algorithm == SLUICE__GCRA)) {
        gint64 args[4];
        guint n = sluice__redis_decide_args(
            rule->algorithm, t, rule->burst, permits,
            rule->algorithm == SLUICE__TOKEN_BUCKET ? reserve_us : 0, args);
        for (guint i = 0; i < MIN(n, 3); i++)
            put_number(&w, args[i]);
        if (virtual)
            put_number(&w, now);
        else if (n == 4)
            put_bulk(&w, "", 0);
        if (n == 4)
            put_number(&w, args[3]);
    } else {
        if (rule->algorithm == SLUICE__CONCURRENCY)
            put_bulk(&w, op, strlen(op));
        put_number(&w, permits);
        switch (rule->algorithm) {
        case SLUICE__FIXED_WINDOW:
            put_number(&w, rule->limit);
            if (c->entry == SLUICE__LUA_DECIDE) {
                put_number(&w, rule->window_us / 1000);
            } else {
                put_number(&w, rule->window_us);
                put_number(&w, rule->epoch);
            }
            break;
        case SLUICE__TOKEN_BUCKET:
        case SLUICE__GCRA:
            put_number(&w, rule->limit); /* exact */
            put_number(&w, rule->window_us);
            put_number(&w, rule->burst);
            if (rule->algorithm == SLUICE__TOKEN_BUCKET)
                put_number(&w, reserve_us);
            break;
        default: /* sliding_log, sliding_window, concurrency */
            put_number(&w, rule->limit);
            put_number(&w, rule->window_us);
        }
        if (virtual)
            put_number(&w, now);
    }
    c->args_len = (gsize)(w.at - c->args);
    c->argc = w.argc;
}

void sluice__redis_call_use(sluice__redis_call *c, sluice__redis_how how)
{
    static const char *const commands[] = {"FCALL", "EVALSHA", "EVAL"};
    const char *name = how == SLUICE__REDIS_FCALL ? sluice__lua_functions[c->algorithm][c->entry]
                       : how == SLUICE__REDIS_EVALSHA ? sluice__lua_shas[c->algorithm][c->entry]
                                                      : sluice__lua_scripts[c->algorithm][c->entry];
    gsize name_len = strlen(name);
    char *at = c->args;
    if (how == SLUICE__REDIS_EVAL) { /* the source: a buffer of its own */
        char *whole = g_malloc(name_len + 64 + c->args_len);
        memcpy(whole + name_len + 64, c->args, c->args_len);
        if (c->big != NULL && c->args == c->big + SLUICE__REDIS_CALL_HEAD)
            g_free(c->big);
        c->big = whole;
        c->args = at = whole + name_len + 64;
    }
    char head[24];
    writer w = {head, 0};
    *w.at++ = '*';
    w.at += sluice__redis_decimal(w.at, (gint64)c->argc + 2);
    put_raw(&w, "\r\n", 2);
    put_bulk(&w, commands[how], strlen(commands[how]));
    gsize head_len = (gsize)(w.at - head);
    /* the name's length, then the name, right before the arguments */
    char length[24];
    writer l = {length, 0};
    put_length(&l, name_len);
    gsize length_len = (gsize)(l.at - length);
    gsize all = head_len + length_len + name_len + 2;
    char *start = at - all;
    memcpy(start, head, head_len);
    memcpy(start + head_len, length, length_len);
    memcpy(start + head_len + length_len, name, name_len);
    memcpy(start + head_len + length_len + name_len, "\r\n", 2);
    c->data = start;
    c->len = all + c->args_len;
}

void sluice__redis_call_clear(sluice__redis_call *c)
{
    g_clear_pointer(&c->big, g_free);
}

/* ---- reading -------------------------------------------------------------------------- */

gboolean sluice__redis_is_noscript(const redisReply *reply)
{
    return reply->type == REDIS_REPLY_ERROR && g_str_has_prefix(reply->str, "NOSCRIPT");
}

gboolean sluice__redis_is_no_function(const redisReply *reply)
{
    return reply->type == REDIS_REPLY_ERROR && strstr(reply->str, "Function not found");
}

/* floor(a / b) for b > 0 */
static gint64 floor_div(gint64 a, gint64 b)
{
    gint64 q = a / b;
    return q * b > a ? q - 1 : q;
}

/* gcra's decide replied ttl = tat - now as read: its decision, as lua/gcra.lua's exact
 * path reaches it (the script admitted and wrote on the same test). */
static void gcra_verdict(const sluice__redis_call *c, gint64 ttl, sluice__verdict *v)
{
    gint64 t = c->t, burst = c->capacity, dvt = burst * t;
    gint64 need = MIN(c->permits > 0 ? c->permits : 1, burst + 1);
    gint64 after = ttl + need * t;
    v->allowed = after <= dvt;
    if (v->allowed) {
        if (c->permits > 0 && c->permits <= burst)
            ttl = after;
        v->remaining = floor_div(dvt - ttl, t);
        v->reset_after_us = ttl;
        return;
    }
    v->remaining = ttl < dvt ? floor_div(dvt - ttl, t) : 0;
    v->reset_after_us = ttl;
    v->retry_after_us = after - dvt;
    v->aging = TRUE;
    v->state[0] = ttl;
}

/* token_bucket's decide replied r = tokens * T + now - last refill, refilled: its
 * decision, as lua/token_bucket.lua's exact path reaches it (the script admitted and
 * wrote on the same test: r >= need * T, or >= need * T - reserve). */
static void token_bucket_verdict(const sluice__redis_call *c, gint64 r, sluice__verdict *v)
{
    gint64 t = c->t, burst = c->capacity;
    gint64 need = MIN(c->permits > 0 ? c->permits : 1, burst + 1);
    gboolean consume = c->permits > 0 && c->permits <= burst;
    gint64 reserve = consume ? MIN(c->reserve_us, SLUICE__MAX_RESERVE_US) : 0;
    gint64 tokens = floor_div(r, t), since = r - tokens * t; /* now - last refill */
    gint64 due_in = tokens < need ? need * t - r : 0;
    v->allowed = tokens >= need;
    if (!v->allowed && consume && reserve > 0 && due_in <= reserve) {
        v->allowed = TRUE;
        v->wait_us = due_in;
    }
    if (v->allowed && consume) {
        tokens -= need;
        r -= need * t;
    }
    v->remaining = MAX(tokens, 0);
    v->reset_after_us = tokens < burst ? burst * t - r : 0;
    if (v->allowed)
        return;
    v->retry_after_us = due_in;
    v->aging = TRUE;
    v->state[0] = tokens;
    v->state[1] = since;
}

/* A little-endian double (Lua's struct.pack '<d') at p. */
static double packed_double(const char *p)
{
    guint64 bits = 0;
    for (int i = 7; i >= 0; i--)
        bits = bits << 8 | (guchar)p[i];
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* The admission a packed reply says: fixed_window's count and window's ms left,
 * sliding_window's current, previous and now - start (lua/sliding_window.lua). */
static void admitted_verdict(const sluice__redis_call *c, const gint64 *n, sluice__verdict *v)
{
    *v = (sluice__verdict){.allowed = TRUE, .limit = c->capacity, .retry_after_us = -1};
    if (c->algorithm == SLUICE__FIXED_WINDOW) {
        v->remaining = MAX(0, c->capacity - n[0]);
        v->reset_after_us = n[1] * 1000;
        return;
    }
    gint64 w = c->window_us, w_ms = w / 1000, cur = n[0], prev = n[1], since = n[2];
    gint64 weight = w_ms - since / 1000; /* 0 <= since < w */
    v->remaining = MAX(0, floor_div(c->capacity * w_ms - prev * weight - cur * w_ms, w_ms));
    v->reset_after_us = cur > 0 ? 2 * w - since : prev > 0 ? w - since : 0;
}

gboolean sluice__redis_call_verdict(const sluice__redis_call *c, const redisReply *reply,
                                    sluice__verdict *v, const char **why)
{
    if (reply->type == REDIS_REPLY_ERROR) {
        *why = reply->str;
        return FALSE;
    }
    /* the common path's short replies (lua/prelude.lua) */
    gboolean short_reply = c->entry == SLUICE__LUA_DECIDE || c->entry == SLUICE__LUA_EXACT;
    if (short_reply && reply->type == REDIS_REPLY_INTEGER &&
        (c->algorithm == SLUICE__GCRA || c->algorithm == SLUICE__TOKEN_BUCKET ||
         c->algorithm == SLUICE__SLIDING_LOG)) {
        if (!v)
            return TRUE;
        *v = (sluice__verdict){.limit = c->capacity, .retry_after_us = -1};
        if (c->algorithm == SLUICE__GCRA)
            gcra_verdict(c, reply->integer, v);
        else if (c->algorithm == SLUICE__TOKEN_BUCKET)
            token_bucket_verdict(c, reply->integer, v);
        else
            *v = (sluice__verdict){.allowed = TRUE, /* logged at now */
                                   .limit = c->capacity,
                                   .remaining = MAX(0, reply->integer),
                                   .retry_after_us = -1,
                                   .reset_after_us = c->window_us};
        if (c->permits > c->capacity)
            v->retry_after_us = -1; /* never, whatever the state */
        return TRUE;
    }
    if (short_reply && reply->type == REDIS_REPLY_STRING &&
        ((c->algorithm == SLUICE__FIXED_WINDOW && reply->len == 16) ||
         (c->algorithm == SLUICE__SLIDING_WINDOW && reply->len == 24))) {
        gint64 n[3];
        for (gsize i = 0; i < reply->len / 8; i++)
            n[i] = (gint64)packed_double(reply->str + 8 * i);
        if (v)
            admitted_verdict(c, n, v);
        return TRUE;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 || reply->elements > 8) {
        *why = "unexpected reply";
        return FALSE;
    }
    gint64 n[8] = {0}; /* all set below (3 to 8); GCC under ASan cannot tell */
    for (size_t i = 0; i < reply->elements; i++) {
        if (reply->element[i]->type != REDIS_REPLY_INTEGER) {
            *why = "reply is not integers";
            return FALSE;
        }
        n[i] = reply->element[i]->integer;
    }
    gsize count = reply->elements;
    if (!v)
        return TRUE;
    *v = (sluice__verdict){.retry_after_us = -1};
    if (count == 8 && n[2] == SLUICE__REDIS_BLOCKED) { /* a block, on a rule with bands */
        sluice__blocked_verdict(n[1], n[3], 0, v);
        return TRUE;
    }
    if (count == 4 && n[0] == 0 && n[1] == SLUICE__REDIS_BLOCKED) { /* a block */
        sluice__blocked_verdict(c->capacity, n[3], 0, v);
        return TRUE;
    }
    if (count == 8) { /* bands: every field */
        v->allowed = n[0] != 0;
        v->limit = n[1];
        v->remaining = MAX(0, n[2]); /* a penalty, or a lower limit, may pass it */
        v->retry_after_us = n[3];
        v->reset_after_us = n[4];
        v->wait_us = n[5];
        v->leased = n[6];
        /* the bands that refused; admitted, only shadow bands can have */
        v->refused = (guint)n[7];
        v->shadow_denied = v->allowed && v->refused != 0;
        return TRUE;
    }
    v->allowed = n[0] != 0;
    v->limit = c->capacity;
    v->remaining = MAX(0, n[1]); /* a penalty, or a lower limit, may pass it */
    v->reset_after_us = n[2];
    if (v->allowed) {
        if (count == 5) {
            v->wait_us = n[3];
            v->leased = n[4];
        }
        return TRUE;
    }
    v->retry_after_us = c->permits > c->capacity ? -1 : n[3]; /* never, whatever the state */
    /* what ages the denial: gcra tat - now (µs, 1/limit-ths), token_bucket tokens and
     * now - last refill (µs, 1/limit-ths), sliding_window current, previous and
     * now - start; the common path leaves the fractions out (0) */
    gsize extra = count - 4;
    if ((c->algorithm == SLUICE__GCRA && extra >= 1) ||
        (c->algorithm == SLUICE__TOKEN_BUCKET && extra >= 2) ||
        (c->algorithm == SLUICE__SLIDING_WINDOW && extra == 3)) {
        v->aging = TRUE;
        for (gsize i = 0; i < extra; i++)
            v->state[i] = n[4 + i];
    }
    return TRUE;
}
