/* SPDX-License-Identifier: MIT */
/* How every benchmark starts: sluice on a keyfile of its own, and a heading that says what ran. */
#include "setup.h"

#include <glib/gstdio.h>
#include <sluice/sluice.h>
#include <stdio.h>
#include <unistd.h>

#ifndef SLUICE_BENCH_BUILD_TYPE
#define SLUICE_BENCH_BUILD_TYPE "unknown"
#endif

gboolean bench_init(const char *contents, GError **error)
{
    g_autofree char *path = NULL;
    int fd = g_file_open_tmp("sluice-bench-XXXXXX.ini", &path, error);
    if (fd < 0) {
        g_prefix_error(error, "cannot write the keyfile: ");
        return FALSE;
    }
    close(fd);
    gboolean written = g_file_set_contents(path, contents, -1, error);
    gboolean ok = written && sluice_init(path, error);
    g_unlink(path);
    if (!ok)
        g_prefix_error(error, written ? "sluice_init failed: " : "cannot write the keyfile: ");
    return ok;
}

void bench_print_version(const char *backend)
{
    printf("sluice %s, %s backend, build type %s, %ld CPUs online\n", sluice_version(), backend,
           SLUICE_BENCH_BUILD_TYPE, sysconf(_SC_NPROCESSORS_ONLN));
}
