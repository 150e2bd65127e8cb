/* SPDX-License-Identifier: MIT */
/* The keyfile: read, validate every value, and produce an immutable configuration. */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

#include <glib.h>

#include "rule.h"

typedef enum {
    SLUICE__BACKEND_MEMORY,
    SLUICE__BACKEND_REDIS,
    SLUICE__BACKEND_SHM,
} sluice__backend_kind;

/* [sluice] shm_size: the default, and the bounds of what it may be. */
#define SLUICE__SHM_DEFAULT_SIZE (G_GINT64_CONSTANT(64) << 20)
#define SLUICE__SHM_MIN_SIZE     (G_GINT64_CONSTANT(1) << 20)
#define SLUICE__SHM_MAX_SIZE     (G_GINT64_CONSTANT(64) << 30)

/* [sluice] tls_*: absolute paths (relative ones are resolved against the
 * keyfile's directory), or NULL. */
typedef struct {
    char *ca_file;     /* the CAs trusted (PEM); NULL: the system's trust store    */
    char *cert_file;   /* a client certificate (PEM chain), or NULL                */
    char *key_file;    /* its private key (PEM)                                    */
    char *server_name; /* checked against the certificate, sent as SNI; NULL: host */
} sluice__tls_settings;

typedef struct {
    char *path;                   /* the file it came from; NULL for the defaults */
    sluice__backend_kind backend; /* [sluice] backend                              */
    char *redis_url;              /* [sluice] redis (may hold the password)        */
    gboolean password_in_keyfile; /* the URL holds a password                      */
    char *redis_password;         /* when the URL has none: password_file, else
                                   * $SLUICE_REDIS_PASSWORD; NULL: none. Never logged */
    char *sentinel_password;      /* [sluice] sentinel_password_file: the Sentinels'
                                   * own password; NULL: none. Never logged         */
    char *key_prefix;             /* [sluice] key_prefix                           */
    gint64 timeout_us;            /* [sluice] timeout                              */
    sluice__tls_settings tls;     /* [sluice] tls_*                                */
    char *shm_name;               /* [sluice] shm: the zone's name (backend = shm) */
    gint64 shm_size;              /* [sluice] shm_size: bytes, when it is created  */
    guint shm_mode;               /* [sluice] shm_mode: 0600 or 0660               */
    sluice__on_error on_error;    /* [sluice] on_error                             */
    gboolean reload;              /* [sluice] reload                               */
    gboolean denial_cache;        /* [sluice] denial_cache                         */
    GHashTable *rules;            /* limit name -> sluice__rule *                  */
    GHashTable *overrides;        /* limit name -> its [override:NAME]: a table of
                                   * key -> sluice__override_spec * (src/override.h) */
} sluice__config;

/* The configuration of a missing keyfile: memory backend, no rules. */
sluice__config *sluice__config_new_default(void);
/* Reads and validates the keyfile at path. Errors are SLUICE_ERROR_CONFIG with
 * "PATH: [GROUP] KEY = VALUE: what is expected", or SLUICE_ERROR_IO. */
sluice__config *sluice__config_load(const char *path, GError **error);
/* The same for keyfile text already in memory; `path` names it in messages. */
sluice__config *sluice__config_parse(const char *data, gsize length, const char *path,
                                     GError **error);
void sluice__config_free(sluice__config *config);
/* What t is, as text: its paths and a digest of each file's contents, so that a
 * reload after a certificate was replaced in place sees a change. */
char *sluice__tls_settings_describe(const sluice__tls_settings *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(sluice__config, sluice__config_free)

#endif
