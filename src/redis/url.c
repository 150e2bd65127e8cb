/* SPDX-License-Identifier: MIT */
/* The `redis` keyfile value: one server (redis://, unix://), a Redis Cluster
 * (redis+cluster://) or a Sentinel-managed master (redis+sentinel://), and their TLS
 * forms. GUri takes one host only, so the authority is split here (RFC 3986: it
 * ends at the first / ? or #, the user information at its last @) and each part
 * unescaped with GUri. */
#include "redis/url.h"

#include <string.h>

#include "secret.h"
#include "value.h"

typedef struct {
    const char *name;
    sluice__redis_topology topology;
    gboolean tls;
    int default_port;
    const char *form; /* what is expected, after "expected " */
} scheme;

static const scheme schemes[] = {
    {"redis", SLUICE__REDIS_SINGLE, FALSE, 6379,
     "redis://[user:password@]host[:port][/db] or unix:///path.sock"},
    {"unix", SLUICE__REDIS_SINGLE, FALSE, 0,
     "redis://[user:password@]host[:port][/db] or unix:///path.sock"},
    {"rediss", SLUICE__REDIS_SINGLE, TRUE, 6379, "rediss://[user:password@]host[:port][/db]"},
    {"redis+cluster", SLUICE__REDIS_CLUSTER, FALSE, 6379,
     "redis+cluster://[user:password@]host:port[,host:port...]"},
    {"rediss+cluster", SLUICE__REDIS_CLUSTER, TRUE, 6379,
     "rediss+cluster://[user:password@]host:port[,host:port...]"},
    {"redis+sentinel", SLUICE__REDIS_SENTINEL, FALSE, 26379,
     "redis+sentinel://[user:password@]host:port[,host:port...]/MASTER[?db=N]"},
    {"rediss+sentinel", SLUICE__REDIS_SENTINEL, TRUE, 26379,
     "rediss+sentinel://[user:password@]host:port[,host:port...]/MASTER[?db=N]"},
};

#define SCHEMES                                                                                    \
    "redis://, rediss://, unix://, redis+cluster://, rediss+cluster://, redis+sentinel:// or "     \
    "rediss+sentinel://"

/* Fails the parse: clears what out holds so far, and says why with what the
 * scheme expects. */
static gboolean refuse(sluice__redis_url *out, const scheme *s, char **why, const char *detail)
{
    sluice__redis_url_clear(out);
    *why = g_strdup_printf("%s; expected %s", detail, s->form);
    return FALSE;
}

static gboolean parse_db(const char *text, int *db)
{
    gint64 v;
    g_autofree char *ignored = NULL;
    if (!sluice__parse_count(text, 0, G_MAXINT, &v, &ignored))
        return FALSE;
    *db = (int)v;
    return TRUE;
}

/* text[0, len) unescaped, or NULL when it holds %00 or a bad %-escape. */
static char *unescape(const char *text, gsize len)
{
    return g_uri_unescape_segment(text, text + len, NULL);
}

/* A host name as DNS spells it (letters, digits, - . _), or an IPv4 address. */
static gboolean is_host_name(const char *host, gsize len)
{
    if (len == 0)
        return FALSE;
    for (gsize i = 0; i < len; i++)
        if (!g_ascii_isalnum(host[i]) && !strchr("-._", host[i]))
            return FALSE;
    return TRUE;
}

/* One host[:port] or [ipv6][:port] of the authority, text[0, len), into a. NULL,
 * or what is wrong with it. */
static const char *parse_address(const char *text, gsize len, int default_port,
                                 sluice__redis_address *a)
{
    const char *host = text, *colon;
    gsize host_len;
    if (len == 0)
        return "no host";
    if (text[0] == '[') {
        const char *close = memchr(text, ']', len);
        if (!close)
            return "an IPv6 address without its closing ]";
        host = text + 1;
        host_len = close - host;
        g_autofree char *v6 = g_strndup(host, host_len);
        if (!strchr(v6, ':') || !g_hostname_is_ip_address(v6))
            return "what stands in brackets is not an IPv6 address";
        colon = close + 1 < text + len ? close + 1 : NULL;
        if (colon && *colon != ':')
            return "an IPv6 address in brackets is followed by :port or nothing";
    } else {
        colon = memchr(text, ':', len);
        if (colon && memchr(colon + 1, ':', text + len - colon - 1))
            return "an IPv6 address goes in brackets, e.g. [::1]:6379";
        host_len = colon ? (gsize)(colon - text) : len;
        if (host_len == 0)
            return "no host";
        if (!is_host_name(host, host_len))
            return "the host is neither a host name nor an IP address";
    }
    a->port = default_port;
    if (colon) {
        const char *digits = colon + 1;
        gsize n = text + len - digits;
        gint64 port = 0;
        for (gsize i = 0; i < n && port <= 65535; i++)
            port = g_ascii_isdigit(digits[i]) ? port * 10 + (digits[i] - '0') : G_MAXINT64;
        if (n == 0 || port < 1 || port > 65535)
            return "the port is not a number from 1 to 65535";
        a->port = (int)port;
    }
    a->host = g_strndup(host, host_len);
    return NULL;
}

/* The user information, text[0, len): user[:password], both %-escaped. */
static const char *parse_user(const char *text, gsize len, sluice__redis_url *out)
{
    const char *colon = memchr(text, ':', len);
    gsize user_len = colon ? (gsize)(colon - text) : len;
    if (user_len > 0 && !(out->user = unescape(text, user_len)))
        return "the user holds %00 or a bad %-escape";
    if (colon && !(out->password = unescape(colon + 1, text + len - colon - 1)))
        return "the password holds %00 or a bad %-escape";
    return NULL;
}

/* The addresses of the authority, text[0, len), separated by commas. */
static const char *parse_addresses(const char *text, gsize len, const scheme *s,
                                   sluice__redis_url *out)
{
    guint n = 1;
    for (gsize i = 0; i < len; i++)
        n += text[i] == ',';
    if (n > 1 && s->topology == SLUICE__REDIS_SINGLE)
        return "more than one host; a Redis Cluster is redis+cluster://, Sentinels "
               "redis+sentinel://";
    out->addresses = g_new0(sluice__redis_address, n);
    for (const char *p = text, *end = text + len; p <= end; out->n_addresses++) {
        const char *comma = memchr(p, ',', end - p);
        const char *next = comma ? comma : end;
        const char *wrong =
            parse_address(p, next - p, s->default_port, &out->addresses[out->n_addresses]);
        if (wrong)
            return wrong;
        p = next + 1;
    }
    out->host = out->addresses[0].host;
    out->port = out->addresses[0].port;
    return NULL;
}

/* The path and query of each topology. */
static const char *parse_rest(const char *path, const char *query, const scheme *s,
                              sluice__redis_url *out)
{
    gboolean db_in_path = FALSE;
    if (query && !g_str_has_prefix(query, "db="))
        return "unknown query; only ?db=N";
    if (strcmp(s->name, "unix") == 0) {
        if (path[0] != '/' || path[1] == '\0')
            return "a unix socket needs an absolute path (unix:///path.sock)";
        if (!(out->socket = unescape(path, strlen(path))))
            return "the socket path holds %00 or a bad %-escape";
    } else if (s->topology == SLUICE__REDIS_SENTINEL) {
        if (path[0] == '\0' || path[1] == '\0')
            return "no master name after the addresses (…/mymaster)";
        out->master = unescape(path + 1, strlen(path + 1));
        if (!out->master || strchr(out->master, '/'))
            return "the master name holds a /, %00 or a bad %-escape";
    } else if (path[0] != '\0' && path[1] != '\0') {
        if (s->topology == SLUICE__REDIS_CLUSTER)
            return "a database: a Redis Cluster has only database 0";
        if (!parse_db(path + 1, &out->db))
            return "the database is not a whole number";
        db_in_path = TRUE;
    }
    if (query && s->topology == SLUICE__REDIS_CLUSTER)
        return "a database: a Redis Cluster has only database 0";
    if (query && db_in_path)
        return "two databases, in the path and in ?db=";
    if (query && !parse_db(query + 3, &out->db))
        return "the database is not a whole number";
    return NULL;
}

gboolean sluice__redis_url_parse(const char *url, sluice__redis_url *out, char **why)
{
    static const scheme unknown = {NULL, 0, FALSE, 0, SCHEMES};
    const scheme *s = NULL;
    const char *sep = strstr(url, "://");

    memset(out, 0, sizeof *out);
    for (gsize i = 0; sep && !s && i < G_N_ELEMENTS(schemes); i++)
        if (strlen(schemes[i].name) == (gsize)(sep - url) &&
            g_ascii_strncasecmp(url, schemes[i].name, sep - url) == 0)
            s = &schemes[i];
    if (!s)
        return refuse(out, &unknown, why, sep ? "unknown scheme" : "not a URL");
    out->topology = s->topology;
    out->tls = s->tls;

    const char *authority = sep + 3;
    gsize authority_len = strcspn(authority, "/?#");
    const char *tail = authority + authority_len;
    if (strchr(tail, '#'))
        return refuse(out, s, why, "a # outside the password (written %23 inside it)");
    const char *at = NULL;
    for (const char *p = authority; p < tail; p++)
        if (*p == '@')
            at = p;
    const char *hosts = at ? at + 1 : authority;
    const char *wrong = at ? parse_user(authority, at - authority, out) : NULL;
    if (!wrong && strcmp(s->name, "unix") == 0 && hosts != tail)
        wrong = "a unix socket needs an absolute path (unix:///path.sock)";
    else if (!wrong && strcmp(s->name, "unix") != 0)
        wrong = parse_addresses(hosts, tail - hosts, s, out);
    if (!wrong) {
        const char *mark = strchr(tail, '?');
        g_autofree char *path = mark ? g_strndup(tail, mark - tail) : g_strdup(tail);
        wrong = parse_rest(path, mark ? mark + 1 : NULL, s, out);
    }
    if (wrong)
        return refuse(out, s, why, wrong);
    return TRUE;
}

void sluice__redis_url_clear(sluice__redis_url *url)
{
    for (guint i = 0; i < url->n_addresses; i++)
        g_free(url->addresses[i].host);
    g_free(url->addresses);
    g_free(url->socket);
    g_free(url->user);
    sluice__secret_free(url->password);
    g_free(url->master);
    memset(url, 0, sizeof *url);
}

const char *sluice__redis_url_scheme(const sluice__redis_url *url)
{
    for (gsize i = 0; i < G_N_ELEMENTS(schemes); i++)
        if (schemes[i].topology == url->topology && schemes[i].tls == url->tls &&
            (strcmp(schemes[i].name, "unix") == 0) == (url->socket != NULL))
            return schemes[i].name;
    return "redis";
}
