/* SPDX-License-Identifier: MIT */
/* How every benchmark starts: sluice on a keyfile of its own, and a heading that says what ran. */
#ifndef SLUICE_BENCH_SETUP_H
#define SLUICE_BENCH_SETUP_H

#include <glib.h>

/* sluice_init on a keyfile with these contents, written to a temporary file and removed after;
 * FALSE and *error (which says whether the file or sluice failed) when it cannot. */
gboolean bench_init(const char *contents, GError **error);
/* Prints "sluice X.Y.Z, BACKEND backend, build type T, N CPUs online". */
void bench_print_version(const char *backend);

#endif
