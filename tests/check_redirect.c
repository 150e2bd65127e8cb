/* SPDX-License-Identifier: MIT */
/* The Cluster redirect policy (src/redis/redirect.c) that the blocking and the
 * asynchronous client share: MOVED and ASK followed up to the hop limit, then a
 * pause; TRYAGAIN a pause; each pause counting hops afresh; ASKING for the one send
 * after an ASK; a pause that would end past the deadline failing the call instead. */
#include "fixture.h"

#include "redis/redirect.h"

#define TIME  (G_GINT64_CONSTANT(1000000)) /* time enough for any pause */
#define HOPS  SLUICE__REDIRECT_MAX_HOPS
#define PAUSE SLUICE__REDIRECT_PAUSE_US

/* The step after action, asserting what it says why. */
static sluice__redirect_step next(sluice__redirect *r, sluice__cluster_action action,
                                  gint64 time_left_us, const char *expected_why)
{
    const char *why = "unset";
    sluice__redirect_step step = sluice__redirect_next(r, action, time_left_us, &why);
    if (expected_why)
        ck_assert_str_eq(why, expected_why);
    else
        ck_assert_ptr_null(why);
    return step;
}

START_TEST(moved_is_followed_and_has_the_map_read_again)
{
    sluice__redirect r = {0};
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_RESEND, TIME, NULL), SLUICE__REDIRECT_SEND);
    ck_assert_int_eq(r.hops, 1);
    ck_assert(!r.asking);
    ck_assert(r.refresh);
}
END_TEST

START_TEST(ask_is_followed_after_asking_for_the_next_send_only)
{
    sluice__redirect r = {0};
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_ASKING, TIME, NULL), SLUICE__REDIRECT_SEND);
    ck_assert(r.asking);
    ck_assert(!r.refresh); /* ASK says nothing of the map */
    /* the ASK target sends it on with MOVED: that send goes without ASKING */
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_RESEND, TIME, NULL), SLUICE__REDIRECT_SEND);
    ck_assert(!r.asking);
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_ASKING, TIME, NULL), SLUICE__REDIRECT_SEND);
    ck_assert(r.asking);
    ck_assert_int_eq(r.hops, 3);
}
END_TEST

START_TEST(the_hop_limit_pauses_then_counts_afresh)
{
    sluice__redirect r = {0};
    for (int round = 0; round < 3; round++) {
        for (int i = 1; i < HOPS; i++) { /* MOVED and ASK alike count */
            sluice__cluster_action a = i % 2 ? SLUICE__CLUSTER_RESEND : SLUICE__CLUSTER_ASKING;
            ck_assert_int_eq(next(&r, a, TIME, NULL), SLUICE__REDIRECT_SEND);
            ck_assert_int_eq(r.hops, i);
        }
        /* the HOPS-th redirection is not followed: a pause, then the map's master */
        ck_assert_int_eq(next(&r, SLUICE__CLUSTER_ASKING, TIME, NULL), SLUICE__REDIRECT_PAUSE);
        ck_assert_int_eq(r.hops, 0);
        ck_assert(!r.asking);
    }
}
END_TEST

START_TEST(the_hop_limit_fails_the_call_when_no_pause_fits_before_the_deadline)
{
    sluice__redirect r = {0};
    for (int i = 1; i < HOPS; i++)
        ck_assert_int_eq(next(&r, SLUICE__CLUSTER_RESEND, TIME, NULL), SLUICE__REDIRECT_SEND);
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_RESEND, PAUSE,
                          "redirected again and again: "
                          "the slot keeps moving"),
                     SLUICE__REDIRECT_FAIL);
}
END_TEST

START_TEST(tryagain_pauses_and_counts_hops_afresh)
{
    sluice__redirect r = {0};
    for (int i = 1; i < HOPS; i++)
        ck_assert_int_eq(next(&r, SLUICE__CLUSTER_ASKING, TIME, NULL), SLUICE__REDIRECT_SEND);
    /* the ASK target answers TRYAGAIN (the slot half migrated): a pause, then the map's
     * master, without ASKING */
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_TRY_AGAIN, TIME, NULL), SLUICE__REDIRECT_PAUSE);
    ck_assert_int_eq(r.hops, 0);
    ck_assert(!r.asking);
    ck_assert(!r.refresh);
    /* so a whole count of redirections is followed after it */
    for (int i = 1; i < HOPS; i++)
        ck_assert_int_eq(next(&r, SLUICE__CLUSTER_ASKING, TIME, NULL), SLUICE__REDIRECT_SEND);
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_ASKING, TIME, NULL), SLUICE__REDIRECT_PAUSE);
}
END_TEST

START_TEST(tryagain_fails_with_its_reply_when_no_pause_fits_before_the_deadline)
{
    sluice__redirect r = {0};
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_TRY_AGAIN, PAUSE, NULL), SLUICE__REDIRECT_FAIL);
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_TRY_AGAIN, 0, NULL), SLUICE__REDIRECT_FAIL);
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_TRY_AGAIN, -1, NULL), SLUICE__REDIRECT_FAIL);
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_TRY_AGAIN, PAUSE + 1, NULL), SLUICE__REDIRECT_PAUSE);
}
END_TEST

START_TEST(other_refusals_fail_with_their_reply)
{
    sluice__redirect r = {0};
    ck_assert_int_eq(next(&r, SLUICE__CLUSTER_FAIL, TIME, NULL), SLUICE__REDIRECT_FAIL);
    ck_assert_int_eq(r.hops, 0);
    ck_assert(!r.refresh);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redirect");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, moved_is_followed_and_has_the_map_read_again);
    tcase_add_test(tc, ask_is_followed_after_asking_for_the_next_send_only);
    tcase_add_test(tc, the_hop_limit_pauses_then_counts_afresh);
    tcase_add_test(tc, the_hop_limit_fails_the_call_when_no_pause_fits_before_the_deadline);
    tcase_add_test(tc, tryagain_pauses_and_counts_hops_afresh);
    tcase_add_test(tc, tryagain_fails_with_its_reply_when_no_pause_fits_before_the_deadline);
    tcase_add_test(tc, other_refusals_fail_with_their_reply);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
