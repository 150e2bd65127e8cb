/* SPDX-License-Identifier: MIT */
/* quickstart: decorated handlers limited by examples/quickstart.ini, called in a
 * loop; prints which calls ran their body and which the fallback answered. */
#include <stdio.h>
#include <stdlib.h>

#include <sluice/sluice.h>

struct request {
    const char *user;
    int id;
};

/* ---- the definition form: report.export, 5 per 10 s ---------------------------- */

static int export_busy(struct request *req)
{
    printf("  export #%d: degraded (busy, try later)\n", req->id);
    return 429;
}

RATE_LIMITED_FUNCTION(int, export_report, (struct request * req), (req), "report.export",
                      export_busy, NULL)
{
    printf("  export #%d: ran the body\n", req->id);
    return 200;
}

/* ---- the guard form with a key: login, per user -------------------------------- */

static int login(struct request *req)
{
    RATE_LIMITED_KEY("login", req->user, {
        printf("  login %s #%d: degraded (too many attempts)\n", req->user, req->id);
        return 429;
    });
    printf("  login %s #%d: ran the body\n", req->user, req->id);
    return 200;
}

/* ---- void and no parameters: cache.flush, 2 per second ------------------------- */

static int flushed, skipped;

static void flush_skipped(void)
{
    skipped++;
}

RATE_LIMITED_VOID_FUNCTION(flush_cache, (void), (), "cache.flush", flush_skipped, NULL)
{
    flushed++;
}

/* ---- a name the keyfile does not mention: never limited ------------------------- */

static int healthz(void)
{
    RATE_LIMITED("healthz", return 500);
    return 200;
}

int main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    const char *config = argc > 1 ? argv[1] : "examples/quickstart.ini";

    if (!sluice_init(config, &error)) {
        fprintf(stderr, "quickstart: %s\n", error->message);
        return 1;
    }
    printf("8 exports (limit 5 per 10s):\n");
    int ran = 0;
    for (int i = 1; i <= 8; i++)
        ran += export_report(&(struct request){"alice", i}) == 200;

    printf("5 logins each for alice and bob (gcra: 3 at once per user):\n");
    for (int i = 1; i <= 5; i++) {
        login(&(struct request){"alice", i});
        login(&(struct request){"bob", i});
    }

    for (int i = 0; i < 5; i++)
        flush_cache();
    printf("flush_cache called 5 times: %d flushed, %d skipped (limit 2 per second)\n", flushed,
           skipped);

    int healthy = 0;
    for (int i = 0; i < 100; i++)
        healthy += healthz() == 200;
    printf("healthz (no rule): %d of 100 ran\n", healthy);

    sluice_shutdown();
    /* exit status: 0 when every limit behaved as the keyfile says */
    return ran == 5 && flushed == 2 && skipped == 3 && healthy == 100 ? 0 : 1;
}
