/* SPDX-License-Identifier: MIT */
/* The RESP writer: a command's arguments in Redis' protocol. */
#ifndef SLUICE_REDIS_RESP_H
#define SLUICE_REDIS_RESP_H

#include <glib.h>

/* The decimal digits of v, with a '-' when negative, into out (no terminator;
 * out holds 20 bytes); their count. */
gsize sluice__redis_decimal(char *out, gint64 v);

/* The command argv in Redis' protocol (RESP), written into buf when it fits in
 * size bytes; its length either way. No allocation, no printf. */
gsize sluice__redis_format(char *buf, gsize size, int argc, const char *const *argv);
/* The same into small when it fits (no allocation), else into a new buffer:
 * returns where it is (g_free it unless it is small), *len its length. */
char *sluice__redis_format_in(char *small, gsize size, int argc, const char *const *argv,
                              gsize *len);

#endif
