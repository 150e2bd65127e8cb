/* SPDX-License-Identifier: MIT */
/* The Redis password outside the URL ($SLUICE_REDIS_PASSWORD, password_file), and
 * keeping it out of messages. */
#ifndef SLUICE_SECRET_H
#define SLUICE_SECRET_H

#include <glib.h>

/* The environment variable that may hold the Redis password. */
#define SLUICE__PASSWORD_ENV "SLUICE_REDIS_PASSWORD"

/* The password held by the file at path: its contents without one trailing line
 * end ("\n" or "\r\n"). NULL and a sentence in *why (naming the file, never
 * its contents) when it cannot be read, is empty or larger than 4 KiB. Free it
 * with sluice__secret_free. */
char *sluice__secret_read_file(const char *path, char **why);

/* TRUE (and its permission bits in *mode) when the file at path may be read or
 * written by its group or by others. */
gboolean sluice__secret_file_exposed(const char *path, guint *mode);

/* text with the user information of every URL in it (scheme://USER:PASSWORD@)
 * replaced by "***", for messages that quote what they could not parse. */
char *sluice__secret_redact(const char *text);

/* Zeroes n bytes at p that held a secret, with a store the compiler may not drop
 * as dead (explicit_bzero), even when the memory is freed right after and the
 * whole library is optimized at link time: every secret sluice wipes goes here. */
void sluice__secret_wipe(void *p, gsize n);

/* Zeroes (sluice__secret_wipe) and frees a password (NULL is fine). */
void sluice__secret_free(char *secret);

#endif
