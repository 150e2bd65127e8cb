/* SPDX-License-Identifier: MIT */
/* slow_downstream: an adaptive limit (examples/slow_downstream.ini) protecting a
 * downstream whose capacity nobody told it. The downstream is a pool of slots (a
 * database's connections, a service's workers): each query holds one for a few
 * milliseconds, and queries that find none free wait in line. Many threads query it
 * as fast as they are let through; halfway the pool loses half its slots. Every
 * half second the program prints what went through, how long it took, and the
 * limit the latency set. With --baseline the same threads call the same body with
 * no limit: every query waits in the line. */
#include <stdio.h>
#include <stdlib.h>

#include <sluice/sluice.h>

static int hold_ms = 5;   /* how long a query holds a slot */
static gint stop;         /* atomic: the threads stop */
static gboolean baseline; /* the body is called without the limit */

/* ---- the downstream: slots, taken in order of arrival -------------------------- */

static struct {
    GMutex lock;
    GCond changed;
    int slots, busy;
    guint64 tickets, served;
} pool;

static void pool_resize(int slots)
{
    g_mutex_lock(&pool.lock);
    pool.slots = slots;
    g_cond_broadcast(&pool.changed);
    g_mutex_unlock(&pool.lock);
}

static void pool_query(void)
{
    g_mutex_lock(&pool.lock);
    guint64 ticket = pool.tickets++;
    while (ticket != pool.served || pool.busy >= pool.slots)
        g_cond_wait(&pool.changed, &pool.lock);
    pool.served++;
    pool.busy++;
    g_cond_broadcast(&pool.changed);
    g_mutex_unlock(&pool.lock);
    g_usleep(hold_ms * 1000); /* the query's own work */
    g_mutex_lock(&pool.lock);
    pool.busy--;
    g_cond_broadcast(&pool.changed);
    g_mutex_unlock(&pool.lock);
}

/* ---- the decorated query ---------------------------------------------------------- */

static int query_busy(int id)
{
    (void)id;
    g_usleep(2000); /* refused at once: back off a little, as a client would */
    return -1;
}

/* The limit times the body from its call to its return: its latency, waiting in the
 * downstream's line included, sets the limit. */
RATE_LIMITED_FUNCTION(int, query, (int id), (id), "db.query", query_busy, NULL)
{
    pool_query();
    return id;
}

/* ---- the callers and what they saw ----------------------------------------------- */

static GMutex seen_lock;
static GArray *latencies; /* gint64 µs of the queries that ran, this interval */
static guint refused;

static gpointer caller(gpointer data)
{
    int id = GPOINTER_TO_INT(data);
    while (!g_atomic_int_get(&stop)) {
        gint64 start = g_get_monotonic_time();
        int r = baseline ? SLUICE_BODY(query)(id) : query(id);
        gint64 took = g_get_monotonic_time() - start;
        g_mutex_lock(&seen_lock);
        if (r < 0)
            refused++;
        else
            g_array_append_val(latencies, took);
        g_mutex_unlock(&seen_lock);
    }
    return NULL;
}

static gint by_value(gconstpointer a, gconstpointer b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
    return x < y ? -1 : x > y;
}

/* Prints one interval's line and starts the next. */
static void report(double t, double interval_s)
{
    g_mutex_lock(&seen_lock);
    g_array_sort(latencies, by_value);
    guint n = latencies->len;
    double p50 = n ? g_array_index(latencies, gint64, n / 2) / 1000.0 : 0;
    double p99 = n ? g_array_index(latencies, gint64, n * 99 / 100) / 1000.0 : 0;
    guint no = refused;
    g_array_set_size(latencies, 0);
    refused = 0;
    g_mutex_unlock(&seen_lock);
    sluice_stats stats = {0};
    sluice_stats_get("db.query", &stats, NULL);
    g_mutex_lock(&pool.lock);
    int slots = pool.slots;
    g_mutex_unlock(&pool.lock);
    char limit[24] = "-";
    if (!baseline)
        g_snprintf(limit, sizeof limit, "%" G_GINT64_FORMAT, stats.adaptive_limit);
    printf("%5.1f  %5d  %10.0f  %5s  %9.0f  %9.0f  %6.1f  %6.1f\n", t, slots,
           slots * 1000.0 / hold_ms, limit, n / interval_s, no / interval_s, p50, p99);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *config = "examples/slow_downstream.ini";
    int callers = 64, seconds = 8, slots = 8;
    GOptionEntry entries[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &config, "The keyfile", "FILE"},
        {"callers", 'n', 0, G_OPTION_ARG_INT, &callers, "Threads querying (64)", "N"},
        {"slots", 0, 0, G_OPTION_ARG_INT, &slots, "The downstream's slots at first (8)", "N"},
        {"hold-ms", 0, 0, G_OPTION_ARG_INT, &hold_ms, "How long a query holds a slot (5)", "MS"},
        {"seconds", 's', 0, G_OPTION_ARG_INT, &seconds, "How long to run (8)", "S"},
        {"baseline", 'b', 0, G_OPTION_ARG_NONE, &baseline, "Query with no limit", NULL},
        G_OPTION_ENTRY_NULL};
    g_autoptr(GOptionContext) context = g_option_context_new(NULL);
    g_option_context_set_summary(context,
                                 "An adaptive limit protecting a downstream that loses half its "
                                 "slots halfway.");
    g_option_context_add_main_entries(context, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(context, &argc, &argv, &error) || callers < 1 || slots < 2 ||
        hold_ms < 1 || seconds < 1) {
        fprintf(stderr, "slow_downstream: %s\n", error ? error->message : "bad option value");
        return 2;
    }
    if (!sluice_init(config, &error)) {
        fprintf(stderr, "slow_downstream: %s\n", error->message);
        return 1;
    }
    g_mutex_init(&pool.lock);
    g_cond_init(&pool.changed);
    pool_resize(slots);
    latencies = g_array_new(FALSE, FALSE, sizeof(gint64));

    printf("    t  slots  capacity/s  limit  queries/s  refused/s  p50 ms  p99 ms\n");
    GThread **threads = g_new(GThread *, callers);
    for (int i = 0; i < callers; i++)
        threads[i] = g_thread_new("caller", caller, GINT_TO_POINTER(i));
    const double interval_s = 0.5;
    for (int tick = 1; tick <= seconds * 2; tick++) {
        g_usleep((gulong)(interval_s * G_USEC_PER_SEC));
        report(tick * interval_s, interval_s);
        if (tick == seconds) /* halfway: the downstream loses half its slots */
            pool_resize(slots / 2);
    }
    g_atomic_int_set(&stop, 1);
    for (int i = 0; i < callers; i++)
        g_thread_join(threads[i]);
    g_free(threads);
    g_array_unref(latencies);
    sluice_shutdown();
    return 0;
}
