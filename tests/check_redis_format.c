/* SPDX-License-Identifier: MIT */
/* The RESP writer of the Redis client (src/redis_conn.c): byte for byte what hiredis
 * writes for the same arguments, its length asked for first, never past its buffer,
 * and the decimal digits of every int64 edge. */
#include "fixture.h"

#include <string.h>

#include "redis/resp.h"

static void check_decimal(gint64 v, const char *expected)
{
    char out[24];
    memset(out, 'x', sizeof out);
    gsize n = sluice__redis_decimal(out, v);
    ck_assert_uint_eq(n, strlen(expected));
    ck_assert(memcmp(out, expected, n) == 0);
    ck_assert_int_eq(out[n], 'x'); /* nothing written past the digits */
}

START_TEST(decimal_digits_of_the_int64_edges)
{
    check_decimal(0, "0");
    check_decimal(7, "7");
    check_decimal(10, "10");
    check_decimal(-1, "-1");
    check_decimal(1000000000000, "1000000000000");
    check_decimal(G_MAXINT64, "9223372036854775807");
    check_decimal(G_MININT64, "-9223372036854775808");
}
END_TEST

/* sluice__redis_format and hiredis' redisFormatCommandArgv agree on argv. */
static void check_same_as_hiredis(int argc, const char **argv)
{
    char *theirs = NULL;
    int len = redisFormatCommandArgv(&theirs, argc, argv, NULL);
    ck_assert_int_gt(len, 0);
    char none[1] = {'x'};
    gsize need = sluice__redis_format(none, 0, argc, argv);
    ck_assert_int_eq(none[0], 'x');
    ck_assert_uint_eq(need, (gsize)len);
    char *ours = g_malloc(need + 8);
    memset(ours, 'x', need + 8);
    ck_assert_uint_eq(sluice__redis_format(ours, need, argc, argv), need);
    ck_assert(memcmp(ours, theirs, need) == 0);
    ck_assert_int_eq(ours[need], 'x');
    /* one byte short: the length comes back, and nothing is written past the end */
    memset(ours, 'x', need + 8);
    ck_assert_uint_eq(sluice__redis_format(ours, need - 1, argc, argv), need);
    ck_assert_int_eq(ours[need - 1], 'x');
    g_free(ours);
    redisFreeCommand(theirs);
}

START_TEST(commands_are_written_as_hiredis_writes_them)
{
    const char *set[] = {"SET", "k", ""};
    check_same_as_hiredis(3, set);
    const char *ping[] = {"PING"};
    check_same_as_hiredis(1, ping);
    const char *evalsha[] = {"EVALSHA",
                             "8d536cca9e9bca5fb35069ca617fcec526573ea6",
                             "2",
                             "sluice:tb:{3:a b:%7B}",
                             "sluice:tb:{3:a b:%7B}:seq",
                             "acquire",
                             "1000000",
                             "1000000",
                             "1000000000000",
                             "1",
                             "1",
                             "0",
                             ""};
    check_same_as_hiredis(G_N_ELEMENTS(evalsha), evalsha);
    g_autofree char *big = g_strnfill(100000, 'z'); /* EVAL with a long source */
    const char *eval[] = {"EVAL", big, "0"};
    check_same_as_hiredis(3, eval);
    /* 12 arguments of every length from 0 to 11: every count of digits up to 2 */
    const char *many[12];
    char texts[12][12];
    for (int i = 0; i < 12; i++) {
        memset(texts[i], 'a' + i, (gsize)i);
        texts[i][i] = '\0';
        many[i] = texts[i];
    }
    check_same_as_hiredis(12, many);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redis_format");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, decimal_digits_of_the_int64_edges);
    tcase_add_test(tc, commands_are_written_as_hiredis_writes_them);
    suite_add_tcase(s, tc);
    return fixture_run(s);
}
