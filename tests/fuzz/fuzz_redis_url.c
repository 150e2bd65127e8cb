/* SPDX-License-Identifier: MIT */
/* libFuzzer harness of the `redis` URL parser: it never crashes or leaks, fills a
 * coherent result, and never repeats the password in its error. */
#include <string.h>

#include <glib.h>

#include "fuzz.h"
#include "redis/url.h"

/* A password no error sentence contains; `~` needs no escaping in a URL. */
#define SENTINEL "~PW~"

/* Parses url and checks the result; returns whether it parsed. */
static gboolean check(const char *url)
{
    sluice__redis_url out;
    char *why = NULL;
    if (!sluice__redis_url_parse(url, &out, &why)) {
        FUZZ_ASSERT(why && *why && g_utf8_validate(why, -1, NULL), "bad reason for %s", url);
        FUZZ_ASSERT(!strstr(why, SENTINEL) && !strstr(why, "%7EPW"), "password echoed: %s", why);
        FUZZ_ASSERT(!out.host && !out.socket && !out.user && !out.password && !out.addresses &&
                        !out.master,
                    "left over: %s", url);
        g_free(why);
        return FALSE;
    }
    FUZZ_ASSERT(why == NULL, "%s", url);
    FUZZ_ASSERT((out.host == NULL) != (out.socket == NULL), "host and socket: %s", url);
    FUZZ_ASSERT((out.n_addresses == 0) == (out.socket != NULL), "addresses: %s", url);
    FUZZ_ASSERT(out.topology != SLUICE__REDIS_SINGLE || out.n_addresses <= 1, "%s", url);
    for (guint i = 0; i < out.n_addresses; i++)
        FUZZ_ASSERT(*out.addresses[i].host && out.addresses[i].port >= 1 &&
                        out.addresses[i].port <= 65535,
                    "address %u: %s", i, url);
    FUZZ_ASSERT(!out.host ||
                    (out.host == out.addresses[0].host && out.port == out.addresses[0].port),
                "%s", url);
    FUZZ_ASSERT((out.master != NULL) == (out.topology == SLUICE__REDIS_SENTINEL), "master: %s",
                url);
    FUZZ_ASSERT(!out.master || *out.master, "empty master: %s", url);
    FUZZ_ASSERT(out.topology != SLUICE__REDIS_CLUSTER || out.db == 0, "cluster db: %s", url);
    FUZZ_ASSERT(!out.socket || (out.socket[0] == '/' && out.socket[1]), "%s", url);
    FUZZ_ASSERT(out.db >= 0, "%s", url);
    FUZZ_ASSERT(!out.user || *out.user, "empty user: %s", url);
    sluice__redis_url_clear(&out);
    FUZZ_ASSERT(!out.host && !out.socket && !out.password && !out.addresses && !out.master,
                "not cleared: %s", url);
    return TRUE;
}

/* Input: the URL (up to a NUL byte); it is also tried after a user and the
 * sentinel password, so that whatever follows the password can make it fail. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autofree char *url = g_strndup((const char *)data, size);
    check(url);
    static const char *const heads[] = {
        "redis://u:" SENTINEL,         "redis://:" SENTINEL,           "unix://u:" SENTINEL,
        "redis+cluster://u:" SENTINEL, "rediss+sentinel://:" SENTINEL, "rediss://u:" SENTINEL};
    for (gsize i = 0; i < G_N_ELEMENTS(heads); i++) {
        g_autofree char *with_password = g_strconcat(heads[i], url, NULL);
        check(with_password);
    }
    return 0;
}
