/* SPDX-License-Identifier: MIT */
/* The operations of the memory backend's benchmarks (bench_memory, bench_instructions):
 * each makes n calls and returns how many were admitted. */
#ifndef SLUICE_BENCH_MEMORY_OPS_H
#define SLUICE_BENCH_MEMORY_OPS_H

#include <glib.h>

#define MEMORY_OPS_KEYS 1000 /* rotating keys of the per-key operation */

/* n calls; `first`: where the per-key operation starts in its rotation of keys. */
typedef guint64 (*bench_op)(guint64 first, guint n);

guint64 memory_op_acquire(guint64 first, guint n);     /* sluice_acquire, fixed_window   */
guint64 memory_op_allowed_fn(guint64 first, guint n);  /* RATE_LIMITED_FUNCTION call     */
guint64 memory_op_keyed_guard(guint64 first, guint n); /* RATE_LIMITED_KEY, 1000 keys    */
/* the same on 1000 other keys, which only it decides: a thread that decides its share
 * first makes their states */
guint64 memory_op_keyed_guard_made(guint64 first, guint n);
guint64 memory_op_ideal(guint64 first, guint n);        /* a clock read and a CAS         */
guint64 memory_op_keyed_ideal(guint64 first, guint n);  /* a per-key store of one thread  */
guint64 memory_op_hot(guint64 first, guint n);          /* sluice_acquire, gcra, shared   */
guint64 memory_op_prefetch(guint64 first, guint n);     /* the same with prefetch = 100   */
guint64 memory_op_plain(guint64 first, guint n);        /* a plain call, undecorated      */
guint64 memory_op_norule_fn(guint64 first, guint n);    /* decorated, no rule             */
guint64 memory_op_norule_guard(guint64 first, guint n); /* guarded, no rule               */

/* The calling thread's share of the per-key operation's keys: the `index`th of `of`
 * equal runs of consecutive keys (by default, 0 of 1: all of them). */
void memory_ops_keys_share(guint index, guint of);

/* The operations by name, up to {NULL, NULL}. */
typedef struct {
    const char *name;
    bench_op op;
} memory_op;
extern const memory_op memory_ops[];

/* sluice_init on the operations' keyfile (memory backend; limits that never say no),
 * and the keys; FALSE and *error when it fails. */
gboolean memory_ops_init(GError **error);
/* sluice_shutdown, and the keys freed. */
void memory_ops_free(void);

#endif
