/* SPDX-License-Identifier: MIT */
/* sluice_headers_from_decision: which headers a decision gives, and their values at
 * every edge (no rule, never, 0 and 1 ms, rounding, caps, bad decisions). */
#include "fixture.h"

#include <string.h>

/* The headers as one string "Name: value\n..." in their order, for exact asserts. */
static char *render(const sluice_headers *h)
{
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < h->n; i++)
        g_string_append_printf(s, "%s: %s\n", h->header[i].name, h->header[i].value);
    return g_string_free(s, FALSE);
}

typedef struct {
    const char *what;
    sluice_decision decision;
    const char *headers;
} edge;

#define BIG G_MAXINT64

static const edge edges[] = {
    {"allowed: no Retry-After",
     {TRUE, 5, 4, -1, 10000, FALSE},
     "RateLimit-Limit: 5\n"
     "RateLimit-Remaining: 4\n"
     "RateLimit-Reset: 10\n"},
    {"denied: seconds rounded up",
     {FALSE, 5, 0, 7001, 9999, FALSE},
     "RateLimit-Limit: 5\n"
     "RateLimit-Remaining: 0\n"
     "RateLimit-Reset: 10\n"
     "Retry-After: 8\n"},
    {"a name with no rule: nothing", {TRUE, BIG, BIG, -1, 0, FALSE}, ""},
    {"refused before a rule decided (limit 0): nothing", {FALSE, 0, 0, -1, 0, FALSE}, ""},
    {"permits that can never pass: no Retry-After",
     {FALSE, 3, 3, -1, 0, FALSE},
     "RateLimit-Limit: 3\n"
     "RateLimit-Remaining: 3\n"
     "RateLimit-Reset: 0\n"},
    {"retry 0 ms: 0 s",
     {FALSE, 1, 0, 0, 0, FALSE},
     "RateLimit-Limit: 1\n"
     "RateLimit-Remaining: 0\n"
     "RateLimit-Reset: 0\n"
     "Retry-After: 0\n"},
    {"1 ms: 1 s",
     {FALSE, 1, 0, 1, 1, FALSE},
     "RateLimit-Limit: 1\n"
     "RateLimit-Remaining: 0\n"
     "RateLimit-Reset: 1\n"
     "Retry-After: 1\n"},
    {"1000 ms: 1 s, 1001 ms: 2 s",
     {FALSE, 1, 0, 1000, 1001, FALSE},
     "RateLimit-Limit: 1\n"
     "RateLimit-Remaining: 0\n"
     "RateLimit-Reset: 2\n"
     "Retry-After: 1\n"},
    {"allowed with a retry time: still no Retry-After",
     {TRUE, 2, 1, 500, 500, FALSE},
     "RateLimit-Limit: 2\n"
     "RateLimit-Remaining: 1\n"
     "RateLimit-Reset: 1\n"},
    {"seconds capped at 2^31",
     {FALSE, 1, 0, BIG, BIG, FALSE},
     "RateLimit-Limit: 1\n"
     "RateLimit-Remaining: 0\n"
     "RateLimit-Reset: 2147483648\n"
     "Retry-After: 2147483648\n"},
    {"2^31 s exactly, and 1 ms over 2^31 - 1 s",
     {FALSE, 1, 0, G_GINT64_CONSTANT(2147483648000), G_GINT64_CONSTANT(2147483647001), FALSE},
     "RateLimit-Limit: 1\n"
     "RateLimit-Remaining: 0\n"
     "RateLimit-Reset: 2147483648\n"
     "Retry-After: 2147483648\n"},
    {"just under the cap",
     {FALSE, 1, 0, G_GINT64_CONSTANT(2147483647000), 0, FALSE},
     "RateLimit-Limit: 1\n"
     "RateLimit-Remaining: 0\n"
     "RateLimit-Reset: 0\n"
     "Retry-After: 2147483647\n"},
    {"36500d, the longest window: capped",
     {FALSE, 1, 0, G_GINT64_CONSTANT(3153600000000), 0, FALSE},
     "RateLimit-Limit: 1\n"
     "RateLimit-Remaining: 0\n"
     "RateLimit-Reset: 0\n"
     "Retry-After: 2147483648\n"},
    {"counts capped at 10^15 - 1",
     {TRUE, G_GINT64_CONSTANT(1) << 50, (G_GINT64_CONSTANT(1) << 50) - 1, -1, 1, FALSE},
     "RateLimit-Limit: 999999999999999\n"
     "RateLimit-Remaining: 999999999999999\n"
     "RateLimit-Reset: 1\n"},
    {"10^15 - 1 exactly, and one under",
     {TRUE, G_GINT64_CONSTANT(999999999999999), G_GINT64_CONSTANT(999999999999998), -1, 0, FALSE},
     "RateLimit-Limit: 999999999999999\n"
     "RateLimit-Remaining: 999999999999998\n"
     "RateLimit-Reset: 0\n"},
    {"one below no rule is a limit",
     {TRUE, BIG - 1, BIG - 1, -1, 0, FALSE},
     "RateLimit-Limit: 999999999999999\n"
     "RateLimit-Remaining: 999999999999999\n"
     "RateLimit-Reset: 0\n"},
};

START_TEST(each_edge_value_gives_its_headers)
{
    const edge *e = &edges[_i];
    sluice_headers h;
    g_autoptr(GError) error = NULL;
    memset(&h, 0xAB, sizeof h);
    ck_assert_msg(sluice_headers_from_decision(&e->decision, &h, &error), "%s", e->what);
    ck_assert_ptr_null(error);
    g_autofree char *got = render(&h);
    ck_assert_msg(strcmp(got, e->headers) == 0, "%s: got\n%s", e->what, got);
    for (guint i = 0; i < h.n; i++)
        ck_assert_uint_lt(strlen(h.header[i].value), SLUICE_HEADER_VALUE_SIZE);
}
END_TEST

typedef struct {
    sluice_decision decision;
    const char *message;
} bad;

static const bad bads[] = {
    {{FALSE, -1, 0, -1, 0, FALSE}, "decision->limit is negative"},
    {{FALSE, 5, -1, -1, 0, FALSE}, "decision->remaining is negative"},
    {{TRUE, 5, 6, -1, 0, FALSE}, "decision->remaining is above decision->limit"},
    {{FALSE, 5, 0, -2, 0, FALSE}, "decision->retry_after_ms is below -1"},
    {{FALSE, 5, 0, G_MININT64, 0, FALSE}, "decision->retry_after_ms is below -1"},
    {{FALSE, 5, 0, 10, -1, FALSE}, "decision->reset_after_ms is negative"},
};

START_TEST(a_decision_sluice_never_gives_is_refused)
{
    sluice_headers h = {.n = 3};
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_headers_from_decision(&bads[_i].decision, &h, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT));
    ck_assert_str_eq(error->message, bads[_i].message);
    ck_assert_uint_eq(h.n, 0);
}
END_TEST

START_TEST(null_arguments_are_refused)
{
    sluice_headers h = {.n = 2};
    sluice_decision d = {TRUE, 1, 1, -1, 0, FALSE};
    g_autoptr(GError) error = NULL;
    ck_assert(!sluice_headers_from_decision(NULL, &h, &error));
    ck_assert_str_eq(error->message, "decision is NULL");
    ck_assert_uint_eq(h.n, 0);
    g_clear_error(&error);
    ck_assert(!sluice_headers_from_decision(&d, NULL, &error));
    ck_assert(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT));
    ck_assert_str_eq(error->message, "out is NULL");
    ck_assert(!sluice_headers_from_decision(NULL, NULL, NULL));
}
END_TEST

/* ---- decisions of real calls (injected clock: exact) -------------------------------- */

static char *headers_of(const sluice_decision *d)
{
    sluice_headers h;
    ck_assert(sluice_headers_from_decision(d, &h, NULL));
    return render(&h);
}

START_TEST(real_decisions_give_the_headers_a_client_can_trust)
{
    sluice_decision d;
    fixture_clock_start(1000000);
    fixture_init("[limit:log]\nalgorithm = sliding_log\nlimit = 2\nwindow = 10s\n"
                 "[limit:shadow]\nalgorithm = fixed_window\nlimit = 1\nwindow = 1m\n"
                 "mode = shadow\n");

    ck_assert_int_eq(sluice_acquire("log", "alice", 1, &d, NULL), SLUICE_ALLOWED);
    g_autofree char *first = headers_of(&d);
    ck_assert_str_eq(first, "RateLimit-Limit: 2\nRateLimit-Remaining: 1\nRateLimit-Reset: 10\n");

    fixture_clock_advance_ms(2500);
    ck_assert_int_eq(sluice_acquire("log", "alice", 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("log", "alice", 1, &d, NULL), SLUICE_DENIED);
    g_autofree char *denied = headers_of(&d);
    /* the first permit leaves the window 7.5 s from now: Retry-After rounds up to 8 */
    ck_assert_str_eq(denied, "RateLimit-Limit: 2\nRateLimit-Remaining: 0\nRateLimit-Reset: 10\n"
                             "Retry-After: 8\n");
    /* waiting Retry-After seconds is enough; one millisecond less is not */
    fixture_clock_advance_ms(7499);
    ck_assert_int_eq(sluice_acquire("log", "alice", 1, &d, NULL), SLUICE_DENIED);
    ck_assert_int_eq(d.retry_after_ms, 1);
    g_autofree char *last_ms = headers_of(&d);
    ck_assert_ptr_nonnull(strstr(last_ms, "Retry-After: 1\n"));
    fixture_clock_advance_ms(1);
    ck_assert_int_eq(sluice_acquire("log", "alice", 1, &d, NULL), SLUICE_ALLOWED);

    /* more than the capacity: never, so no Retry-After */
    ck_assert_int_eq(sluice_acquire("log", "bob", 3, &d, NULL), SLUICE_DENIED);
    g_autofree char *never = headers_of(&d);
    ck_assert_str_eq(never, "RateLimit-Limit: 2\nRateLimit-Remaining: 2\nRateLimit-Reset: 0\n");

    /* a name with no rule, and a call refused for its arguments: no headers */
    ck_assert_int_eq(sluice_acquire("nothing", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    g_autofree char *unlimited = headers_of(&d);
    ck_assert_str_eq(unlimited, "");
    ck_assert_int_eq(sluice_acquire("log", "", 1, &d, NULL), SLUICE_FAILED);
    g_autofree char *refused = headers_of(&d);
    ck_assert_str_eq(refused, "");

    /* shadow mode lets the call through: the counts show, Retry-After does not */
    ck_assert_int_eq(sluice_acquire("shadow", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    ck_assert_int_eq(sluice_acquire("shadow", NULL, 1, &d, NULL), SLUICE_ALLOWED);
    g_autofree char *shadow = headers_of(&d);
    ck_assert_str_eq(shadow, "RateLimit-Limit: 1\nRateLimit-Remaining: 0\nRateLimit-Reset: 60\n");
    sluice_shutdown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("headers");
    TCase *tc = tcase_create("headers");
    tcase_add_loop_test(tc, each_edge_value_gives_its_headers, 0, G_N_ELEMENTS(edges));
    tcase_add_loop_test(tc, a_decision_sluice_never_gives_is_refused, 0, G_N_ELEMENTS(bads));
    tcase_add_test(tc, null_arguments_are_refused);
    tcase_add_test(tc, real_decisions_give_the_headers_a_client_can_trust);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
