/* Redis Sentinel: the test fixture fails over, and sluice finds the master through it. */
#include "fixture.h"
#include "redis_sentinel.h"

#include <string.h>

#define PASSWORD          "data-pass"
#define SENTINEL_PASSWORD "sentinel-pass"

/* ---- the fixture ------------------------------------------------------------------ */

/* The fixture's master dies: the Sentinels say +switch-master to its replica, which
 * says it is the master, within a few seconds. */
START_TEST(the_fixture_fails_over_when_the_master_dies)
{
    const test_sentinel_options options = {PASSWORD, SENTINEL_PASSWORD, 0};
    test_sentinel *s = test_sentinel_start(&options);
    ck_assert_ptr_eq(test_sentinel_master(s, 5 * G_USEC_PER_SEC), s->node[0]);
    redisContext *sub = test_sentinel_subscribe(s, 0);

    gint64 killed = g_get_monotonic_time(), switched = 0;
    test_redis_kill(s->node[0]);
    test_redis *promoted = test_sentinel_wait_switch(s, sub, 20 * G_USEC_PER_SEC, &switched);
    ck_assert_ptr_eq(promoted, s->node[1]);
    g_printerr("check_sentinel: +switch-master %.2f s after the master died\n",
               (double)(switched - killed) / G_USEC_PER_SEC);
    /* the two other Sentinels learn it from the first's hello messages */
    ck_assert_ptr_eq(test_sentinel_master(s, 10 * G_USEC_PER_SEC), s->node[1]);
    redisFree(sub);
    test_sentinel_stop(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sentinel");
    TCase *fixture = tcase_create("fixture");
    tcase_set_timeout(fixture, 60);
    tcase_add_test(fixture, the_fixture_fails_over_when_the_master_dies);
    suite_add_tcase(s, fixture);
    return fixture_run(s);
}
