/* SPDX-License-Identifier: MIT */
/* An application of the installed headers, valid C99, C11 and C++17: both decorating
 * forms and a call of each header's API against tests/header_standards.sh's keyfile
 * (every limit 1 per hour), then the error callback against its second keyfile, whose
 * Redis does not answer (as docs/api.md tells a program to test itself); exits 0 when
 * every call was decided as those keyfiles say. */
#include <sluice/sluice.h>

#include <stdio.h>
#include <string.h>

static int busy(int x)
{
    return -x;
}

RATE_LIMITED_FUNCTION(int, twice, (int x), (x), "consumer.twice", busy, NULL)
{
    return 2 * x;
}

static int failed(const GError *error, const sluice_decision *verdict, int x);
RATE_LIMITED_FUNCTION(int, thrice, (int x), (x), "consumer.thrice", busy, failed)
{
    return 3 * x;
}

static int failed(const GError *error, const sluice_decision *verdict, int x)
{
    (void)error;
    (void)verdict;
    return SLUICE_BODY(thrice)(x) + 1000;
}

static int flushed, skipped;

static void skip(void)
{
    skipped++;
}

RATE_LIMITED_VOID_FUNCTION(flush, (void), (), "consumer.flush", skip, NULL)
{
    flushed++;
}

static int login(const char *user)
{
    RATE_LIMITED_KEY("consumer.login", user, return 0);
    return 1;
}

static int healthz(void)
{
    RATE_LIMITED("consumer.healthz", return 0);
    return 1;
}

static int failures;
static int async_code = -2;

static void decided(GObject *source, GAsyncResult *result, gpointer data)
{
    (void)source;
    (void)data;
    async_code = sluice_acquire_finish(result, NULL, NULL);
}

static void expect(int got, int want, const char *what)
{
    if (got != want) {
        fprintf(stderr, "header_consumer: %s: %d, expected %d\n", what, got, want);
        failures++;
    }
}

int main(int argc, char **argv)
{
    GError *error = NULL;
    if (argc != 3 || !sluice_init(argv[1], &error)) {
        fprintf(stderr, "header_consumer: %s\n",
                error ? error->message : "usage: KEYFILE KEYFILE_OF_A_BACKEND_THAT_IS_DOWN");
        return 1;
    }
    expect(twice(1), 2, "first twice(1)");
    expect(twice(1), -1, "second twice(1)");
    expect(thrice(1), 3, "first thrice(1)");
    expect(thrice(1), -1, "second thrice(1)");
    flush();
    flush();
    flush();
    expect(flushed * 10 + skipped, 12, "flushed * 10 + skipped");
    expect(login("alice") + login("alice") + login("bob"), 2, "logins passed");
    expect(healthz(), 1, "healthz");
    sluice_decision d;
    expect(sluice_last_decision(&d), SLUICE_ALLOWED, "sluice_last_decision");
    expect(sluice_acquire("consumer.twice", NULL, 1, &d, &error), SLUICE_DENIED, "sluice_acquire");
    expect((int)d.limit, 1, "its limit");
    sluice_headers h;
    expect(sluice_headers_from_decision(&d, &h, &error), TRUE, "sluice_headers_from_decision");
    expect((int)h.n, 4, "headers of a denial");
    sluice_acquire_async("consumer.twice", NULL, 1, NULL, decided, NULL);
    while (async_code == -2)
        g_main_context_iteration(NULL, TRUE);
    expect(async_code, SLUICE_DENIED, "sluice_acquire_async");
    sluice_stats stats;
    expect(sluice_stats_get("consumer.twice", &stats, &error), TRUE, "sluice_stats_get");
    expect((int)stats.allowed, 1, "its permits allowed");
    g_free(sluice_stats_prometheus());
    expect(sluice_config_check(argv[1], &error), TRUE, "sluice_config_check");
    expect(sluice_reset("consumer.twice", NULL, &error), TRUE, "sluice_reset");
    expect(sluice_clock_now() > 0, 1, "sluice_clock_now");
#if SLUICE_CHECK_VERSION(1, 0, 0) || !SLUICE_CHECK_VERSION(1, 0, 0) /* usable by #if */
    expect(strcmp(sluice_version(), SLUICE_VERSION_STRING), 0, "sluice_version");
#endif
    sluice_shutdown();

    /* the limiter failing: the error callback answers, sluice_acquire says why */
    if (!sluice_init(argv[2], &error)) {
        fprintf(stderr, "header_consumer: %s\n", error->message);
        return 1;
    }
    expect(thrice(2), 1006, "thrice(2), the backend failing");
    expect(sluice_acquire("consumer.thrice", NULL, 1, &d, &error), SLUICE_FAILED,
           "sluice_acquire, the backend failing");
    expect(g_error_matches(error, SLUICE_ERROR, SLUICE_ERROR_BACKEND), 1, "its error");
    expect(d.allowed, TRUE, "its on_error verdict");
    g_clear_error(&error);
    sluice_shutdown();
    if (failures)
        return 1;
    printf("header_consumer: ok\n");
    return 0;
}
