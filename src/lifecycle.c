/* SPDX-License-Identifier: MIT */
/* include/sluice/lifecycle.h: sluice_init, sluice_reload, sluice_shutdown, and the
 * configuration and backends they make, swap and free. */
#include <sluice/lifecycle.h>

#include <sluice/error.h>

#include "arguments.h"
#include "async.h"
#include "memory/memory.h"
#include "config.h"
#include "counter_clock.h"
#include "engine.h"
#include "fork_guard.h"
#include "redis/redis.h"
#include "registry.h"
#include "secret.h"
#include "shm/shm.h"
#include "watch.h"

static GMutex lifecycle; /* init, reload, shutdown; guards what follows */
static sluice__config *config;
static sluice__backend *memory; /* always there: the default, and on_error = local */
static sluice__backend *remote; /* the redis or shm backend while one is configured */
static char *remote_settings;   /* what it was made for: the redis URL, prefix, timeout
                                 * and TLS, or the zone                             */
static GPtrArray *retired;      /* backends replaced since init: freed at shutdown  */

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

/* What the backend of fresh is made for, as text: a backend made for the same
 * text serves it. */
static char *settings_of(const sluice__config *fresh)
{
    if (fresh->backend == SLUICE__BACKEND_SHM) {
        g_autofree char *zone = sluice__shm_settings(fresh);
        return g_strdup_printf("shm\n%s", zone);
    }
    /* holds the password: compared, never shown, zeroed when dropped */
    g_autofree char *tls = sluice__tls_settings_describe(&fresh->tls);
    return g_strdup_printf("redis\n%s\n%s\n%" G_GINT64_FORMAT "\n%s\n%s\n%s", fresh->redis_url,
                           fresh->key_prefix, fresh->timeout_us, tls,
                           fresh->redis_password ? fresh->redis_password : "",
                           fresh->sentinel_password ? fresh->sentinel_password : "");
}

/* With the lifecycle lock held: the backend fresh asks for, made when its settings
 * changed (*made), and given fresh's rules; NULL and *error when it cannot be made
 * (bad credentials, a zone that cannot be attached) or refuses the rules (nothing
 * changed then). */
static sluice__backend *backend_for(const sluice__config *fresh, GError **error)
{
    if (fresh->backend == SLUICE__BACKEND_MEMORY)
        return memory;
    char *settings = settings_of(fresh);
    if (remote && g_strcmp0(settings, remote_settings) == 0) {
        sluice__secret_free(settings);
        if (remote->funcs->configure && !remote->funcs->configure(remote, fresh, FALSE, error))
            return NULL;
        return remote;
    }
    sluice__backend *made = fresh->backend == SLUICE__BACKEND_SHM
                                ? sluice__backend_shm_new(fresh, error)
                                : sluice__backend_redis_new(fresh, error);
    if (made && made->funcs->configure && !made->funcs->configure(made, fresh, TRUE, error)) {
        made->funcs->free(made);
        made = NULL;
    }
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
    sluice__engine_set_backends(backend, memory, fresh->denial_cache);
    sluice__registry_apply(fresh);
    sluice__config_free(config);
    config = fresh;
    sluice__watch_file(config->reload ? config->path : NULL, stamp, saved);
    g_info("loaded %s: %u rules, backend %s", fresh->path ? fresh->path : "defaults",
           g_hash_table_size(fresh->rules), backend->funcs->name);
    return TRUE;
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
    (void)sluice__monotonic_source(); /* chosen (and calibrated: 200 µs) here, not in a decision */
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
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_NOT_INITIALIZED,
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
    sluice__engine_set_backends(NULL, NULL, FALSE);
    sluice__registry_clear();
    g_clear_pointer(&remote_settings, sluice__secret_free);
    if (memory)
        memory->funcs->free(memory);
    memory = NULL;
    sluice__config_free(config);
    config = NULL;
    g_mutex_unlock(&lifecycle);
}
