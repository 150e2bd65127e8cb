/* SPDX-License-Identifier: MIT */
/* The operations bench_memory times and bench_instructions counts: sluice's memory
 * backend deciding (by name, decorated, per key, on a hot limit, with prefetch), the
 * ideal exact shared limit, and a plain call next to decorated calls with no rule. */
#include "memory_ops.h"

#include <string.h>

#include <sluice/sluice.h>

#include "setup.h"

/* The keyfile the benchmark runs on, written to a temporary file. The limits are
 * so large (2^50 or 10^12 per second) that every decision is an admission. */
static const char keyfile[] = "# written by bench_memory: limits that never say no\n"
                              "[sluice]\n"
                              "backend = memory\n"
                              "\n"
                              "[limit:bench.allowed]\n"
                              "algorithm = fixed_window\n"
                              "limit = 1125899906842624\n"
                              "window = 1s\n"
                              "per_key = false\n"
                              "\n"
                              "[limit:bench.keyed]\n"
                              "algorithm = fixed_window\n"
                              "limit = 1125899906842624\n"
                              "window = 1s\n"
                              "per_key = true\n"
                              "\n"
                              "[limit:bench.hot]\n"
                              "algorithm = gcra\n"
                              "limit = 1000000000000\n"
                              "window = 1s\n"
                              "per_key = false\n"
                              "\n"
                              "[limit:bench.prefetch]\n"
                              "algorithm = gcra\n"
                              "limit = 1000000000000\n"
                              "window = 1s\n"
                              "per_key = false\n"
                              "prefetch = 100\n";

/* The side effect of the measured bodies: a volatile write on every call, so the
 * compiler can neither drop nor hoist one. */
static volatile gint64 sink;

/* Two sets of MEMORY_OPS_KEYS names: memory_op_keyed_guard's, then those of
 * memory_op_keyed_guard_made, which no other operation decides. */
static char *keys[2 * MEMORY_OPS_KEYS];
/* The calling thread's keys: keys[share_first .. share_first + share_len). */
static __thread guint share_first, share_len = MEMORY_OPS_KEYS;

void memory_ops_keys_share(guint index, guint of)
{
    share_len = MEMORY_OPS_KEYS / of;
    share_first = index * share_len;
}

/* ---- the decorated functions and their plain twin ----------------------------- */

/* Not inlined, not cloned, not analysed by the caller: every call is a real call. */
#if defined(__clang__)
#define BENCH_OPAQUE __attribute__((noinline))
#else
#define BENCH_OPAQUE __attribute__((noipa))
#endif

/* The degrade callback: 0 tells the loops that count that a call was not admitted. */
static int denied_int(int x)
{
    (void)x;
    return 0;
}

/* An allowed decision through the definition form. */
BENCH_OPAQUE int bench_allowed_fn(int x);
RATE_LIMITED_FUNCTION(int, bench_allowed_fn, (int x), (x), "bench.allowed", denied_int, NULL)
{
    (void)x;
    return 1;
}

/* An allowed decision through the guard form, with one of KEYS keys. */
BENCH_OPAQUE static int bench_keyed_guard(const char *key)
{
    RATE_LIMITED_KEY("bench.keyed", key, return 0);
    return 1;
}

/* The plain function: the body the decorated ones below share, undecorated. */
BENCH_OPAQUE static int bench_plain(int x)
{
    sink += x;
    return 1;
}

/* The same body, decorated (definition form) with a name the keyfile does not have. */
BENCH_OPAQUE int bench_norule_fn(int x);
RATE_LIMITED_FUNCTION(int, bench_norule_fn, (int x), (x), "bench.norule", denied_int, NULL)
{
    sink += x;
    return 1;
}

/* The same body, decorated (guard form) with a name the keyfile does not have. */
BENCH_OPAQUE static int bench_norule_guard(int x)
{
    RATE_LIMITED("bench.norule.guard", return 0);
    sink += x;
    return 1;
}

/* ---- operations: each makes n calls and returns how many were admitted --------- */

/* n calls of sluice_acquire(name, NULL, 1). */
static guint64 acquire_n(const char *name, guint n)
{
    guint64 admitted = 0;
    sluice_decision d;
    for (guint i = 0; i < n; i++)
        admitted += sluice_acquire(name, NULL, 1, &d, NULL) == SLUICE_ALLOWED;
    return admitted;
}

guint64 memory_op_acquire(guint64 first, guint n)
{
    (void)first;
    return acquire_n("bench.allowed", n);
}

/* An operation that makes n direct calls of fn(int) (not through a pointer, as a
 * program calls it) and counts those that returned 1. */
#define CALLS_OF(op, fn)                                                                           \
    guint64 op(guint64 first, guint n)                                                             \
    {                                                                                              \
        guint64 admitted = 0;                                                                      \
        (void)first;                                                                               \
        for (guint i = 0; i < n; i++)                                                              \
            admitted += (guint64)fn((int)i);                                                       \
        return admitted;                                                                           \
    }

CALLS_OF(memory_op_allowed_fn, bench_allowed_fn)
CALLS_OF(memory_op_plain, bench_plain)
CALLS_OF(memory_op_norule_fn, bench_norule_fn)
CALLS_OF(memory_op_norule_guard, bench_norule_guard)

/* n calls of bench_keyed_guard on the calling thread's share of the keys of set `set`. */
static guint64 keyed_guard_n(guint set, guint64 first, guint n)
{
    guint64 admitted = 0;
    char **mine = keys + set * MEMORY_OPS_KEYS + share_first;
    guint k = (guint)(first % share_len);
    for (guint i = 0; i < n; i++) {
        admitted += (guint64)bench_keyed_guard(mine[k]);
        if (++k == share_len)
            k = 0;
    }
    return admitted;
}

guint64 memory_op_keyed_guard(guint64 first, guint n)
{
    return keyed_guard_n(0, first, n);
}

guint64 memory_op_keyed_guard_made(guint64 first, guint n)
{
    return keyed_guard_n(1, first, n);
}

/* The ideal exact shared limit: what an exact hot gcra needs at least, one clock
 * read and one CAS of a shared word per decision (a theoretical arrival time in
 * 1/1024 µs, admitted while it is at most a second ahead). The clock is read once,
 * before the load: a CAS that fails because another thread moved the word retries
 * with the word it saw and the same time, as a decision made at that time would.
 * The clock is the one sluice decides by (sluice_clock_now), read as cheaply as
 * sluice reads it. */
static gint64 ideal_tat __attribute__((aligned(128)));

guint64 memory_op_ideal(guint64 first, guint n)
{
    guint64 admitted = 0;
    (void)first;
    for (guint i = 0; i < n; i++) {
        gint64 now = sluice_clock_now() << 10;
        gint64 tat = __atomic_load_n(&ideal_tat, __ATOMIC_RELAXED);
        for (;;) {
            gint64 next = MAX(tat, now) + 1;
            if (next - now > (G_GINT64_CONSTANT(1000000) << 10))
                break; /* denied: never, at this rate */
            /* on failure, tat is the word another thread wrote */
            if (__atomic_compare_exchange_n(&ideal_tat, &tat, next, FALSE, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED)) {
                admitted++;
                break;
            }
        }
    }
    return admitted;
}

/* The ideal per-key store: what an exact per-key fixed_window needs at least when
 * no two threads share a key, so that nothing is shared: a table of the thread's
 * own (the keys it has seen, each slot on a line of its own), the key's hash, its
 * slot found by linear probing and the key compared, a clock read and the window's
 * count updated. It stands for what the machine gives two threads that share
 * nothing: sluice's per-key row is measured against its ratio. */
#define IDEAL_SLOTS 4096 /* a power of two, over four times MEMORY_OPS_KEYS */

typedef struct {
    char *key; /* a copy; NULL: empty */
    gint64 window_start, count;
} __attribute__((aligned(64))) ideal_slot;

static void ideal_table_free(gpointer p)
{
    ideal_slot *table = p;
    for (guint i = 0; i < IDEAL_SLOTS; i++)
        g_free(table[i].key);
    g_aligned_free(table);
}

static GPrivate ideal_table = G_PRIVATE_INIT(ideal_table_free);

guint64 memory_op_keyed_ideal(guint64 first, guint n)
{
    ideal_slot *table = g_private_get(&ideal_table);
    if (!table) {
        table = g_aligned_alloc0(IDEAL_SLOTS, sizeof *table, 64);
        g_private_set(&ideal_table, table);
    }
    guint64 admitted = 0;
    char **mine = keys + share_first;
    guint k = (guint)(first % share_len);
    for (guint i = 0; i < n; i++) {
        const char *key = mine[k];
        guint slot = g_str_hash(key) & (IDEAL_SLOTS - 1);
        while (table[slot].key && strcmp(table[slot].key, key) != 0)
            slot = (slot + 1) & (IDEAL_SLOTS - 1);
        ideal_slot *state = &table[slot];
        if (!state->key)
            state->key = g_strdup(key);
        gint64 now = sluice_clock_now();
        if (now - state->window_start >= G_USEC_PER_SEC) { /* the limit's window, 1 s */
            state->window_start = now;
            state->count = 0;
        }
        if (state->count < G_GINT64_CONSTANT(1125899906842624)) { /* the limit, 2^50 */
            state->count++;
            admitted++;
        }
        if (++k == share_len)
            k = 0;
    }
    sink += (gint64)admitted;
    return admitted;
}

guint64 memory_op_hot(guint64 first, guint n)
{
    (void)first;
    return acquire_n("bench.hot", n);
}

guint64 memory_op_prefetch(guint64 first, guint n)
{
    (void)first;
    return acquire_n("bench.prefetch", n);
}

const memory_op memory_ops[] = {
    {"ideal", memory_op_ideal},
    {"acquire", memory_op_acquire},
    {"decorated", memory_op_allowed_fn},
    {"keyed", memory_op_keyed_guard},
    {"keyed-ideal", memory_op_keyed_ideal},
    {"hot", memory_op_hot},
    {"prefetch", memory_op_prefetch},
    {"plain", memory_op_plain},
    {"norule", memory_op_norule_fn},
    {"norule-guard", memory_op_norule_guard},
    {NULL, NULL},
};

gboolean memory_ops_init(GError **error)
{
    if (!bench_init(keyfile, error))
        return FALSE;
    for (guint i = 0; i < MEMORY_OPS_KEYS; i++) {
        keys[i] = g_strdup_printf("user-%04u", i);
        keys[MEMORY_OPS_KEYS + i] = g_strdup_printf("made-%04u", i);
    }
    return TRUE;
}

void memory_ops_free(void)
{
    sluice_shutdown();
    for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
        g_clear_pointer(&keys[i], g_free);
}
