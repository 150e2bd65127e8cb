/* SPDX-License-Identifier: MIT */
/* Stats and shadow mode: exact counters per limit and per decorated function, and
 * Prometheus text that a parser accepts. */
#include "fixture.h"
#include "testing.h"

#include <stdlib.h>
#include <string.h>

static void expect(const char *name, guint64 allowed, guint64 denied, guint64 shadow_denied,
                   guint64 errors, guint64 waited, guint64 degraded)
{
    sluice_stats s;
    g_autoptr(GError) error = NULL;
    ck_assert_msg(sluice_stats_get(name, &s, &error), "%s", error ? error->message : "");
    ck_assert_uint_eq(s.allowed, allowed);
    ck_assert_uint_eq(s.denied, denied);
    ck_assert_uint_eq(s.shadow_denied, shadow_denied);
    ck_assert_uint_eq(s.errors, errors);
    ck_assert_uint_eq(s.waited, waited);
    ck_assert_uint_eq(s.degraded, degraded);
}

static guint64 timed(const sluice_stats *s)
{
    guint64 n = 0;
    for (int i = 0; i < SLUICE_STATS_BUCKETS; i++)
        n += s->latency[i];
    return n;
}

START_TEST(test_counts_each_outcome)
{
    fixture_clock_start(1000000);
    fixture_init("[sluice]\non_error = deny\n"
                 "[limit:a]\nalgorithm = fixed_window\nlimit = 2\nwindow = 10s\n"
                 "[limit:s]\nalgorithm = fixed_window\nlimit = 1\nwindow = 10s\nmode = shadow\n"
                 "[limit:e]\nlimit = 5\nwindow = 10s\n"
                 "[limit:w]\nalgorithm = sliding_log\nlimit = 1\nwindow = 2s\nwait = 5s\n");
    sluice_decision d;
    for (int i = 0; i < 3; i++)
        sluice_acquire("a", NULL, 1, &d, NULL);
    expect("a", 2, 1, 0, 0, 0, 0);

    /* shadow: decided and counted, always allowed */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sluice_acquire("s", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    expect("s", 1, 0, 2, 0, 0, 0);

    sluice_testing_fail_backend(2, "down");
    for (int i = 0; i < 3; i++)
        sluice_acquire("e", NULL, 1, &d, NULL);
    expect("e", 1, 0, 0, 2, 0, 0);

    ck_assert_int_eq(sluice_acquire("w", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("w", NULL, 1, &d, NULL), SLUICE_ALLOWED); /* waits 2 s */
    expect("w", 2, 0, 0, 0, 1, 0);

    /* a name with no rule decides nothing; a name never seen has zero stats */
    ck_assert_int_eq(sluice_acquire("nothing", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    expect("nothing", 0, 0, 0, 0, 0, 0);
    sluice_shutdown();
}
END_TEST

START_TEST(test_histogram_times_every_decision_or_one_in_eight)
{
    fixture_init("[limit:h]\nalgorithm = fixed_window\nlimit = 100\nwindow = 1h\n");
    sluice_decision d;
    for (int i = 0; i < 16; i++)
        sluice_acquire("h", NULL, 1, &d, NULL);
    sluice_stats s;
    ck_assert(sluice_stats_get("h", &s, NULL));
    /* the memory backend times one decision in eight per thread; Redis all */
    ck_assert_uint_eq(timed(&s), fixture_on_redis() ? 16 : 2);
    ck_assert_uint_gt(s.latency_ns_sum, 0);
    if (fixture_on_redis()) /* a round trip takes more than 1 µs and less than 1 s */
        ck_assert_uint_eq(s.latency[0], 0);
    guint64 late = 0;
    for (int i = 21; i < SLUICE_STATS_BUCKETS; i++) /* above about one second */
        late += s.latency[i];
    ck_assert_uint_eq(late, 0);
    sluice_shutdown();
}
END_TEST

#define COUNTING_THREADS 12 /* more than the stripes a thread can have to itself */
#define COUNTING_CALLS   2000

static gpointer count_calls(gpointer name)
{
    sluice_decision d;
    for (int i = 0; i < COUNTING_CALLS; i++)
        sluice_acquire(name, NULL, 1, &d, NULL);
    return NULL;
}

static void count_in_threads(const char *name)
{
    GThread *threads[COUNTING_THREADS];
    for (int i = 0; i < COUNTING_THREADS; i++)
        threads[i] = g_thread_new("counting", count_calls, test_unconst(name));
    for (int i = 0; i < COUNTING_THREADS; i++)
        g_thread_join(threads[i]);
}

START_TEST(test_threads_beyond_the_stripes_and_after_others_exit_all_count)
{
    /* threads that count in a stripe of their own, threads that share one, and
     * threads that take the stripes of threads that exited: nothing is lost */
    fixture_init("[limit:many]\nalgorithm = fixed_window\nlimit = 30000\nwindow = 1h\n");
    count_in_threads("many");
    count_in_threads("many");
    guint64 calls = 2 * COUNTING_THREADS * COUNTING_CALLS;
    expect("many", 30000, calls - 30000, 0, 0, 0, 0);
    sluice_shutdown();
}
END_TEST

START_TEST(test_stats_survive_a_reload_and_reset_at_shutdown)
{
    g_autofree char *contents =
        fixture_contents("[limit:r]\nalgorithm = fixed_window\nlimit = 1\nwindow = 1h\n");
    g_autofree char *path = fixture_write_keyfile(contents);
    ck_assert(sluice_init(path, NULL));
    sluice_decision d;
    sluice_acquire("r", NULL, 1, &d, NULL);
    sluice_acquire("r", NULL, 1, &d, NULL);
    ck_assert(sluice_reload(NULL));
    expect("r", 1, 1, 0, 0, 0, 0);
    sluice_shutdown();

    g_autoptr(GError) error = NULL;
    sluice_stats s;
    ck_assert(!sluice_stats_get("r", &s, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED));
    ck_assert(sluice_init(path, NULL));
    expect("r", 0, 0, 0, 0, 0, 0);
    sluice_shutdown();
}
END_TEST

START_TEST(test_bad_arguments)
{
    fixture_init("");
    sluice_stats s;
    const char *bad[] = {NULL, "", "\xff\xfe"};
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        ck_assert(!sluice_stats_get(bad[i], &s, &error));
        ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT));
    }
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_stats_get("x", NULL, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT));
    sluice_shutdown();
}
END_TEST

/* ---- decorated functions --------------------------------------------------------------- */

static int busy(int x)
{
    return -x;
}

RATE_LIMITED_FUNCTION(int, work, (int x), (x), "work", busy, NULL)
{
    return x;
}

static int shadow_busy(void)
{
    return 0;
}

RATE_LIMITED_FUNCTION(int, watched, (void), (), "watched", shadow_busy, NULL)
{
    return 1;
}

static const sluice_descriptor *found;

static void find_descriptor(const sluice_descriptor *d, gboolean has_rule, gpointer function)
{
    (void)has_rule;
    if (g_strcmp0(d->function, function) == 0)
        found = d;
}

static void function_stats(const char *function, sluice_stats *out)
{
    found = NULL;
    sluice_descriptors_foreach(find_descriptor, test_unconst(function));
    ck_assert_ptr_nonnull(found);
    sluice_descriptor_stats(found, out);
}

START_TEST(test_decorated_calls_count_per_function_and_limit)
{
    fixture_clock_start(1000000);
    sluice_stats before;
    function_stats("work", &before); /* descriptors count for the whole process */
    fixture_init("[limit:work]\nalgorithm = fixed_window\nlimit = 2\nwindow = 10s\n"
                 "[limit:watched]\nalgorithm = fixed_window\nlimit = 1\nwindow = 10s\n"
                 "mode = shadow\n");
    int sum = 0;
    for (int i = 1; i <= 3; i++)
        sum += work(i);
    ck_assert_int_eq(sum, 1 + 2 - 3);
    sluice_stats s;
    function_stats("work", &s);
    ck_assert_uint_eq(s.allowed - before.allowed, 2);
    ck_assert_uint_eq(s.denied - before.denied, 1);
    ck_assert_uint_eq(s.degraded - before.degraded, 1);
    expect("work", 2, 1, 0, 0, 0, 1);

    /* an API call on the same name counts for the limit, not the function */
    sluice_decision d;
    sluice_acquire("work", NULL, 1, &d, NULL);
    expect("work", 2, 2, 0, 0, 0, 1);
    function_stats("work", &s);
    ck_assert_uint_eq(s.denied - before.denied, 1);

    /* shadow: the body always runs; the stats show what enforcing would have denied */
    int ran = 0;
    for (int i = 0; i < 4; i++)
        ran += watched();
    ck_assert_int_eq(ran, 4);
    expect("watched", 1, 0, 3, 0, 0, 0);
    sluice_shutdown();

    /* a function's stats are kept across sluice_shutdown and sluice_init */
    sluice_stats kept;
    function_stats("work", &kept);
    ck_assert_uint_eq(kept.allowed - before.allowed, 2);
    ck_assert_uint_eq(kept.denied - before.denied, 1);
    ck_assert_int_eq(work(4), 4); /* not initialized: not limited, not counted */
    fixture_init("[limit:work]\nalgorithm = fixed_window\nlimit = 2\nwindow = 10s\n");
    ck_assert_int_eq(work(5), 5);
    function_stats("work", &kept);
    ck_assert_uint_eq(kept.allowed - before.allowed, 3);
    ck_assert_uint_eq(kept.denied - before.denied, 1);
    sluice_shutdown();
}
END_TEST

/* ---- Prometheus text: a parser of the exposition format, version 0.0.4 ----------------- */

typedef struct {
    GHashTable *types;   /* metric family -> type */
    GHashTable *samples; /* "metric{labels}" -> value (as text) */
} exposition;

static gboolean is_metric_char(char c, gboolean first)
{
    return g_ascii_isalpha(c) || c == '_' || c == ':' || (!first && g_ascii_isdigit(c));
}

/* Parses `{name="value",...}` at *p; fails the test on bad syntax. */
static void parse_labels(const char **p)
{
    const char *s = *p;
    ck_assert_int_eq(*s, '{');
    s++;
    while (*s != '}') {
        ck_assert_msg(is_metric_char(*s, TRUE), "bad label name at %s", s);
        while (is_metric_char(*s, FALSE))
            s++;
        ck_assert_msg(s[0] == '=' && s[1] == '"', "expected =\" at %s", s);
        s += 2;
        while (*s != '"') {
            ck_assert_msg(*s != '\0' && *s != '\n', "unterminated label value");
            if (*s == '\\') {
                ck_assert_msg(s[1] == '\\' || s[1] == '"' || s[1] == 'n', "bad escape %s", s);
                s++;
            }
            s++;
        }
        s++;
        if (*s == ',')
            s++;
        else
            ck_assert_msg(*s == '}', "expected , or } at %s", s);
    }
    *p = s + 1;
}

/* The family a sample belongs to: a histogram's _bucket, _sum and _count are its. */
static char *family_of(GHashTable *types, const char *metric)
{
    const char *suffixes[] = {"_bucket", "_sum", "_count"};
    if (!g_hash_table_contains(types, metric))
        for (guint i = 0; i < G_N_ELEMENTS(suffixes); i++)
            if (g_str_has_suffix(metric, suffixes[i]))
                return g_strndup(metric, strlen(metric) - strlen(suffixes[i]));
    return g_strdup(metric);
}

static exposition parse(const char *text)
{
    exposition e = {g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free),
                    g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)};
    ck_assert(g_str_has_suffix(text, "\n"));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (guint i = 0; lines[i] && lines[i + 1]; i++) {
        const char *line = lines[i];
        if (g_str_has_prefix(line, "# TYPE ")) {
            g_auto(GStrv) f = g_strsplit(line + 7, " ", 2);
            ck_assert(f[0] && f[1]);
            ck_assert(!g_hash_table_contains(e.types, f[0]));
            g_hash_table_insert(e.types, g_strdup(f[0]), g_strdup(f[1]));
            continue;
        }
        if (g_str_has_prefix(line, "# HELP "))
            continue;
        ck_assert_msg(is_metric_char(*line, TRUE), "bad line: %s", line);
        const char *p = line;
        while (is_metric_char(*p, FALSE))
            p++;
        g_autofree char *metric = g_strndup(line, p - line);
        /* the family was declared before its samples */
        g_autofree char *family = family_of(e.types, metric);
        ck_assert_msg(g_hash_table_contains(e.types, family), "no TYPE for %s", metric);
        if (*p == '{')
            parse_labels(&p);
        ck_assert_msg(*p == ' ', "expected a space after %s", metric);
        char *end;
        g_ascii_strtod(p + 1, &end);
        ck_assert_msg(end != p + 1 && *end == '\0', "bad value in %s", line);
        g_autofree char *series = g_strndup(line, p - line);
        ck_assert_msg(!g_hash_table_contains(e.samples, series), "duplicate %s", series);
        g_hash_table_insert(e.samples, g_steal_pointer(&series), g_strdup(p + 1));
    }
    return e;
}

static const char *sample(const exposition *e, const char *series)
{
    const char *v = g_hash_table_lookup(e->samples, series);
    ck_assert_msg(v != NULL, "missing %s", series);
    return v;
}

RATE_LIMITED_FUNCTION(int, oddly_named, (void), (), "we\"ird\\na\nme", shadow_busy, NULL)
{
    return 1;
}

START_TEST(test_prometheus_text_parses_and_counts)
{
    fixture_clock_start(1000000);
    fixture_init("[limit:work]\nalgorithm = fixed_window\nlimit = 2\nwindow = 10s\n"
                 "[limit:api]\nalgorithm = fixed_window\nlimit = 1\nwindow = 10s\n");
    ck_assert_int_eq(oddly_named(), 1); /* no rule: not limited, not counted */
    sluice_decision d;
    for (int i = 0; i < 3; i++)
        sluice_acquire("api", NULL, 1, &d, NULL);
    for (int i = 0; i < 3; i++)
        work(i);

    g_autofree char *text = sluice_stats_prometheus();
    exposition e = parse(text);
    ck_assert_str_eq(g_hash_table_lookup(e.types, "sluice_decisions_total"), "counter");
    ck_assert_str_eq(g_hash_table_lookup(e.types, "sluice_decision_seconds"), "histogram");
    ck_assert_str_eq(sample(&e, "sluice_decisions_total{name=\"api\",outcome=\"allowed\"}"), "1");
    ck_assert_str_eq(sample(&e, "sluice_decisions_total{name=\"api\",outcome=\"denied\"}"), "2");
    ck_assert_str_eq(sample(&e, "sluice_decisions_total{name=\"work\",outcome=\"denied\"}"), "1");
    ck_assert_str_eq(sample(&e, "sluice_degraded_total{name=\"work\"}"), "1");
    ck_assert_str_eq(
        sample(&e, "sluice_decisions_total{name=\"we\\\"ird\\\\na\\nme\",outcome=\"allowed\"}"),
        "0");
    g_autofree char *site = g_strdup_printf("function=\"work\",site=\"%s:", __FILE__);
    gboolean function_found = FALSE;
    GHashTableIter it;
    gpointer series, value;
    g_hash_table_iter_init(&it, e.samples);
    while (g_hash_table_iter_next(&it, &series, &value))
        if (g_str_has_prefix(series, "sluice_function_degraded_total{name=\"work\",") &&
            strstr(series, site)) {
            ck_assert_str_eq(value, "1");
            function_found = TRUE;
        }
    ck_assert(function_found);

    /* the histogram: cumulative buckets, +Inf equal to _count */
    const char *names[] = {"api", "work"};
    for (guint n = 0; n < G_N_ELEMENTS(names); n++) {
        double previous = 0;
        for (int i = 0; i < SLUICE_STATS_BUCKETS - 1; i++) {
            g_autofree char *key =
                g_strdup_printf("sluice_decision_seconds_bucket{name=\"%s\",le=\"%.6f\"}", names[n],
                                (double)(1u << i) / 1e6);
            double v = g_ascii_strtod(sample(&e, key), NULL);
            ck_assert(v >= previous);
            previous = v;
        }
        g_autofree char *inf =
            g_strdup_printf("sluice_decision_seconds_bucket{name=\"%s\",le=\"+Inf\"}", names[n]);
        g_autofree char *count =
            g_strdup_printf("sluice_decision_seconds_count{name=\"%s\"}", names[n]);
        ck_assert_str_eq(sample(&e, inf), sample(&e, count));
        ck_assert(g_ascii_strtod(sample(&e, inf), NULL) >= previous);
        if (n == 0) /* the thread's first decision is always timed */
            ck_assert(g_ascii_strtod(sample(&e, count), NULL) >= 1);
    }
    g_hash_table_unref(e.types);
    g_hash_table_unref(e.samples);
    sluice_shutdown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("stats");
    tcase_add_test(tc, test_counts_each_outcome);
    tcase_add_test(tc, test_histogram_times_every_decision_or_one_in_eight);
    tcase_add_test(tc, test_threads_beyond_the_stripes_and_after_others_exit_all_count);
    tcase_add_test(tc, test_stats_survive_a_reload_and_reset_at_shutdown);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_decorated_calls_count_per_function_and_limit);
    tcase_add_test(tc, test_prometheus_text_parses_and_counts);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
