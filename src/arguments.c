/* SPDX-License-Identifier: MIT */
/* The checks every entry point makes of its arguments, and the lookup of the
 * limiter a call names. */
#include "arguments.h"

#include <limits.h>
#include <string.h>

#include <sluice/error.h>

#include "limit_name.h"
#include "registry.h"
#include "value.h"

static gboolean invalid(GError **error, const char *what)
{
    g_set_error(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT, "%s", what);
    return FALSE;
}

gboolean sluice__check_name(const char *name, GError **error)
{
    switch (sluice__limit_name_check(name)) {
    case SLUICE__NAME_OK:
        return TRUE;
    case SLUICE__NAME_MISSING:
        return invalid(error, "name is NULL; expected the name of a limit");
    case SLUICE__NAME_EMPTY:
        return invalid(error, "name is empty; expected the name of a limit");
    case SLUICE__NAME_TOO_LONG:
        return invalid(error, "name is longer than 1024 bytes");
    default:
        return invalid(error, "name is not valid UTF-8");
    }
}

gboolean sluice__check_key(const char *key, GError **error)
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

gboolean sluice__check_timeout_ms(gint64 timeout_ms, GError **error)
{
    if (timeout_ms < 0)
        return invalid(error, "timeout_ms is negative; expected 0 or more");
    if (timeout_ms > SLUICE__MAX_DURATION_US / 1000)
        return invalid(error, "timeout_ms is too large; at most 3153600000000 (36500d)");
    return TRUE;
}

gboolean sluice__check_found(const char *name, const char *key, gint64 permits,
                             const sluice__limiter *found, GError **error)
{
    if (!found && !sluice__check_name(name, error))
        return FALSE;
    if (permits < 0)
        return invalid(error, "permits is negative; expected 0 (a peek) or more");
    return sluice__check_key(key, error);
}

gboolean sluice__check_path(const char *path, GError **error)
{
    const char *why = !path    ? "the path is NULL; expected a keyfile"
                      : !*path ? "the path is empty; expected a keyfile"
                      : strnlen(path, PATH_MAX) == PATH_MAX ? "the path is longer than PATH_MAX"
                                                            : NULL;
    if (why)
        g_set_error_literal(error, SLUICE_ERROR, SLUICE_ERROR_INVALID_ARGUMENT, why);
    return why == NULL;
}
