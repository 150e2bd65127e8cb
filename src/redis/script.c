/* One script call of the redis backend: its EVALSHA arguments and reading its reply. */
#include "redis/script.h"

#include "clock.h"
#include "lua_scripts.h"
#include "redis/resp.h"

void sluice__redis_script_init(sluice__redis_script *s, const char *sha, const sluice__rule *rule,
                               const char *state_key, const char *seq_key, const char *op,
                               gint64 permits, gint64 reserve_us)
{
    const gint64 values[] = {rule->limit, rule->window_us, rule->burst,
                             rule->epoch, permits,         reserve_us};
    for (guint i = 0; i < G_N_ELEMENTS(values); i++)
        s->numbers[i][sluice__redis_decimal(s->numbers[i], values[i])] = '\0';
    if (sluice__clock_injected()) /* a virtual clock (replay, tests): never in normal operation */
        s->numbers[6][sluice__redis_decimal(s->numbers[6], sluice__clock_now())] = '\0';
    else
        s->numbers[6][0] = '\0';
    const char *head[] = {"EVALSHA", sha, "2", state_key, seq_key, op};
    for (guint i = 0; i < G_N_ELEMENTS(head); i++)
        s->argv[i] = head[i];
    for (guint i = 0; i < 7; i++)
        s->argv[G_N_ELEMENTS(head) + i] = s->numbers[i];
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
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 7) {
        *why = "unexpected reply";
        return FALSE;
    }
    for (size_t i = 0; i < 7; i++) {
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
    }
    return TRUE;
}
