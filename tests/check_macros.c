/* SPDX-License-Identifier: MIT */
/* The decorators: guard and definition forms, keys, void and no-argument functions,
 * names with no rule, error callbacks, and concurrency released on return. */
#include "fixture.h"
#include "testing.h"

#include <string.h>

#include <glib/gstdio.h>

static const char *keyfile = "[limit:two]\n"
                             "algorithm = fixed_window\n"
                             "limit = 2\n"
                             "window = 10s\n"
                             "[limit:perkey]\n"
                             "algorithm = fixed_window\n"
                             "limit = 1\n"
                             "window = 10s\n"
                             "[limit:inflight]\n"
                             "algorithm = concurrency\n"
                             "limit = 1\n";

/* ---- the definition form ------------------------------------------------------- */

static int degraded;
static int busy(int x)
{
    degraded++;
    return -x;
}

RATE_LIMITED_FUNCTION(int, twice, (int x), (x), "two", busy, NULL)
{
    return x * 2;
}

START_TEST(definition_form_runs_body_until_the_limit_then_degrades)
{
    fixture_clock_start(1000000);
    fixture_init(keyfile);
    ck_assert_int_eq(twice(3), 6);
    ck_assert_int_eq(twice(4), 8);
    ck_assert_int_eq(twice(5), -5);
    ck_assert_int_eq(degraded, 1);
    fixture_clock_advance_ms(10000);
    ck_assert_int_eq(twice(6), 12);
    sluice_shutdown();
}
END_TEST

/* ---- void and no parameters ----------------------------------------------------- */

static int bodies, fallbacks;
static void no_op(void)
{
    fallbacks++;
}

RATE_LIMITED_VOID_FUNCTION(tick, (void), (), "two", no_op, NULL)
{
    bodies++;
}

START_TEST(void_function_without_parameters)
{
    fixture_clock_start(1000000);
    fixture_init(keyfile);
    for (int i = 0; i < 5; i++)
        tick();
    ck_assert_int_eq(bodies, 2);
    ck_assert_int_eq(fallbacks, 3);
    sluice_shutdown();
}
END_TEST

static int zero_args_busy(void)
{
    return -1;
}

RATE_LIMITED_FUNCTION(int, answer, (void), (), "two", zero_args_busy, NULL)
{
    return 42;
}

START_TEST(no_argument_function_with_result)
{
    fixture_clock_start(1000000);
    fixture_init(keyfile);
    ck_assert_int_eq(answer(), 42);
    ck_assert_int_eq(answer(), 42);
    ck_assert_int_eq(answer(), -1);
    sluice_shutdown();
}
END_TEST

/* ---- the guard forms -------------------------------------------------------------- */

static int guarded(void)
{
    RATE_LIMITED("two", return 0);
    return 1;
}

static int guarded_key(const char *user)
{
    RATE_LIMITED_KEY("perkey", user, return 0);
    return 1;
}

START_TEST(guard_form_runs_fallback_statement)
{
    fixture_clock_start(1000000);
    fixture_init(keyfile);
    ck_assert_int_eq(guarded(), 1);
    ck_assert_int_eq(guarded(), 1);
    ck_assert_int_eq(guarded(), 0);
    sluice_shutdown();
}
END_TEST

START_TEST(guard_with_key_limits_each_key_separately)
{
    fixture_clock_start(1000000);
    fixture_init(keyfile);
    ck_assert_int_eq(guarded_key("alice"), 1);
    ck_assert_int_eq(guarded_key("alice"), 0);
    ck_assert_int_eq(guarded_key("bob"), 1);
    ck_assert_int_eq(guarded_key("bob"), 0);
    sluice_shutdown();
}
END_TEST

/* ---- names with no rule, and no sluice_init ---------------------------------------- */

static int nobody(void)
{
    return 0;
}

RATE_LIMITED_FUNCTION(int, unlimited, (void), (), "no.such.rule", nobody, NULL)
{
    return 1;
}

static int unlimited_guard(void)
{
    RATE_LIMITED("no.such.guard", return 0);
    return 1;
}

START_TEST(name_with_no_rule_runs_the_body)
{
    fixture_init(keyfile);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(unlimited(), 1);
    sluice_shutdown();
}
END_TEST

/* The warnings that `function` is decorated with `name`, which has no rule. */
typedef struct {
    const char *name;
    const char *function;
    int logged;
} no_rule_said;

static void count_no_rule(const gchar *domain, GLogLevelFlags level, const gchar *message,
                          gpointer user_data)
{
    (void)domain;
    (void)level;
    no_rule_said *said = user_data;
    g_autofree char *name = g_strdup_printf("\"%s\", which has no rule", said->name);
    g_autofree char *function = g_strdup_printf("%s is decorated", said->function);
    if (strstr(message, name) && strstr(message, function))
        said->logged++;
}

/* Asserts that sluice_init and sluice_reload each log at WARNING that function is
 * decorated with name, which has no rule; then calls then() (unless NULL), which
 * logs it no more. */
static void ck_no_rule_said(const char *name, const char *function, int (*then)(void))
{
    no_rule_said said = {name, function, 0};
    guint handler = g_log_set_handler("sluice", G_LOG_LEVEL_WARNING, count_no_rule, &said);
    g_autofree char *path = fixture_write_keyfile(keyfile);
    g_autofree char *contents = fixture_contents(keyfile);
    ck_assert(g_file_set_contents(path, contents, -1, NULL));
    ck_assert(sluice_init(path, NULL));
    ck_assert_int_eq(said.logged, 1);
    ck_assert(sluice_reload(NULL));
    ck_assert_int_eq(said.logged, 2);
    if (then) {
        ck_assert_int_eq(then(), 1); /* not limited */
        ck_assert_int_eq(said.logged, 2);
    }
    g_log_remove_handler("sluice", handler);
    sluice_shutdown();
    g_unlink(path);
}

START_TEST(init_logs_each_decorated_name_that_has_no_rule)
{
    /* at WARNING, at init and at every reload */
    ck_no_rule_said("no.such.rule", "unlimited", NULL);
}
END_TEST

START_TEST(init_logs_a_guard_that_has_no_rule_before_its_first_call)
{
    /* the same, though the guard has not run yet; its first call says nothing more */
    ck_no_rule_said("no.such.guard", "unlimited_guard", unlimited_guard);
}
END_TEST

START_TEST(before_init_and_after_shutdown_bodies_run)
{
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(twice(1), 2);
    fixture_init(keyfile);
    sluice_shutdown();
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(twice(1), 2);
}
END_TEST

/* ---- descriptors listing --------------------------------------------------------------- */

static void collect(const sluice_descriptor *d, gboolean has_rule, gpointer user_data)
{
    GString *s = user_data;
    g_string_append_printf(s, "%s|%s|%s|%d;", d->name, d->function, has_rule ? "rule" : "none",
                           d->line > 0);
}

START_TEST(descriptors_are_listed_with_name_function_and_rule)
{
    fixture_init(keyfile);
    g_autoptr(GString) s = g_string_new(NULL);
    sluice_descriptors_foreach(collect, s);
    ck_assert_ptr_nonnull(strstr(s->str, "two|twice|rule|1;"));
    ck_assert_ptr_nonnull(strstr(s->str, "two|tick|rule|1;"));
    ck_assert_ptr_nonnull(strstr(s->str, "no.such.rule|unlimited|none|1;"));
    /* a guard registers before main too, before its first call */
    ck_assert_ptr_nonnull(strstr(s->str, "two|guarded|rule|1;"));
    ck_assert_ptr_nonnull(strstr(s->str, "no.such.guard|unlimited_guard|none|1;"));
    guarded();
    g_string_truncate(s, 0);
    sluice_descriptors_foreach(collect, s);
    ck_assert_ptr_nonnull(strstr(s->str, "two|guarded|rule|1;"));
    ck_assert_int_eq(unlimited_guard(), 1);
    sluice_shutdown();
}
END_TEST

/* ---- concurrency: released when the function returns --------------------------------- */

static int inner_result;

static int refuse(int depth)
{
    (void)depth;
    return -1;
}

RATE_LIMITED_FUNCTION(int, upload, (int depth), (depth), "inflight", refuse, NULL)
{
    /* while this call is in flight, a nested call is refused */
    if (depth == 0)
        inner_result = upload(1);
    return 1;
}

static int guarded_upload(void)
{
    RATE_LIMITED("inflight", return -1);
    return 1;
}

START_TEST(concurrency_permit_is_released_when_the_body_returns)
{
    fixture_clock_start(1000000);
    fixture_init(keyfile);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(upload(0), 1);
        ck_assert_int_eq(inner_result, -1);
    }
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(guarded_upload(), 1);
    sluice_decision d;
    ck_assert_int_eq(sluice_acquire("inflight", NULL, 0, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(d.remaining, 1);
    sluice_shutdown();
}
END_TEST

/* ---- the error callback ---------------------------------------------------------------- */

static int failed_calls;
static char last_error[128];
/* declared before the macro, defined after it: it may call the body */
static int on_failure(const GError *error, const sluice_decision *verdict, int x);

static int checked_busy(int x)
{
    (void)x;
    return -1;
}

RATE_LIMITED_FUNCTION(int, checked, (int x), (x), "two", checked_busy, on_failure)
{
    return x;
}

static int on_failure(const GError *error, const sluice_decision *verdict, int x)
{
    failed_calls++;
    g_strlcpy(last_error, error->message, sizeof last_error);
    return verdict->allowed ? SLUICE_BODY(checked)(x) : -100;
}

START_TEST(error_callback_gets_the_error_and_the_policy_verdict)
{
    fixture_clock_start(1000000);
    fixture_init("[sluice]\non_error = deny\n[limit:two]\nalgorithm = fixed_window\n"
                 "limit = 2\nwindow = 10s\n");
    sluice_testing_fail_backend(1, "redis went away");
    ck_assert_int_eq(checked(7), -100);
    ck_assert_int_eq(failed_calls, 1);
    ck_assert_str_eq(last_error, "redis went away");
    ck_assert_int_eq(checked(7), 7); /* the backend answers again */
    sluice_shutdown();

    fixture_init("[sluice]\non_error = allow\n[limit:two]\nalgorithm = fixed_window\n"
                 "limit = 2\nwindow = 10s\n");
    sluice_testing_fail_backend(1, "timeout");
    ck_assert_int_eq(checked(8), 8);
    ck_assert_int_eq(failed_calls, 2);
    sluice_shutdown();
}
END_TEST

START_TEST(without_error_callback_the_policy_decides)
{
    fixture_clock_start(1000000);
    fixture_init("[sluice]\non_error = deny\n[limit:two]\nalgorithm = fixed_window\n"
                 "limit = 2\nwindow = 10s\n");
    sluice_testing_fail_backend(2, "down");
    ck_assert_int_eq(twice(1), -1); /* degraded */
    ck_assert_int_eq(guarded(), 0);
    ck_assert_int_eq(twice(1), 2);
    sluice_shutdown();
    fixture_init("[sluice]\non_error = allow\n[limit:two]\nalgorithm = fixed_window\n"
                 "limit = 2\nwindow = 10s\n");
    sluice_testing_fail_backend(5, "down");
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(twice(1), 2);
    sluice_shutdown();
}
END_TEST

/* ---- the decision a fallback answers with ---------------------------------------- */

static sluice_decision seen;
static int seen_result;

static int remember(int answer)
{
    seen_result = sluice_last_decision(&seen);
    return answer;
}

static int guarded_remembering(const char *user)
{
    RATE_LIMITED_KEY("perkey", user, return remember(0));
    return remember(1);
}

static int degrade_remembering(int x)
{
    return remember(-x);
}

RATE_LIMITED_FUNCTION(int, doubled, (int x), (x), "two", degrade_remembering, NULL)
{
    return remember(x * 2);
}

static gpointer last_decision_of_a_new_thread(gpointer out)
{
    return GINT_TO_POINTER(sluice_last_decision(out));
}

START_TEST(fallbacks_and_bodies_see_the_decision_of_their_call)
{
    fixture_clock_start(1000000);
    fixture_init("[sluice]\non_error = deny\n"
                 "[limit:two]\nalgorithm = fixed_window\n"
                 "limit = 2\nwindow = 10s\n[limit:perkey]\nalgorithm = sliding_log\n"
                 "limit = 1\nwindow = 10s\n");
    /* the guard's body sees its admission, its fallback the denial */
    ck_assert_int_eq(guarded_remembering("alice"), 1);
    ck_assert_int_eq(seen_result, SLUICE_ALLOWED);
    ck_assert_decision(seen, TRUE, 1, 0, -1, 10000);
    fixture_clock_advance_ms(2500);
    ck_assert_int_eq(guarded_remembering("alice"), 0);
    ck_assert_int_eq(seen_result, SLUICE_DENIED);
    ck_assert_decision(seen, FALSE, 1, 0, 7500, 7500);
    /* the definition form's degrade function too */
    ck_assert_int_eq(doubled(1), 2);
    ck_assert_int_eq(doubled(2), 4);
    ck_assert_decision(seen, TRUE, 2, 0, -1, 10000);
    ck_assert_int_eq(doubled(3), -3);
    ck_assert_int_eq(seen_result, SLUICE_DENIED);
    ck_assert_decision(seen, FALSE, 2, 0, 10000, 10000);
    /* a name with no rule: not limited */
    ck_assert_int_eq(unlimited(), 1);
    sluice_decision d;
    ck_assert_int_eq(sluice_last_decision(&d), SLUICE_ALLOWED);
    ck_assert_decision(d, TRUE, G_MAXINT64, G_MAXINT64, -1, 0);
    /* a failing limiter: SLUICE_FAILED and the on_error verdict (deny) */
    sluice_testing_fail_backend(1, "down");
    ck_assert_int_eq(guarded_remembering("bob"), 0);
    ck_assert_int_eq(seen_result, SLUICE_FAILED);
    ck_assert_decision(seen, FALSE, 1, 0, -1, 0);
    /* each thread has its own: a new one has made no call */
    GThread *t = g_thread_new("fresh", last_decision_of_a_new_thread, &d);
    ck_assert_int_eq(GPOINTER_TO_INT(g_thread_join(t)), SLUICE_FAILED);
    ck_assert_decision(d, FALSE, 0, 0, -1, 0);
    sluice_shutdown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("macros");
    TCase *tc = tcase_create("forms");
    tcase_add_test(tc, definition_form_runs_body_until_the_limit_then_degrades);
    tcase_add_test(tc, void_function_without_parameters);
    tcase_add_test(tc, no_argument_function_with_result);
    tcase_add_test(tc, guard_form_runs_fallback_statement);
    tcase_add_test(tc, guard_with_key_limits_each_key_separately);
    tcase_add_test(tc, name_with_no_rule_runs_the_body);
    tcase_add_test(tc, init_logs_each_decorated_name_that_has_no_rule);
    tcase_add_test(tc, init_logs_a_guard_that_has_no_rule_before_its_first_call);
    tcase_add_test(tc, before_init_and_after_shutdown_bodies_run);
    tcase_add_test(tc, descriptors_are_listed_with_name_function_and_rule);
    tcase_add_test(tc, concurrency_permit_is_released_when_the_body_returns);
    tcase_add_test(tc, error_callback_gets_the_error_and_the_policy_verdict);
    tcase_add_test(tc, without_error_callback_the_policy_decides);
    tcase_add_test(tc, fallbacks_and_bodies_see_the_decision_of_their_call);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
