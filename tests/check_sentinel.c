/* Redis Sentinel: the test fixture fails over, and sluice finds the master through it. */
#include "fixture.h"
#include "redis_sentinel.h"

#include <sluice/error.h>
#include <string.h>

#include "redis/sentinel.h"

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

/* ---- finding the master ---------------------------------------------------------------- */

static test_sentinel *shared; /* for the tests that leave it as it is */
static test_redis *rogue;     /* a Sentinel that watches the replica as the master */

static void start_shared(void)
{
    const test_sentinel_options options = {PASSWORD, SENTINEL_PASSWORD, 0};
    shared = test_sentinel_start(&options);
    g_autofree char *config = g_strdup_printf("sentinel monitor %s 127.0.0.1 %d 1\n"
                                              "sentinel auth-pass %s %s\nrequirepass %s\n",
                                              TEST_SENTINEL_MASTER, shared->node[1]->port,
                                              TEST_SENTINEL_MASTER, PASSWORD, SENTINEL_PASSWORD);
    rogue = test_redis_start_program("redis-sentinel", config, NULL);
}

static void stop_shared(void)
{
    test_redis_stop(rogue);
    test_sentinel_stop(shared);
}

/* A resolver for the Sentinels given (a test_redis each), with these passwords. */
static sluice__redis_sentinel *resolver(test_redis *const *sentinels, guint n,
                                        const char *sentinel_password, const char *name)
{
    const char *hosts[4];
    int ports[4];
    for (guint i = 0; i < n; i++) {
        hosts[i] = "127.0.0.1";
        ports[i] = sentinels[i]->port;
    }
    return sluice__redis_sentinel_new(hosts, ports, n, name ? name : TEST_SENTINEL_MASTER,
                                      sentinel_password, NULL, PASSWORD);
}

/* What resolve says: the port it found, or 0 and *message. */
static int resolve(sluice__redis_sentinel *r, gint64 step_us, char **message, int *code)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *host = NULL;
    int port = 0;
    if (sluice__redis_sentinel_resolve(r, step_us, &host, &port, &error)) {
        ck_assert_str_eq(host, "127.0.0.1");
        return port;
    }
    ck_assert_ptr_nonnull(error);
    if (message)
        *message = g_strdup(error->message);
    if (code)
        *code = error->code;
    return 0;
}

START_TEST(the_master_is_the_server_the_sentinels_name_and_that_says_master)
{
    sluice__redis_sentinel *r = resolver(shared->sentinel, 3, SENTINEL_PASSWORD, NULL);
    ck_assert_int_eq(resolve(r, 500000, NULL, NULL), shared->node[0]->port);
    sluice__redis_sentinel_free(r);
}
END_TEST

/* A Sentinel that does not answer costs its share of the time, then the next is
 * asked; the one that answered is asked first the next time. */
START_TEST(a_sentinel_that_does_not_answer_is_passed_over_in_its_time)
{
    sluice__redis_sentinel *r = resolver(shared->sentinel, 3, SENTINEL_PASSWORD, NULL);
    test_redis_pause(shared->sentinel[0]);
    gint64 start = g_get_monotonic_time();
    ck_assert_int_eq(resolve(r, 100000, NULL, NULL), shared->node[0]->port);
    gint64 took = g_get_monotonic_time() - start;
    ck_assert_int_ge(took, 100000);                                 /* Sentinel 0 timed out */
    ck_assert_int_lt(took, 200000 + 100000 * fixture_time_scale()); /* Sentinel 1 answered */
    start = g_get_monotonic_time();
    ck_assert_int_eq(resolve(r, 100000, NULL, NULL), shared->node[0]->port);
    ck_assert_int_lt(g_get_monotonic_time() - start, 100000 * fixture_time_scale());
    test_redis_resume(shared->sentinel[0]);
    sluice__redis_sentinel_free(r);
}
END_TEST

/* A Sentinel that names a replica (here one that watches it as the master) is
 * passed over: the replica says so when asked its ROLE. With no other Sentinel
 * there is no master, and the message says why. */
START_TEST(a_sentinel_that_names_a_replica_is_passed_over)
{
    test_redis *rogue_first[] = {rogue, shared->sentinel[1]};
    sluice__redis_sentinel *r = resolver(rogue_first, 2, SENTINEL_PASSWORD, NULL);
    ck_assert_int_eq(resolve(r, 500000, NULL, NULL), shared->node[0]->port);
    sluice__redis_sentinel_free(r);

    r = resolver(&rogue, 1, SENTINEL_PASSWORD, NULL);
    g_autofree char *message = NULL;
    ck_assert_int_eq(resolve(r, 500000, &message, NULL), 0);
    g_autofree char *expected = g_strdup_printf(
        "redis+sentinel master sluice: no Sentinel named a master: redis sentinel 127.0.0.1:%d "
        "named it: redis 127.0.0.1:%d: ROLE: says it is a slave, not the master",
        rogue->port, shared->node[1]->port);
    ck_assert_str_eq(message, expected);
    sluice__redis_sentinel_free(r);
}
END_TEST

START_TEST(a_wrong_sentinel_password_or_master_name_is_said)
{
    sluice__redis_sentinel *r = resolver(shared->sentinel, 1, "wrong", NULL);
    g_autofree char *message = NULL;
    int code = 0;
    ck_assert_int_eq(resolve(r, 500000, &message, &code), 0);
    ck_assert_int_eq(code, SLUICE_ERROR_AUTH);
    ck_assert_msg(strstr(message, "AUTH") && !strstr(message, "wrong"), "%s", message);
    sluice__redis_sentinel_free(r);

    r = resolver(shared->sentinel, 1, SENTINEL_PASSWORD, "nosuch");
    g_clear_pointer(&message, g_free);
    ck_assert_int_eq(resolve(r, 500000, &message, &code), 0);
    ck_assert_int_eq(code, SLUICE_ERROR_BACKEND);
    g_autofree char *expected =
        g_strdup_printf("redis+sentinel master nosuch: no Sentinel named a master: redis sentinel "
                        "127.0.0.1:%d: watches no master called nosuch",
                        shared->sentinel[0]->port);
    ck_assert_str_eq(message, expected);
    sluice__redis_sentinel_free(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sentinel");
    TCase *fixture = tcase_create("fixture");
    tcase_set_timeout(fixture, 60);
    tcase_add_test(fixture, the_fixture_fails_over_when_the_master_dies);
    suite_add_tcase(s, fixture);

    TCase *resolving = tcase_create("resolve");
    tcase_set_timeout(resolving, 60);
    tcase_add_unchecked_fixture(resolving, start_shared, stop_shared);
    tcase_add_test(resolving, the_master_is_the_server_the_sentinels_name_and_that_says_master);
    tcase_add_test(resolving, a_sentinel_that_does_not_answer_is_passed_over_in_its_time);
    tcase_add_test(resolving, a_sentinel_that_names_a_replica_is_passed_over);
    tcase_add_test(resolving, a_wrong_sentinel_password_or_master_name_is_said);
    suite_add_tcase(s, resolving);
    return fixture_run(s);
}
