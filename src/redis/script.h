/* SPDX-License-Identifier: MIT */
/* One script call of the redis backend: its EVALSHA arguments and reading its reply. */
#ifndef SLUICE_REDIS_SCRIPT_H
#define SLUICE_REDIS_SCRIPT_H

#include <glib.h>
#include <hiredis/hiredis.h>

#include "algorithm.h"

/* The arguments of a rule without bands (at most); each band adds up to two keys and
 * three numbers, and a rule with bands two numbers more. */
#define SLUICE__REDIS_SCRIPT_ARGC     13
#define SLUICE__REDIS_SCRIPT_ARGC_MAX (SLUICE__REDIS_SCRIPT_ARGC + 2 + 5 * SLUICE__MAX_BANDS)

/* `EVALSHA sha NKEYS KEY [SEQKEY] [BANDKEY [BANDSEQKEY]]... op limit window_us burst
 * anchor permits reserve_us now_us [bands shadow_bands [limit window_us burst]...]`
 * (anchor: 1 for fixed_window's anchor = epoch, else 0; now_us empty: Redis TIME
 * decides; set only under the test clock). A band's keys are the rule's with
 * `:band:LIMIT:WINDOW_US:BURST` after it (the same hash tag), so a band that stays
 * across a reload keeps its state. The seq keys are named for sliding_log and
 * concurrency only, the algorithms that write them: a call names no key it does not
 * use, so that on a Cluster a slot being migrated answers it with ASK or runs it, and
 * TRYAGAIN (some of its keys moved, not all) comes only from keys it really has. argv points into
 * the struct itself, so it must not be moved or copied; sluice__redis_script_clear frees what it
 * holds. */
typedef struct {
    int argc;
    char numbers[10 + 3 * SLUICE__MAX_BANDS][24];
    char *band_keys[2 * SLUICE__MAX_BANDS];
    const char *argv[SLUICE__REDIS_SCRIPT_ARGC_MAX];
} sluice__redis_script;

void sluice__redis_script_init(sluice__redis_script *s, const char *sha, const sluice__rule *rule,
                               const char *state_key, const char *seq_key, const char *op,
                               gint64 permits, gint64 reserve_us);
void sluice__redis_script_clear(sluice__redis_script *s);
/* The state key of a band: the rule's state key and `:band:LIMIT:WINDOW_US:BURST`;
 * its seq key adds `:seq`. g_free it. */
char *sluice__redis_band_key(const char *state_key, const sluice__band *band);
/* After NOSCRIPT: EVAL of the script's source instead, which also caches it. */
void sluice__redis_script_use_eval(sluice__redis_script *s, sluice__algorithm algorithm);

/* TRUE when reply says the server does not have the script cached. */
gboolean sluice__redis_is_noscript(const redisReply *reply);
/* Reads the 8 integers of a script's reply into *v; FALSE with a reason (an error
 * reply's text, or what was wrong with it) otherwise. */
gboolean sluice__redis_script_verdict(const redisReply *reply, sluice__verdict *v,
                                      const char **why);

#endif
