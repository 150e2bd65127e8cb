/* SPDX-License-Identifier: MIT */
/* The backend interface: where a limiter's state lives and decisions are made. */
#ifndef SLUICE_BACKEND_H
#define SLUICE_BACKEND_H

#include <glib.h>

#include <sluice/admin.h>

#include "algorithm.h"
#include "config.h"
#include "limiter.h"

typedef struct sluice__backend sluice__backend;

/* The end of an asynchronous decide: failure NULL and v the verdict, or failure
 * set (the callee owns it) and v NULL. */
typedef void (*sluice__decided_func)(const sluice__verdict *v, GError *failure, gpointer data);

/* Told of one server of a backend: its name for messages ("redis 127.0.0.1:6379")
 * and whether its circuit breaker is open (its calls refused, on_error deciding). */
typedef void (*sluice__breaker_func)(const char *what, gboolean open, gpointer data);

/* What every backend provides (as hiredis' redisContextFuncs). */
typedef struct {
    const char *name;
    /* TRUE for a backend that decides in the calling thread without a round trip
     * (memory, shm): no denial cache, no prefetched permits, decisions timed one
     * in eight. */
    gboolean in_process;
    /* Decides `permits` for key (NULL: the limit's single shared state) under rule,
     * as sluice__decide does. FALSE with *error when the backend failed. */
    gboolean (*decide)(sluice__backend *backend, sluice__limiter *limiter, const sluice__rule *rule,
                       const char *key, gint64 permits, gint64 reserve_us, sluice__verdict *verdict,
                       GError **error);
    /* Optional: decide without blocking, calling done later from `context` (the
     * caller's thread-default main context, being iterated by the calling
     * thread). NULL: decide is fast and never blocks (memory). */
    void (*decide_async)(sluice__backend *backend, sluice__limiter *limiter,
                         const sluice__rule *rule, const char *key, gint64 permits,
                         gint64 reserve_us, GMainContext *context, sluice__decided_func done,
                         gpointer data);
    /* Gives back concurrency permits; failures are logged, not returned. */
    void (*release)(sluice__backend *backend, sluice__limiter *limiter, const sluice__rule *rule,
                    const char *key, gint64 permits);
    /* Optional (NULL: SLUICE_ERROR_BACKEND): takes `permits` (> 0) of key's state
     * under rule (found for the key: src/override.h; not concurrency) as if admitted
     * now, even past what is left (sluice__penalize). FALSE with *error when the
     * backend failed. */
    gboolean (*penalize)(sluice__backend *backend, sluice__limiter *limiter,
                         const sluice__rule *rule, const char *key, gint64 permits, GError **error);
    /* Optional (NULL: SLUICE_ERROR_BACKEND): denies every call on key under rule for
     * duration_us from now on the backend's clock, replacing a block in force (0:
     * lifts it); the key's state stays as it is. FALSE with *error when the backend
     * failed. */
    gboolean (*block)(sluice__backend *backend, sluice__limiter *limiter, const sluice__rule *rule,
                      const char *key, gint64 duration_us, GError **error);
    /* Forgets the state of key (NULL: the limit's single shared state), so the
     * limit is back to full capacity, and lifts its block. FALSE with *error when
     * the backend failed. */
    gboolean (*reset)(sluice__backend *backend, sluice__limiter *limiter, const char *key,
                      GError **error);
    /* Optional: a reload replaced the backend; threads may still be inside it,
     * and it is freed at shutdown. Lets go of what it need not keep meanwhile. */
    void (*retire)(sluice__backend *backend);
    /* Optional: takes config's rules (at sluice_init, first, and at each reload) before
     * any decision under them. FALSE with *error refuses the keyfile (the running
     * one stays). */
    gboolean (*configure)(sluice__backend *backend, const sluice__config *config, gboolean first,
                          GError **error);
    /* Optional: the zone it decides in (shm). FALSE when it has none. */
    gboolean (*zone)(sluice__backend *backend, sluice_zone_info *out);
    /* Optional: a count that every give-back of permits on any process sharing the
     * backend bumps, and a wait until it moves past `seen` or until `until_us`
     * (monotonic). NULL: give-backs are this process's own (sluice__engine_releases). */
    guint64 (*releases)(sluice__backend *backend);
    void (*wait_release)(sluice__backend *backend, guint64 seen, gint64 until_us);
    /* Optional: calls func for each server it sends to (remote backends). */
    void (*breakers)(sluice__backend *backend, sluice__breaker_func func, gpointer data);
    void (*free)(sluice__backend *backend);
} sluice__backend_funcs;

struct sluice__backend {
    const sluice__backend_funcs *funcs;
};

#endif
