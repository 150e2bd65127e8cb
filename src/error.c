/* SPDX-License-Identifier: MIT */
/* The GError domain of sluice and the messages of its codes, from one table. */
#include <sluice/error.h>

/* g_once, not G_DEFINE_QUARK: GLib 2.74's macro reads and writes its static
 * without atomics, a data race when two threads meet their first error at once. */
GQuark sluice_error_quark(void)
{
    static gsize quark;
    if (g_once_init_enter(&quark))
        g_once_init_leave(&quark, g_quark_from_static_string("sluice-error-quark"));
    return (GQuark)quark;
}

const char *sluice_strerror(sluice_error_code code)
{
    switch (code) {
#define SLUICE__ERROR_CASE(code, message)                                                          \
    case code:                                                                                     \
        return message;
        SLUICE_ERROR_TABLE(SLUICE__ERROR_CASE)
#undef SLUICE__ERROR_CASE
    }
    return "unknown error";
}
