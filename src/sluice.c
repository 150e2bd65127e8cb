/* The public API: init, reload and shutdown, and the calls that decide. */
#include <sluice/sluice.h>
#include <sluice/testing.h>

#include <limits.h>
#include <string.h>

#include "backend_memory.h"
#include "redis/redis.h"
#include "fork_guard.h"
#include "config.h"
#include "api.h"
#include "engine.h"
#include "registry.h"
#include "secret.h"
#include "stats.h"
#include "value.h"
#include "watch.h"

static GMutex lifecycle; /* init, reload, shutdown; guards what follows */
static sluice__config *config;
static sluice__backend *memory; /* always there: the default, and on_error = local */
static sluice__backend *remote; /* the redis backend while one is configured       */
static char *remote_settings;   /* the redis URL, prefix and timeout it was made for */
static GPtrArray *retired;      /* backends replaced since init: freed at shutdown  */

/* ---- lifecycle ---------------------------------------------------------------- */

/* Reads the keyfile at path (NULL: the defaults); *stamp is what the file looked
 * like just before it was read, so a save after that is seen by the watcher. */
static sluice__config *load(const char *path, sluice__file_stamp *stamp, GError **error)
{
    if (!path) {
        *stamp = (sluice__file_stamp){0};
        return sluice__config_new_default();
    }
    sluice__file_stamp_read(path, stamp);
    return sluice__config_load(path, error);
}

/* With the lifecycle lock held: the backend fresh asks for, made when its settings
 * changed; NULL and *error when it cannot be made (bad credentials). */
static sluice__backend *backend_for(const sluice__config *fresh, GError **error)
{
    if (fresh->backend == SLUICE__BACKEND_MEMORY)
        return memory;
    /* holds the password: compared, never shown, zeroed when dropped */
    char *settings =
        g_strdup_printf("%s\n%s\n%" G_GINT64_FORMAT "\n%s\n%s", fresh->redis_url, fresh->key_prefix,
                        fresh->timeout_us, fresh->redis_password ? fresh->redis_password : "",
                        fresh->sentinel_password ? fresh->sentinel_password : "");
    if (remote && g_strcmp0(settings, remote_settings) == 0) {
        sluice__secret_free(settings);
        return remote;
    }
    sluice__backend *made = sluice__backend_redis_new(fresh, error);
    if (!made) {
        sluice__secret_free(settings);
        return NULL;
    }
    if (remote) {
        g_ptr_array_add(retired, remote); /* threads may still be inside it */
        if (remote->funcs->retire)
            remote->funcs->retire(remote);
    }
    remote = made;
    sluice__secret_free(remote_settings);
    remote_settings = settings;
    return remote;
}

static void saved(void);

/* With the lifecycle lock held: makes `fresh` (read when its file had `stamp`)
 * the running configuration, or leaves everything as it was and returns FALSE. */
static gboolean apply(sluice__config *fresh, const sluice__file_stamp *stamp, GError **error)
{
    if (!memory) {
        memory = sluice__backend_memory_new();
        retired = g_ptr_array_new_with_free_func(NULL);
    }
    sluice__backend *backend = backend_for(fresh, error);
    if (!backend) {
        sluice__config_free(fresh);
        return FALSE;
    }
    sluice__engine_set_backends(backend, memory);
    sluice__registry_apply(fresh);
    sluice__config_free(config);
    config = fresh;
    sluice__watch_file(config->reload ? config->path : NULL, stamp, saved);
    g_info("loaded %s: %u rules, backend %s", fresh->path ? fresh->path : "defaults",
           g_hash_table_size(fresh->rules), backend->funcs->name);
    return TRUE;
}

gboolean sluice__check_path(const char *path, GError **error)
{
    const char *why = !path    ? "the path is NULL; expected a keyfile"
                      : !*path ? "the path is empty; expected a keyfile"
                      : strnlen(path, PATH_MAX) == PATH_MAX ? "the path is longer than PATH_MAX"
                                                            : NULL;
    if (why)
        g_set_error_literal(error, SLUICE_ERROR_DOMAIN, SLUICE_ERROR_INVALID_ARGUMENT, why);
    return why == NULL;
}

gboolean sluice_init(const char *config_path, GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    if (config_path && !sluice__check_path(config_path, error))
        return FALSE;
    const char *path = config_path ? config_path : g_getenv("SLUICE_CONFIG");
    if (path && *path == '\0')
        path = NULL; /* SLUICE_CONFIG set but empty: the defaults */
    sluice__file_stamp stamp;
    sluice__config *fresh = load(path, &stamp, error);
    if (!fresh)
        return FALSE;
    sluice__fork_guard_install();
    g_mutex_lock(&lifecycle);
    gboolean ok = apply(fresh, &stamp, error);
    g_mutex_unlock(&lifecycle);
    return ok;
}

/* With the lifecycle lock held and a configuration loaded: sluice_reload. */
static gboolean reload(GError **error)
{
    GError *failure = NULL;
    sluice__file_stamp stamp;
    sluice__config *fresh = load(config->path, &stamp, &failure);
    gboolean ok = fresh && apply(fresh, &stamp, &failure);
    if (!ok) {
        g_warning("reload refused, the running rules stay: %s", failure->message);
        g_propagate_error(error, failure);
        /* the watcher tries this file again only once it changes again */
        sluice__watch_file(config->reload ? config->path : NULL, &stamp, saved);
    }
    return ok;
}

/* The watcher saw the keyfile saved. */
static void saved(void)
{
    g_mutex_lock(&lifecycle);
    if (config && config->path && config->reload && reload(NULL))
        g_message("%s changed: its rules apply now", config->path);
    g_mutex_unlock(&lifecycle);
}

gboolean sluice_reload(GError **error)
{
    g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
    g_mutex_lock(&lifecycle);
    gboolean ok = FALSE;
    if (config)
        ok = reload(error);
    else
        g_set_error_literal(error, SLUICE_ERROR_DOMAIN, SLUICE_ERROR_NOT_INITIALIZED,
                            sluice_strerror(SLUICE_ERROR_NOT_INITIALIZED));
    g_mutex_unlock(&lifecycle);
    return ok;
}

void sluice_shutdown(void)
{
    sluice__watch_stop(); /* first: its thread takes the lifecycle lock */
    g_mutex_lock(&lifecycle);
    /* asynchronous requests still out end with an error; a remote backend fails
     * its pending ones as it is freed, while their rules and limiters still exist
     * (and the memory backend, for on_error = local) */
    sluice__async_shutdown();
    for (guint i = 0; retired && i < retired->len; i++) {
        sluice__backend *b = g_ptr_array_index(retired, i);
        b->funcs->free(b);
    }
    g_clear_pointer(&retired, g_ptr_array_unref);
    if (remote)
        remote->funcs->free(remote);
    remote = NULL;
    sluice__engine_set_backends(NULL, NULL);
    sluice__registry_clear();
    g_clear_pointer(&remote_settings, sluice__secret_free);
    if (memory)
        memory->funcs->free(memory);
    memory = NULL;
    sluice__config_free(config);
    config = NULL;
    g_mutex_unlock(&lifecycle);
}

/* ---- deciding ----------------------------------------------------------------- */

static gboolean invalid(GError **error, const char *what)
{
    g_set_error(error, SLUICE_ERROR_DOMAIN, SLUICE_ERROR_INVALID_ARGUMENT, "%s", what);
    return FALSE;
}

gboolean sluice__check_name(const char *name, GError **error)
{
    if (!name)
        return invalid(error, "name is NULL; expected the name of a limit");
    gsize n = strnlen(name, SLUICE__MAX_NAME_BYTES + 1);
    if (n == 0)
        return invalid(error, "name is empty; expected the name of a limit");
    if (n > SLUICE__MAX_NAME_BYTES)
        return invalid(error, "name is longer than 1024 bytes");
    if (!g_utf8_validate(name, n, NULL))
        return invalid(error, "name is not valid UTF-8");
    return TRUE;
}

static gboolean check_key(const char *key, GError **error)
{
    if (!key)
        return TRUE;
    gsize n = strnlen(key, SLUICE__MAX_KEY_BYTES + 1);
    if (n == 0)
        return invalid(error, "key is empty; expected NULL for no key, or a string");
    if (n > SLUICE__MAX_KEY_BYTES)
        return invalid(error, "key is longer than 65536 bytes");
    if (!g_utf8_validate(key, n, NULL))
        return invalid(error, "key is not valid UTF-8");
    return TRUE;
}

gboolean sluice__find(const char *name, const char *key, gint64 permits, sluice__limiter **limiter,
                      GError **error)
{
    *limiter = name && *name ? sluice__registry_find(name) : NULL;
    if (!*limiter && !sluice__check_name(name, error))
        return FALSE;
    if (permits < 0)
        return invalid(error, "permits is negative; expected 0 (a peek) or more");
    return check_key(key, error);
}

static int acquire(const char *name, const char *key, gint64 permits, gint64 wait_us,
                   sluice_decision *out, GError **error)
{
    sluice_decision scratch;
    gint64 taken;
    if (!out)
        out = &scratch;
    sluice__limiter *limiter;
    if (!sluice__find(name, key, permits, &limiter, error)) {
        *out = (sluice_decision){FALSE, 0, 0, -1, 0};
        return SLUICE_ERROR;
    }
    if (!limiter) {
        sluice__engine_unlimited(out);
        return SLUICE_ALLOWED;
    }
    return sluice__engine_acquire(limiter, key, permits, wait_us, out, &taken, NULL, error);
}

int sluice_acquire(const char *name, const char *key, gint64 permits, sluice_decision *out,
                   GError **error)
{
    return acquire(name, key, permits, -1, out, error);
}

int sluice_acquire_wait(const char *name, const char *key, gint64 permits, gint64 timeout_ms,
                        sluice_decision *out, GError **error)
{
    if (timeout_ms < 0 || timeout_ms > SLUICE__MAX_DURATION_US / 1000) {
        if (out)
            *out = (sluice_decision){FALSE, 0, 0, -1, 0};
        invalid(error, timeout_ms < 0 ? "timeout_ms is negative; expected 0 or more"
                                      : "timeout_ms is too large; at most 3153600000000 (36500d)");
        return SLUICE_ERROR;
    }
    return acquire(name, key, permits, timeout_ms * 1000, out, error);
}

void sluice_release(const char *name, const char *key, gint64 permits)
{
    g_autoptr(GError) error = NULL;
    sluice__limiter *limiter;
    if (!sluice__find(name, key, permits, &limiter, &error)) {
        g_debug("sluice_release ignored: %s", error->message);
        return;
    }
    if (limiter)
        sluice__engine_release(limiter, key, permits);
}

/* ---- what the macros call ----------------------------------------------------- */

/* The last decorated call's decision on this thread (sluice_last_decision): a
 * flag for a call with no rule (one store on that path), the decision otherwise.
 * The initial-exec model keeps the stores plain moves. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
    gboolean unlimited;
    int result;
    sluice_decision decision;
} last = {FALSE, SLUICE_ERROR, {FALSE, 0, 0, -1, 0}};

int sluice_last_decision(sluice_decision *out)
{
    g_return_val_if_fail(out != NULL, SLUICE_ERROR);
    if (last.unlimited) {
        sluice__engine_unlimited(out);
        return SLUICE_ALLOWED;
    }
    *out = last.decision;
    return last.result;
}

int sluice__enter(sluice_descriptor *descriptor, const char *key, sluice_lease *lease,
                  sluice_decision *verdict, GError **error)
{
    if (G_UNLIKELY(!descriptor || !lease || (error && !verdict))) {
        if (verdict)
            *verdict = (sluice_decision){FALSE, 0, 0, -1, 0};
        if (!error)
            return SLUICE__DEGRADE;
        invalid(error, "descriptor, lease or verdict is NULL; expected the macros' own");
        return SLUICE__FAILED;
    }
    sluice__limiter *limiter = sluice__registry_limiter_of(descriptor);
    last.unlimited = TRUE;
    if (G_UNLIKELY(!limiter) && !(limiter = sluice__registry_bind(descriptor)))
        return SLUICE__RUN; /* not initialized: no rules */
    if (!sluice__limiter_rule(limiter))
        return SLUICE__RUN; /* a name with no rule is not limited */

    sluice_decision d;
    GError *failure = NULL;
    gint64 taken = 0;
    int r;
    if (key && !check_key(key, &failure)) {
        d = (sluice_decision){sluice__engine_policy_allows(sluice__limiter_rule(limiter)), 0, 0, -1,
                              0};
        sluice__stats_count(&limiter->stats, SLUICE__OUTCOME_ERROR, FALSE, -1);
        sluice__stats_count(&descriptor->priv_stats, SLUICE__OUTCOME_ERROR, FALSE, -1);
        r = SLUICE_ERROR;
    } else {
        r = sluice__engine_acquire(limiter, key, 1, -1, &d, &taken, &descriptor->priv_stats,
                                   &failure);
    }
    last.unlimited = FALSE;
    last.result = r;
    last.decision = d;
    if (taken > 0) {
        lease->priv_limiter = limiter;
        lease->priv_key = key;
        lease->priv_permits = taken;
    }
    int run;
    if (r != SLUICE_ERROR) {
        run = r == SLUICE_ALLOWED ? SLUICE__RUN : SLUICE__DEGRADE;
    } else if (!error) {
        g_debug("%s: limiter failed, on_error %s: %s", descriptor->name,
                d.allowed ? "allows" : "denies", failure->message);
        g_error_free(failure);
        run = d.allowed ? SLUICE__RUN : SLUICE__DEGRADE;
    } else {
        *verdict = d;
        g_propagate_error(error, failure);
        return SLUICE__FAILED; /* the error callback answers */
    }
    if (run == SLUICE__DEGRADE) {
        sluice__stats_degraded(&limiter->stats);
        sluice__stats_degraded(&descriptor->priv_stats);
    }
    return run;
}

void sluice__leave(sluice_lease *lease)
{
    if (G_LIKELY(!lease || lease->priv_permits == 0))
        return;
    sluice__engine_release(lease->priv_limiter, lease->priv_key, lease->priv_permits);
    lease->priv_permits = 0;
}

gsize sluice_testing_memory_keys(const char *name)
{
    return sluice__check_name(name, NULL) ? sluice__registry_memory_keys(name) : 0;
}
