/* SPDX-License-Identifier: MIT */
/* Const data handed to GLib parameters that only read it (g_spawn_* argv, g_strdupv,
 * g_ptr_array_add of strings that outlive the array), without a cast that drops const. */
#ifndef SLUICE_TEST_UNCONST_H
#define SLUICE_TEST_UNCONST_H

#include <glib.h>

static inline gpointer test_unconst(gconstpointer p)
{
    union {
        gconstpointer c;
        gpointer m;
    } u = {.c = p};
    return u.m;
}

static inline char **test_strv(const char *const *v)
{
    return (char **)test_unconst(v);
}

#endif
