/* SPDX-License-Identifier: MIT */
/* The decorated places a built program carries: the macros' records, read from its ELF file. */
#ifndef SLUICE_SITES_H
#define SLUICE_SITES_H

#include <glib.h>

/* One RATE_LIMITED* use, as recorded in the section sluice_sites (see
 * SLUICE__SITE in include/sluice/macros.h). */
typedef struct {
    char *name;     /* the limit's name; NULL when the macro was not given a string literal */
    char *spelling; /* the name argument as written in the source: "login", LOGIN_NAME */
    char *file;     /* where the macro stands (the compiler's __FILE__) */
    int line;
    char *function; /* the definition form's function; NULL for a guard */
} cli_site;

void cli_site_free(cli_site *site);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(cli_site, cli_site_free)

/* Appends to sites (of cli_site, freeing them) every record of the ELF file at
 * path: a program, a shared library or an object file, of either class and byte
 * order. A file without the section adds nothing. FALSE with *error when the file
 * cannot be read, is not ELF, or holds a malformed record. */
gboolean cli_sites_read(const char *path, GPtrArray *sites, GError **error);

/* The string a C string-literal spelling denotes ("log" "in", u8"\x41", ("a")),
 * up to its first NUL as C would read it; NULL when spelling is anything else. */
char *cli_site_literal(const char *spelling);

#endif
