/* SPDX-License-Identifier: MIT */
/* bench_policy: what per-key policy costs a decision it does not concern: blocks
 * (sluice_block) on the memory backend, in a shared-memory zone (shm) and on Redis, next
 * to the same decisions with no block anywhere, and overrides in process (memory, shm),
 * next to a limit without them; each in the same run as its baseline.
 *
 * Blocks: for each algorithm, one thread calls sluice_acquire on KEYS keys of a limit
 * that never denies, in turn (concurrency: an acquire and its release). OTHER_KEYS other
 * keys of the same limit have a state too; in the rounds "blocked" they are blocked for
 * an hour, in the rounds "baseline" they are not (their blocks lifted, their states
 * kept), so the two differ by the blocks alone. A limit with per_key = false has no
 * other keys: its "blocked" rounds come after a block of the whole limit that has ended.
 * memory and shm (a zone of the run's own, removed after): ns per decision, the median
 * batch of BATCH calls of a round that lasts MEMORY_ROUND_NS. Redis (a redis-server
 * started on a free loopback port): the commands the scripts ran per decision and the
 * µs Redis spent in the scripts' calls per decision (INFO commandstats, reset before
 * each round), and the median round trip.
 *
 * Overrides: a fixed_window limit with OVERRIDES overrides next to the same limit
 * without, for keys without an override and keys with one, and next to the reference:
 * the limit without, each call followed by one g_hash_table_lookup of its key in a table
 * (a set) of its own copies of OVERRIDES keys.
 *
 * Rounds of a row and its baseline alternate; every figure is the median of its rounds.
 * Targets: on Redis exactly as many commands per decision, and the time per decision
 * within TARGET_PERCENT of the baseline's (overrides: of the reference's). It exits 0
 * whatever the figures are (a benchmark, not a test), 1 when sluice or Redis cannot be
 * set up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <sluice/sluice.h>

#include "redis_server.h"
#include "setup.h"
#include "timing.h"

#define ROUNDS          7    /* Redis rounds of each */
#define MEMORY_ROUNDS   15   /* memory rounds of each (shorter, and noisier) */
#define KEYS            1000 /* the keys decided, in turn, never blocked */
#define OTHER_KEYS      1000 /* the other keys of the limit, blocked or not */
#define BATCH           1024
#define MEMORY_ROUND_NS (100 * G_GINT64_CONSTANT(1000000))
#define REDIS_CALLS     3000 /* decisions a Redis round times */
#define TARGET_PERCENT  5.0
#define OVERRIDES       10000 /* the overrides of the limit "overridden" */

/* Limits that never deny; sliding_log's short window keeps its logs short. */
static const char rules[] =
    "[limit:fixed_window]\nalgorithm = fixed_window\nlimit = 1125899906842624\nwindow = 1h\n"
    "[limit:sliding_window]\nalgorithm = sliding_window\nlimit = 1000000000\n"
    "window = 1h\n"
    "[limit:token_bucket]\nalgorithm = token_bucket\nlimit = 1000000000000\nwindow = 1s\n"
    "[limit:gcra]\nalgorithm = gcra\nlimit = 1000000000000\nwindow = 1s\n"
    "[limit:sliding_log]\nalgorithm = sliding_log\nlimit = 100000\nwindow = 10ms\n"
    "[limit:concurrency]\nalgorithm = concurrency\nlimit = 100000\nwindow = 1h\n"
    "[limit:shared]\nalgorithm = gcra\nlimit = 1000000000000\nwindow = 1s\nper_key = false\n";

static const struct {
    const char *name, *label;
} limits[] = {
    {"fixed_window", "fixed_window"},    {"sliding_window", "sliding_window"},
    {"token_bucket", "token_bucket"},    {"gcra", "gcra"},
    {"sliding_log", "sliding_log"},      {"concurrency", "concurrency (acquire+release)"},
    {"shared", "gcra, per_key = false"},
};
#define LIMITS G_N_ELEMENTS(limits)

static char *keys[KEYS], *others[OTHER_KEYS], *overridden[OVERRIDES];

static gboolean per_key(guint l)
{
    return strcmp(limits[l].name, "shared") != 0;
}

/* Calls of a limit on keys in turn (concurrency: each with its release). */
typedef struct {
    const char *name;
    char *const *keys; /* KEYS of them */
    gboolean release;
} calls;

/* The i-th call of c. */
static void call(gconstpointer data, guint64 i)
{
    const calls *c = data;
    const char *key = c->keys[i % KEYS];
    if (sluice_acquire(c->name, key, 1, NULL, NULL) != SLUICE_ALLOWED) {
        fprintf(stderr, "bench_policy: %s %s was not allowed\n", c->name, key);
        exit(1);
    }
    if (c->release)
        sluice_release(c->name, key, 1);
}

/* The calls of limit l. */
static calls calls_of(guint l)
{
    return (calls){limits[l].name, keys, strcmp(limits[l].name, "concurrency") == 0};
}

/* The i-th decision on limit l. */
static void decide(guint l, guint64 i)
{
    calls c = calls_of(l);
    call(&c, i);
}

static void must(gboolean ok, GError **error)
{
    if (!ok) {
        fprintf(stderr, "bench_policy: %s\n", *error ? (*error)->message : "failed");
        exit(1);
    }
}

/* Blocks the other keys of limit l for an hour, or lifts their blocks; on a limit with
 * per_key = false, blocks the limit for 1 ms and waits until the block has ended. */
static void set_blocks(guint l, gboolean blocked)
{
    GError *error = NULL;
    if (!per_key(l)) {
        if (blocked) {
            must(sluice_block(limits[l].name, NULL, 1, &error), &error);
            g_usleep(2000);
        }
        return;
    }
    for (guint i = 0; i < OTHER_KEYS; i++)
        must(sluice_block(limits[l].name, others[i], blocked ? 3600000 : 0, &error), &error);
}

/* Every key decided once, the other keys too: each has its state before the rounds. */
static void lay_out(guint l)
{
    for (guint64 i = 0; i < KEYS; i++)
        decide(l, i);
    for (guint i = 0; per_key(l) && i < OTHER_KEYS; i++)
        if (sluice_acquire(limits[l].name, others[i], 1, NULL, NULL) == SLUICE_ALLOWED &&
            strcmp(limits[l].name, "concurrency") == 0)
            sluice_release(limits[l].name, others[i], 1);
}

/* ---- in process (memory, shm) ---------------------------------------------------------- */

/* ns per operation in the median batch of one round of op(data, i). */
static double timed_round(void (*op)(gconstpointer, guint64), gconstpointer data)
{
    GArray *batches = g_array_new(FALSE, FALSE, sizeof(guint32));
    guint64 n = 0;
    gint64 t0 = bench_now_ns(), t = t0, last;
    do {
        last = t;
        for (guint b = 0; b < BATCH; b++)
            op(data, n++);
        t = bench_now_ns();
        guint32 batch_ns = (guint32)MIN(t - last, G_MAXUINT32);
        g_array_append_val(batches, batch_ns);
    } while (t - t0 < MEMORY_ROUND_NS);
    bench_sort_u32((guint32 *)batches->data, batches->len);
    double ns = bench_quantile((guint32 *)batches->data, batches->len, 0.5) / (double)BATCH;
    g_array_free(batches, TRUE);
    return ns;
}

/* ns per decision in the median batch of one round on limit l. */
static double memory_round(guint l)
{
    calls c = calls_of(l);
    return timed_round(call, &c);
}

static const char *verdict(double base, double blocked)
{
    return blocked <= base * (1 + TARGET_PERCENT / 100) ? "PASS" : "MISS";
}

/* ---- overrides (in process) ------------------------------------------------------------ */

/* The rules, and two limits alike but for OVERRIDES overrides of one. */
static char *rules_with_overrides(void)
{
    GString *ini = g_string_new(rules);
    g_string_append(ini, "[limit:plain]\nalgorithm = fixed_window\nlimit = 1000000000000\n"
                         "window = 1h\n[limit:overridden]\nalgorithm = fixed_window\n"
                         "limit = 1000000000000\nwindow = 1h\n[override:overridden]\n");
    for (guint i = 0; i < OVERRIDES; i++)
        g_string_append_printf(ini, "%s = 2000000000000/1h\n", overridden[i]);
    return g_string_free(ini, FALSE);
}

static volatile gsize found; /* what the lookups found: kept, so that they are made */

/* The reference: calls of a limit without overrides, each with a lookup of its key in a
 * table of the overridden keys, as a decision on a limit with them makes. */
typedef struct {
    calls plain;
    GHashTable *table;
} with_lookup;

/* The i-th call of l, and its lookup. */
static void call_and_lookup(gconstpointer data, guint64 i)
{
    const with_lookup *l = data;
    call(&l->plain, i);
    found += g_hash_table_lookup(l->table, l->plain.keys[i % KEYS]) != NULL;
}

/* A decision on a limit with OVERRIDES overrides next to the same on a limit without,
 * for keys without one and with one, and next to the reference: the same limit
 * without, and one lookup in a table of as many keys. */
static void bench_overrides(const char *backend)
{
    /* the table's own copies of the keys, as any table has (a caller's key is never the
     * string the table holds); each its own value, the least a GHashTable keeps */
    GHashTable *table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (guint i = 0; i < OVERRIDES; i++)
        g_hash_table_add(table, g_strdup(overridden[i]));
    printf("\n%s backend, overrides: ns per decision of a fixed_window limit with %d "
           "overrides, next to\nthe same limit without (none) and without with a "
           "g_hash_table_lookup of the key in a table\nof copies of %d keys after each decision "
           "(none + lookup); median of %d rounds; the difference: the\nmedian of each "
           "round's overrides - none\n%-22s %8s %13s %10s %11s  %s\n",
           backend, OVERRIDES, OVERRIDES, MEMORY_ROUNDS, "keys decided", "none", "none + lookup",
           "overrides", "difference", "target");
    static const char *const rows[] = {"without an override", "each with its own"};
    for (guint row = 0; row < G_N_ELEMENTS(rows); row++) {
        char *const *which = row == 0 ? keys : overridden;
        calls plain = {"plain", which, FALSE}, with = {"overridden", which, FALSE};
        with_lookup ref = {plain, table};
        double p[MEMORY_ROUNDS], l[MEMORY_ROUNDS], w[MEMORY_ROUNDS], d[MEMORY_ROUNDS];
        double x[MEMORY_ROUNDS];
        timed_round(call, &plain); /* warm */
        timed_round(call, &with);
        for (guint r = 0; r < MEMORY_ROUNDS; r++) {
            p[r] = timed_round(call, &plain);
            l[r] = timed_round(call_and_lookup, &ref);
            w[r] = timed_round(call, &with);
            d[r] = w[r] - p[r];
            x[r] = w[r] / l[r];
        }
        printf("%-22s %8.1f %13.1f %10.1f %+8.1f ns  %s\n", rows[row],
               bench_median(p, MEMORY_ROUNDS), bench_median(l, MEMORY_ROUNDS),
               bench_median(w, MEMORY_ROUNDS), bench_median(d, MEMORY_ROUNDS),
               verdict(1, bench_median(x, MEMORY_ROUNDS)));
    }
    g_hash_table_destroy(table);
}

/* The rows decided in process, on backend "memory" or "shm" (a zone of this run's own,
 * removed after); only those of overrides when blocks is FALSE. */
static void bench_in_process(const char *backend, gboolean blocks)
{
    GError *error = NULL;
    gboolean shm = strcmp(backend, "shm") == 0;
    g_autofree char *zone = g_strdup_printf("bench-policy-%d", (int)getpid());
    g_autofree char *all = rules_with_overrides();
    g_autofree char *ini =
        shm ? g_strdup_printf("[sluice]\nbackend = shm\nshm = %s\nshm_size = 64M\n%s", zone, all)
            : g_strdup(all);
    must(bench_init(ini, &error), &error);
    if (blocks)
        printf("\n%s backend: ns per decision (the median batch of %d calls; median of %d "
               "rounds;\nthe difference: the median of each pair of rounds' ratio)\n"
               "%-30s %10s %10s %11s  %s\n",
               backend, BATCH, MEMORY_ROUNDS, "limit", "baseline", "blocked", "difference",
               "target");
    for (guint l = 0; blocks && l < LIMITS; l++) {
        double base[MEMORY_ROUNDS], blocked[MEMORY_ROUNDS], ratio[MEMORY_ROUNDS];
        lay_out(l);
        memory_round(l); /* warm */
        for (guint r = 0; r < MEMORY_ROUNDS; r++) {
            base[r] = memory_round(l);
            set_blocks(l, TRUE);
            blocked[r] = memory_round(l);
            set_blocks(l, FALSE);
            ratio[r] = blocked[r] / base[r];
        }
        double x = bench_median(ratio, MEMORY_ROUNDS);
        printf("%-30s %10.1f %10.1f %+10.1f%%  %s\n", limits[l].label,
               bench_median(base, MEMORY_ROUNDS), bench_median(blocked, MEMORY_ROUNDS),
               (x - 1) * 100, verdict(1, x));
    }
    bench_overrides(backend);
    sluice_shutdown();
    if (shm)
        must(sluice_zone_remove(zone, &error), &error);
}

/* ---- Redis ----------------------------------------------------------------------------- */

typedef struct {
    double commands;  /* the commands scripts ran, per decision       */
    double script_us; /* µs Redis spent in the scripts' calls, per decision */
    double p50_us;    /* the median round trip of a decision            */
} redis_figures;

static gboolean is_script_call(const char *name)
{
    return g_str_has_prefix(name, "fcall") || g_str_has_prefix(name, "evalsha") ||
           g_str_has_prefix(name, "eval");
}

/* The server's statistics since the last CONFIG RESETSTAT: the calls of commands run in
 * scripts, and the µs of the scripts' calls (the bench's own INFO and CONFIG left out). */
static void command_stats(test_redis *redis, gint64 *commands, double *script_us)
{
    redisReply *r = test_redis_command(redis, "INFO commandstats");
    if (!r || r->type != REDIS_REPLY_STRING) {
        fprintf(stderr, "bench_policy: INFO commandstats failed\n");
        exit(1);
    }
    *commands = 0;
    *script_us = 0;
    g_auto(GStrv) lines = g_strsplit(r->str, "\n", -1);
    freeReplyObject(r);
    for (guint i = 0; lines[i]; i++) { /* cmdstat_NAME:calls=N,usec=U,... */
        if (!g_str_has_prefix(lines[i], "cmdstat_"))
            continue;
        const char *name = lines[i] + strlen("cmdstat_");
        const char *n = strstr(name, ":calls="), *usec = strstr(name, ",usec=");
        if (!n || !usec || g_str_has_prefix(name, "info:") || g_str_has_prefix(name, "config"))
            continue;
        if (is_script_call(name))
            *script_us += g_ascii_strtod(usec + strlen(",usec="), NULL);
        else
            *commands += g_ascii_strtoll(n + strlen(":calls="), NULL, 10);
    }
}

static void redis_round(test_redis *redis, guint l, guint64 *next, redis_figures *f)
{
    freeReplyObject(test_redis_command(redis, "CONFIG RESETSTAT"));
    guint32 *trips = g_new(guint32, REDIS_CALLS);
    for (guint i = 0; i < REDIS_CALLS; i++) {
        gint64 t0 = bench_now_ns();
        decide(l, (*next)++);
        trips[i] = (guint32)MIN(bench_now_ns() - t0, G_MAXUINT32);
    }
    bench_sort_u32(trips, REDIS_CALLS);
    f->p50_us = bench_quantile(trips, REDIS_CALLS, 0.5) / 1e3;
    g_free(trips);
    gint64 commands;
    double script_us;
    command_stats(redis, &commands, &script_us);
    f->commands = (double)commands / REDIS_CALLS;
    f->script_us = script_us / REDIS_CALLS;
}

/* The median of a figure over the rounds, and of each pair of rounds' ratio. */
static void redis_medians(const redis_figures *base, const redis_figures *blocked, gsize at,
                          double *b, double *k, double *x)
{
    double bs[ROUNDS], ks[ROUNDS], xs[ROUNDS];
    for (guint r = 0; r < ROUNDS; r++) {
        bs[r] = *(const double *)((const char *)&base[r] + at);
        ks[r] = *(const double *)((const char *)&blocked[r] + at);
        xs[r] = ks[r] / bs[r];
    }
    *b = bench_median(bs, ROUNDS);
    *k = bench_median(ks, ROUNDS);
    *x = bench_median(xs, ROUNDS);
}

static void bench_redis(void)
{
    GError *error = NULL;
    test_redis *redis = test_redis_try_start(NULL, &error);
    must(redis != NULL, &error);
    g_autofree char *url = test_redis_url(redis);
    g_autofree char *ini =
        g_strdup_printf("[sluice]\nbackend = redis\nredis = %s\ntimeout = 2s\n%s", url, rules);
    must(bench_init(ini, &error), &error);
    printf("\nredis backend: the commands scripts ran and the µs Redis spent in the scripts' "
           "calls, per decision\n(INFO commandstats), and the median round trip; median of %d "
           "rounds of %d decisions;\nthe difference: the median of each pair of rounds' ratio\n"
           "%-30s %17s %25s %25s  %s\n",
           ROUNDS, REDIS_CALLS, "limit", "commands", "Redis µs", "round trip µs", "target");
    printf("%-30s %8s %8s %8s %8s %8s %8s %8s %8s\n", "", "baseline", "blocked", "baseline",
           "blocked", "diff", "baseline", "blocked", "diff");
    for (guint l = 0; l < LIMITS; l++) {
        redis_figures base[ROUNDS], blocked[ROUNDS];
        guint64 next = 0;
        lay_out(l);
        for (guint r = 0; r < ROUNDS; r++) {
            redis_round(redis, l, &next, &base[r]);
            set_blocks(l, TRUE);
            redis_round(redis, l, &next, &blocked[r]);
            set_blocks(l, FALSE);
        }
        double cb, ck, cx, ub, uk, ux, tb, tk, tx;
        redis_medians(base, blocked, G_STRUCT_OFFSET(redis_figures, commands), &cb, &ck, &cx);
        redis_medians(base, blocked, G_STRUCT_OFFSET(redis_figures, script_us), &ub, &uk, &ux);
        redis_medians(base, blocked, G_STRUCT_OFFSET(redis_figures, p50_us), &tb, &tk, &tx);
        gboolean pass = ck == cb && g_str_equal(verdict(1, ux), "PASS");
        printf("%-30s %8.2f %8.2f %8.2f %8.2f %+7.1f%% %8.1f %8.1f %+7.1f%%  %s\n", limits[l].label,
               cb, ck, ub, uk, (ux - 1) * 100, tb, tk, (tx - 1) * 100, pass ? "PASS" : "MISS");
    }
    sluice_shutdown();
    test_redis_stop(redis);
}

int main(int argc, char **argv)
{
    for (guint i = 0; i < KEYS; i++)
        keys[i] = g_strdup_printf("caller-%u", i);
    for (guint i = 0; i < OTHER_KEYS; i++)
        others[i] = g_strdup_printf("other-%u", i);
    for (guint i = 0; i < OVERRIDES; i++)
        overridden[i] = g_strdup_printf("partner-%u", i);
    /* "memory", "shm", "redis", or "overrides" (their rows on memory and shm) */
    const char *only = argc > 1 ? argv[1] : NULL;
    gboolean overrides = only && strcmp(only, "overrides") == 0;
    bench_print_version("memory, shm and redis");
    g_autofree char *load = bench_load_average();
    printf("What blocks cost a decision that is not blocked: %d keys decided in turn, with %d "
           "other keys\nof the limit not blocked (baseline) and blocked for an hour (blocked); "
           "per_key = false:\nafter a block of the limit that has ended. Load average: %s\n"
           "Target: as many Redis commands, and a time per decision within %.0f%% of the "
           "baseline's.\n",
           KEYS, OTHER_KEYS, load, TARGET_PERCENT);
    if (!only || overrides || strcmp(only, "memory") == 0)
        bench_in_process("memory", !overrides);
    if (!only || overrides || strcmp(only, "shm") == 0)
        bench_in_process("shm", !overrides);
    if (!only || strcmp(only, "redis") == 0)
        bench_redis();
    for (guint i = 0; i < KEYS; i++)
        g_free(keys[i]);
    for (guint i = 0; i < OTHER_KEYS; i++)
        g_free(others[i]);
    for (guint i = 0; i < OVERRIDES; i++)
        g_free(overridden[i]);
    return 0;
}
