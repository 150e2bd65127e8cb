/* The backend interface: where a limiter's state lives and decisions are made. */
#ifndef SLUICE_BACKEND_H
#define SLUICE_BACKEND_H

#include <glib.h>

#include "algorithm.h"
#include "limiter.h"

typedef struct sluice__backend sluice__backend;

/* What every backend provides (as hiredis' redisContextFuncs). */
typedef struct {
    const char *name;
    /* Decides `permits` for key (NULL: the limit's single shared state) under rule,
     * as sluice__decide does. FALSE with *error when the backend failed. */
    gboolean (*decide)(sluice__backend *backend, sluice__limiter *limiter, const sluice__rule *rule,
                       const char *key, gint64 permits, gint64 reserve_us, sluice__verdict *verdict,
                       GError **error);
    /* Gives back concurrency permits; failures are logged, not returned. */
    void (*give_back)(sluice__backend *backend, sluice__limiter *limiter, const sluice__rule *rule,
                      const char *key, gint64 permits);
    void (*free)(sluice__backend *backend);
} sluice__backend_funcs;

struct sluice__backend {
    const sluice__backend_funcs *funcs;
};

#endif
