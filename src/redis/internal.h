/* The redis backend's state, shared by its blocking and its asynchronous client. */
#ifndef SLUICE_BACKEND_REDIS_INTERNAL_H
#define SLUICE_BACKEND_REDIS_INTERNAL_H

#include <glib.h>

#include "backend.h"
#include "redis/breaker.h"
#include "redis/url.h"

#define SLUICE__ALGORITHMS 6

typedef struct sluice__redis_async sluice__redis_async;
typedef struct sluice__redis_link sluice__redis_link;

typedef struct {
    sluice__backend base;
    sluice__redis_url url;
    char *prefix;
    /* key_prefix and the algorithm's tag ("sluice:sw:"): a limit whose algorithm a
     * reload changes starts on fresh keys instead of reading another's state */
    char *prefixes[SLUICE__ALGORITHMS];
    gint64 timeout_us;
    char *what; /* "redis 127.0.0.1:6379", for messages (never the password) */
    char *sha[SLUICE__ALGORITHMS];
    sluice__breaker breaker;    /* both clients' */
    sluice__redis_link *link;   /* the blocking callers' shared connection */
    sluice__redis_async *async; /* the asynchronous client's connections */
} sluice__redis_backend;

#endif
