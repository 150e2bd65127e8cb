/* SPDX-License-Identifier: MIT */
/* One script call of the redis backend: the command of a decision, written once in
 * RESP, and reading its reply. */
#ifndef SLUICE_REDIS_SCRIPT_H
#define SLUICE_REDIS_SCRIPT_H

#include <glib.h>
#include <hiredis/hiredis.h>

#include "algorithm.h"
#include "limiter.h"
#include "lua_scripts.h"

/* How a call names its script: the function of the library sluice loaded (Redis 7),
 * the script's SHA1 (EVALSHA), or its source (EVAL, after NOSCRIPT). */
typedef enum { SLUICE__REDIS_FCALL, SLUICE__REDIS_EVALSHA, SLUICE__REDIS_EVAL } sluice__redis_how;

/* Room for the command's head (`*N $5 FCALL $LEN NAME` or `... EVALSHA $40 SHA`). */
#define SLUICE__REDIS_CALL_HEAD 128
/* A call whose arguments fit this many bytes is written in the struct itself. */
#define SLUICE__REDIS_CALL_SMALL 512

/* The command of one decision:
 *   FCALL sluice_HASH_ALGORITHM_ENTRY | EVALSHA SHA | EVAL SOURCE, then NKEYS KEY...
 *   and the entry's ARGV (lua/prelude.lua and each algorithm's file say what it is).
 * The entry is chosen per rule: bands for a rule with bands; else decide, the common
 * path, whose constants (T = window / limit for token_bucket and gcra) are worked
 * out here, when the rule allows it (token_bucket and gcra: T a whole number of µs
 * and (burst + 1) * T <= 2^52; fixed_window: anchor = first_hit and Redis time),
 * exact otherwise. The state key (PREFIX{LEN:NAME:KEY}) and a band's
 * (`:band:LIMIT:WINDOW_US:BURST` after it, the same hash tag, so a band that stays
 * across a reload keeps its state) are written with the numbers straight into the
 * command: nothing is formatted but the digits, nothing allocated unless the
 * arguments pass SLUICE__REDIS_CALL_SMALL bytes. The time is passed only under a
 * virtual clock (tests, replay); else Redis TIME decides. */
typedef struct {
    sluice__algorithm algorithm;
    sluice__lua_entry entry;
    gint64 capacity, permits; /* what the reply is read with */
    gint64 t, reserve_us;     /* token_bucket and gcra's decide: T (µs), the reserve asked */
    gint64 window_us;         /* sliding_window's decide */
    const char *data;         /* the command, len bytes, once named (sluice__redis_call_use) */
    gsize len;
    gsize key_at, key_len; /* the state key, within the arguments (a Cluster's slot) */
    char *args;            /* NKEYS on, args_len bytes: in buf after the head's room, or big */
    gsize args_len;
    guint argc; /* the arguments' count, the head's not counted */
    char *big;  /* a long command's buffer, or NULL */
    char buf[SLUICE__REDIS_CALL_HEAD + SLUICE__REDIS_CALL_SMALL];
} sluice__redis_call;

/* The ops of a call beside "acquire" and "release" (which concurrency alone uses): a
 * key's policy, whose entries answer {1, 0, 0}. */
#define SLUICE__REDIS_OP_PENALIZE "penalize" /* take `permits` (sluice_penalize)      */
#define SLUICE__REDIS_OP_BLOCK    "block"    /* block for `permits` µs (sluice_block) */

/* The remaining of a reply that says the key is blocked (lua/prelude.lua's BLOCKED). */
#define SLUICE__REDIS_BLOCKED (-(G_GINT64_CONSTANT(1) << 53))

/* Writes the call of `permits` (0: a peek) of key under rule (the limiter's, or the
 * key's override; op: "acquire", "release", or a policy op above), the state key made
 * of prefix (the key prefix and the algorithm's tag) and the limiter's name tag. It
 * must not be moved or copied; sluice__redis_call_clear frees what it holds. */
void sluice__redis_call_init(sluice__redis_call *c, const sluice__rule *rule, const char *prefix,
                             gsize prefix_len, sluice__limiter *limiter, const char *key,
                             const char *op, gint64 permits, gint64 reserve_us);
/* Names the script how (FCALL, EVALSHA or EVAL): data and len are the command. */
void sluice__redis_call_use(sluice__redis_call *c, sluice__redis_how how);
void sluice__redis_call_clear(sluice__redis_call *c);

/* The state key of a band: the rule's state key and `:band:LIMIT:WINDOW_US:BURST`.
 * g_free it. */
char *sluice__redis_band_key(const char *state_key, const sluice__band *band);

/* TRUE when reply says the server does not have the script cached. */
gboolean sluice__redis_is_noscript(const redisReply *reply);
/* TRUE when reply says the server has no such function (a library flushed, or
 * replaced by another version's). */
gboolean sluice__redis_is_no_function(const redisReply *reply);
/* The ARGV of token_bucket's and gcra's decide (lua/token_bucket.lua, lua/gcra.lua) for
 * permits of a rule with T = t whole µs and burst, before the time: out[0..n), n
 * returned (gcra 2, token_bucket 3, or 4 with a reserve: its lim after the time). */
guint sluice__redis_decide_args(sluice__algorithm algorithm, gint64 t, gint64 burst, gint64 permits,
                                gint64 reserve_us, gint64 out[4]);

/* Reads a script's reply into *v (NULL: only checked): a rule's limit and capacity
 * from the call, the rest from the reply, a denial with what ages it; FALSE with a
 * reason (an error reply's text, or what was wrong with it) otherwise. */
gboolean sluice__redis_call_verdict(const sluice__redis_call *c, const redisReply *reply,
                                    sluice__verdict *v, const char **why);

#endif
