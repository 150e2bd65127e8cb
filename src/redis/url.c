/* The `redis` keyfile value: redis://[user:password@]host[:port][/db] or
 * unix:///path.sock[?db=N], parsed with GUri. */
#include "redis/url.h"

#include <string.h>

#include "value.h"

#define EXPECTED "expected redis://[user:password@]host[:port][/db] or unix:///path.sock"

static gboolean refuse(char **why, const char *detail)
{
    *why = g_strdup_printf("%s; " EXPECTED, detail);
    return FALSE;
}

static gboolean parse_db(const char *text, int *db, char **why)
{
    gint64 v;
    g_autofree char *ignored = NULL;
    if (!sluice__parse_count(text, 0, G_MAXINT, &v, &ignored))
        return refuse(why, "the database is not a whole number");
    *db = (int)v;
    return TRUE;
}

gboolean sluice__redis_url_parse(const char *url, sluice__redis_url *out, char **why)
{
    g_autofree char *scheme = NULL, *user = NULL, *password = NULL, *host = NULL, *path = NULL,
                    *query = NULL;
    int port = -1;

    memset(out, 0, sizeof *out);
    if (!g_uri_split_with_user(url, G_URI_FLAGS_HAS_PASSWORD | G_URI_FLAGS_ENCODED, &scheme, &user,
                               &password, NULL, &host, &port, &path, &query, NULL, NULL))
        return refuse(why, "not a URL");
    if (!scheme || (strcmp(scheme, "redis") != 0 && strcmp(scheme, "unix") != 0))
        return refuse(why, "unknown scheme");

    if (query && !g_str_has_prefix(query, "db="))
        return refuse(why, "unknown query; only ?db=N");
    if (query && !parse_db(query + 3, &out->db, why))
        return FALSE;
    /* g_uri_unescape_string refuses %00 and bad escapes: NULL then */
    if (user && *user && !(out->user = g_uri_unescape_string(user, NULL)))
        return refuse(why, "the user holds %00 or a bad %-escape");
    if (password && !(out->password = g_uri_unescape_string(password, NULL))) {
        sluice__redis_url_clear(out);
        return refuse(why, "the password holds %00 or a bad %-escape");
    }

    if (strcmp(scheme, "unix") == 0) {
        if ((host && *host) || !path || path[0] != '/' || path[1] == '\0') {
            sluice__redis_url_clear(out);
            return refuse(why, "a unix socket needs an absolute path (unix:///path.sock)");
        }
        out->socket = g_uri_unescape_string(path, NULL);
        if (!out->socket) {
            sluice__redis_url_clear(out);
            return refuse(why, "the socket path holds %00 or a bad %-escape");
        }
        return TRUE;
    }
    if (!host || !*host) {
        sluice__redis_url_clear(out);
        return refuse(why, "no host");
    }
    if (port == 0) {
        sluice__redis_url_clear(out);
        return refuse(why, "port 0");
    }
    out->host = g_strdup(host);
    out->port = port > 0 ? port : 6379;
    if (path && *path && strcmp(path, "/") != 0 && !parse_db(path + 1, &out->db, why)) {
        sluice__redis_url_clear(out);
        return FALSE;
    }
    return TRUE;
}

void sluice__redis_url_clear(sluice__redis_url *url)
{
    g_free(url->host);
    g_free(url->socket);
    g_free(url->user);
    if (url->password)
        memset(url->password, 0, strlen(url->password));
    g_free(url->password);
    memset(url, 0, sizeof *url);
}
