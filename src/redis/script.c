/* SPDX-License-Identifier: MIT */
/* One script call of the redis backend: its EVALSHA arguments and reading its reply. */
#include "redis/script.h"

#include "clock.h"
#include "lua_scripts.h"
#include "redis/resp.h"

char *sluice__redis_band_key(const char *state_key, const sluice__band *band)
{
    return g_strdup_printf("%s:band:%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT ":%" G_GINT64_FORMAT,
                           state_key, band->limit, band->window_us, band->burst);
}

static const char *decimal(sluice__redis_script *s, guint i, gint64 value)
{
    s->numbers[i][sluice__redis_decimal(s->numbers[i], value)] = '\0';
    return s->numbers[i];
}

void sluice__redis_script_init(sluice__redis_script *s, const char *sha, const sluice__rule *rule,
                               const char *state_key, const char *seq_key, const char *op,
                               gint64 permits, gint64 reserve_us)
{
    guint bands = rule->n_bands + rule->n_shadow, n = 0, k = 0;
    /* only these write a seq key; the others name none (see script.h) */
    gboolean seq = rule->algorithm == SLUICE__SLIDING_LOG || rule->algorithm == SLUICE__CONCURRENCY;
    gint64 per_band = seq ? 2 : 1;
    s->argv[n++] = "EVALSHA";
    s->argv[n++] = sha;
    s->argv[n++] = decimal(s, k++, per_band * (1 + (gint64)bands));
    s->argv[n++] = state_key;
    if (seq)
        s->argv[n++] = seq_key;
    for (guint i = 0; i < bands; i++) {
        const sluice__band *b = &rule->bands[i];
        s->band_keys[2 * i] = sluice__redis_band_key(state_key, b);
        s->argv[n++] = s->band_keys[2 * i];
        s->band_keys[2 * i + 1] = seq ? g_strconcat(s->band_keys[2 * i], ":seq", NULL) : NULL;
        if (seq)
            s->argv[n++] = s->band_keys[2 * i + 1];
    }
    s->argv[n++] = op;
    const gint64 values[] = {rule->limit, rule->window_us, rule->burst,
                             rule->epoch, permits,         reserve_us};
    for (guint i = 0; i < G_N_ELEMENTS(values); i++)
        s->argv[n++] = decimal(s, k++, values[i]);
    if (sluice__clock_injected()) /* a virtual clock (replay, tests): never in normal operation */
        s->argv[n++] = decimal(s, k++, sluice__clock_now());
    else
        s->argv[n++] = "";
    if (bands > 0) {
        s->argv[n++] = decimal(s, k++, rule->n_bands);
        s->argv[n++] = decimal(s, k++, rule->n_shadow);
        for (guint i = 0; i < bands; i++) {
            s->argv[n++] = decimal(s, k++, rule->bands[i].limit);
            s->argv[n++] = decimal(s, k++, rule->bands[i].window_us);
            s->argv[n++] = decimal(s, k++, rule->bands[i].burst);
        }
    }
    for (guint i = bands; i < G_N_ELEMENTS(s->band_keys) / 2; i++)
        s->band_keys[2 * i] = s->band_keys[2 * i + 1] = NULL;
    s->argc = (int)n;
}

void sluice__redis_script_clear(sluice__redis_script *s)
{
    for (guint i = 0; i < G_N_ELEMENTS(s->band_keys); i++)
        g_clear_pointer(&s->band_keys[i], g_free);
}

void sluice__redis_script_use_eval(sluice__redis_script *s, sluice__algorithm algorithm)
{
    s->argv[0] = "EVAL";
    s->argv[1] = sluice__lua_scripts[algorithm];
}

gboolean sluice__redis_is_noscript(const redisReply *reply)
{
    return reply->type == REDIS_REPLY_ERROR && g_str_has_prefix(reply->str, "NOSCRIPT");
}

gboolean sluice__redis_script_verdict(const redisReply *reply, sluice__verdict *v, const char **why)
{
    if (reply->type == REDIS_REPLY_ERROR) {
        *why = reply->str;
        return FALSE;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 8) {
        *why = "unexpected reply";
        return FALSE;
    }
    for (size_t i = 0; i < 8; i++) {
        if (reply->element[i]->type != REDIS_REPLY_INTEGER) {
            *why = "reply is not integers";
            return FALSE;
        }
    }
    if (v) {
        v->allowed = reply->element[0]->integer != 0;
        v->limit = reply->element[1]->integer;
        v->remaining = reply->element[2]->integer;
        v->retry_after_us = reply->element[3]->integer;
        v->reset_after_us = reply->element[4]->integer;
        v->wait_us = reply->element[5]->integer;
        v->leased = reply->element[6]->integer;
        /* the bands that refused; admitted, only shadow bands can have */
        v->refused = (guint)reply->element[7]->integer;
        v->shadow_denied = v->allowed && v->refused != 0;
        v->blocked = FALSE;
    }
    return TRUE;
}
