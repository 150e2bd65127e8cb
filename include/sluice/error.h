/* SPDX-License-Identifier: MIT */
/** @file
 * The GError domain of sluice: one table gives both the codes and their messages. */
#ifndef SLUICE_ERROR_H
#define SLUICE_ERROR_H

#include <glib.h>
#include <sluice/export.h>

G_BEGIN_DECLS

/** X(code, message): the single source of the error codes and their descriptions. */
#define SLUICE_ERROR_TABLE(X)                                                                      \
    X(SLUICE_ERROR_INVALID_ARGUMENT, "invalid argument")                                           \
    X(SLUICE_ERROR_CONFIG, "invalid configuration")                                                \
    X(SLUICE_ERROR_NOT_INITIALIZED, "sluice_init has not been called")                             \
    X(SLUICE_ERROR_NOT_SUPPORTED, "not supported by this build")                                   \
    X(SLUICE_ERROR_BACKEND, "the rate-limit backend failed")                                       \
    X(SLUICE_ERROR_AUTH, "the backend refused the credentials")                                    \
    X(SLUICE_ERROR_IO, "input/output error")                                                       \
    X(SLUICE_ERROR_TLS, "TLS with the backend failed")                                             \
    X(SLUICE_ERROR_NO_RULE, "the keyfile has no rule of that name")

/** The codes of SLUICE_ERROR errors, one per row of SLUICE_ERROR_TABLE. */
typedef enum {
#define SLUICE__ERROR_ENUM(code, message) code,
    SLUICE_ERROR_TABLE(SLUICE__ERROR_ENUM)
#undef SLUICE__ERROR_ENUM
} sluice_error_code;

/** The GError domain of sluice, named as GLib names its domains (G_IO_ERROR). The
 * -1 return of sluice_acquire and its kin is SLUICE_FAILED (<sluice/acquire.h>). */
#define SLUICE_ERROR (sluice_error_quark())
/** The quark of SLUICE_ERROR. */
SLUICE_API GQuark sluice_error_quark(void);

/** A static description of a code ("invalid argument"); "unknown error" for others. */
SLUICE_API const char *sluice_strerror(sluice_error_code code);

G_END_DECLS

#endif
