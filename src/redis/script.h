/* One script call of the redis backend: its EVALSHA arguments and reading its reply. */
#ifndef SLUICE_REDIS_SCRIPT_H
#define SLUICE_REDIS_SCRIPT_H

#include <glib.h>
#include <hiredis/hiredis.h>

#include "algorithm.h"

#define SLUICE__REDIS_SCRIPT_ARGC 13

/* `EVALSHA sha 2 KEY SEQKEY op limit window_us burst anchor permits reserve_us
 * now_us` (anchor: 1 for fixed_window's anchor = epoch, else 0; now_us empty: Redis TIME decides;
 * set only under the test clock). argv points into the struct itself, so it must not be moved or copied. */
typedef struct {
    char numbers[7][24];
    const char *argv[SLUICE__REDIS_SCRIPT_ARGC];
} sluice__redis_script;

void sluice__redis_script_init(sluice__redis_script *s, const char *sha, const sluice__rule *rule,
                               const char *state_key, const char *seq_key, const char *op,
                               gint64 permits, gint64 reserve_us);
/* After NOSCRIPT: EVAL of the script's source instead, which also caches it. */
void sluice__redis_script_use_eval(sluice__redis_script *s, sluice__algorithm algorithm);

/* TRUE when reply says the server does not have the script cached. */
gboolean sluice__redis_is_noscript(const redisReply *reply);
/* Reads the 7 integers of a script's reply into *v; FALSE with a reason (an error
 * reply's text, or what was wrong with it) otherwise. */
gboolean sluice__redis_script_verdict(const redisReply *reply, sluice__verdict *v,
                                      const char **why);

#endif
