/* SPDX-License-Identifier: MIT */
/* A memory store's per-key states: a table of the keys that are active, in
 * stripes, each key with its own lock.
 *
 * A decision on a key that has a state finds it without a lock (the table is read
 * in a read section, src/memory/retire.h) and decides under the key's own lock, on
 * the key's own cache lines: threads deciding different keys share no lock and
 * write no line in common. A key's state is created only when it admits something,
 * under the lock of its stripe (one of SLUICE__KEYED_STRIPES, chosen by the key's
 * hash), which also guards the stripe's removals and sweeps; what they unlink is
 * retired, and freed once no read section can reach it. */
#ifndef SLUICE_MEMORY_KEYED_H
#define SLUICE_MEMORY_KEYED_H

#include <glib.h>

#include "algorithm.h"
#include "limiter.h"
#include "memory/hot.h" /* SLUICE__LINE */
#include "memory/lock.h"
#include "rule.h"

#define SLUICE__KEYED_STRIPES 16 /* a power of two */

typedef struct sluice__keyed_array sluice__keyed_array;

/* A stripe's writers' lock and counts: alone on its line. */
typedef struct {
    sluice__lock lock; /* inserts, removals and sweeps of the stripe's keys      */
    guint live;        /* with the lock: keys in the stripe's array               */
    guint used;        /* with the lock: slots that are not empty (keys, removed) */
    guint sweep_at;    /* with the lock: sweep when `live` reaches this           */
} __attribute__((aligned(SLUICE__LINE))) sluice__keyed_stripe;

typedef struct {
    /* what every decision reads, and seldom anything writes: a line of its own */
    struct {
        const sluice__rule *rule; /* atomic: the rule the states are laid out for
                                   * (NULL: none yet, or a reload lays them out) */
        sluice__keyed_array *arrays[SLUICE__KEYED_STRIPES]; /* atomic; NULL: empty */
    } __attribute__((aligned(SLUICE__LINE))) read;
    sluice__keyed_stripe stripes[SLUICE__KEYED_STRIPES];
} sluice__keyed;

/* Empty, laid out for no rule (when the store is made). */
void sluice__keyed_init(sluice__keyed *keyed);
/* Every state freed, and what was retired (no thread decides any more). */
void sluice__keyed_free(sluice__keyed *keyed);

/* Decides `permits` of key under the newest rule of limiter (rule when it has none;
 * rule is the key's, maybe an override, src/override.h), as sluice__decide does (a
 * key blocked by sluice_block is denied until the block ends): the clock is read
 * before any lock is taken, and read again when another decision on the key was made in between, so
 * that a key's decisions are in the order of their times. Keys back to full capacity are swept out
 * of a stripe once it has doubled since its last sweep, so memory follows the keys that are active,
 * not every key ever seen. FALSE (and nothing decided) when the states are not laid out for that
 * rule: sluice__memory_reshape, then again. */
gboolean sluice__keyed_decide(sluice__keyed *keyed, sluice__limiter *limiter,
                              const sluice__rule *rule, const char *key, gint64 permits,
                              gint64 reserve_us, sluice__verdict *verdict);

/* What sluice__keyed_change does to a key's states, under the key's lock: mine is
 * the key's rule (maybe an override), now_us and epoch_us the change's time. */
typedef void (*sluice__keyed_change_func)(const sluice__rule *mine, sluice__state *states,
                                          gint64 now_us, gint64 epoch_us, gpointer data);

/* Changes key's states under the newest rule of limiter, as sluice__keyed_decide
 * decides (rule: the caller's, found for the key), made fresh when it has none (a
 * block or a penalty keeps a state that no admission made). FALSE (and nothing
 * done) as sluice__keyed_decide. */
gboolean sluice__keyed_change(sluice__keyed *keyed, sluice__limiter *limiter,
                              const sluice__rule *rule, const char *key,
                              sluice__keyed_change_func change, gpointer data);

/* Gives back concurrency permits of key under rule (the caller's), when the states
 * keep state as rule does. FALSE (and nothing done) while a reload lays them out. */
gboolean sluice__keyed_release(sluice__keyed *keyed, const sluice__rule *rule, const char *key,
                               gint64 permits);

/* Forgets key's state. */
void sluice__keyed_reset(sluice__keyed *keyed, const char *key);

/* How many keys have a state. */
gsize sluice__keyed_count(sluice__keyed *keyed);

/* A reload's change (with the store's lock held, src/memory/reshape.c): decisions
 * wait (sluice__keyed_decide says FALSE) from sluice__keyed_unshape until
 * sluice__keyed_shape; in between, every key forgotten (sluice__keyed_clear), or
 * each key's states laid out anew (sluice__keyed_remap): `bands` says how many
 * states the key gets (0: its n states stay as they are), `move` fills them (out,
 * zeroed) from its n states old, which it leaves cleared. */
void sluice__keyed_unshape(sluice__keyed *keyed);
void sluice__keyed_shape(sluice__keyed *keyed, const sluice__rule *rule);
void sluice__keyed_clear(sluice__keyed *keyed);
typedef guint (*sluice__keyed_bands_func)(const char *key, guint n, gpointer data);
typedef void (*sluice__keyed_move_func)(const char *key, sluice__state *old, guint n,
                                        sluice__state *out, gpointer data);
void sluice__keyed_remap(sluice__keyed *keyed, sluice__keyed_bands_func bands,
                         sluice__keyed_move_func move, gpointer data);

/* fork(): takes the lock of every stripe, or lets them go (with the read sections
 * held off: sluice__retire_fork_lock). */
void sluice__keyed_fork_lock(sluice__keyed *keyed);
void sluice__keyed_fork_unlock(sluice__keyed *keyed);

#endif
