/* The `redis` keyfile value: redis://[user:password@]host[:port][/db] or unix:///path.sock. */
#ifndef SLUICE_REDIS_URL_H
#define SLUICE_REDIS_URL_H

#include <glib.h>

typedef struct {
    char *host;     /* NULL for a unix socket            */
    int port;       /* 6379 unless given                 */
    char *socket;   /* unix:///path.sock: the path       */
    char *user;     /* ACL user, or NULL                 */
    char *password; /* or NULL; never logged             */
    int db;         /* SELECT; 0 unless given            */
} sluice__redis_url;

/* Parses url into out (free with sluice__redis_url_clear). FALSE and a sentence in
 * *why (which never repeats the URL: it may hold a password) when it is not one. */
gboolean sluice__redis_url_parse(const char *url, sluice__redis_url *out, char **why);
void sluice__redis_url_clear(sluice__redis_url *url);

#endif
