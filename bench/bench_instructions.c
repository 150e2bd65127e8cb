/* SPDX-License-Identifier: MIT */
/* bench_instructions: one operation of bench/memory_ops.c, n times, for
 * bench/bench_instructions.sh to count its instructions under callgrind.
 *
 *   bench_instructions OP N    (OP: ideal, acquire, decorated, keyed, hot,
 *                               prefetch, plain, norule, norule-guard)
 *
 * It makes one batch of calls first (a key's state, the decorators' binding), then N
 * calls; it prints how many were admitted, exits 1 when sluice cannot be set up and 2
 * on bad arguments. */
#include <stdio.h>
#include <string.h>

#include <glib.h>

#include "memory_ops.h"

#define WARM_UP 2048 /* calls before the counted ones: every key seen twice */

static void usage(const char *program)
{
    fprintf(stderr, "usage: %s OP N   (OP:", program);
    for (const memory_op *o = memory_ops; o->name; o++)
        fprintf(stderr, " %s", o->name);
    fprintf(stderr, ")\n");
}

int main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    const memory_op *op = NULL;
    guint64 n = 0;
    if (argc == 3) {
        for (const memory_op *o = memory_ops; o->name && !op; o++)
            op = strcmp(o->name, argv[1]) == 0 ? o : NULL;
        if (!g_ascii_string_to_unsigned(argv[2], 10, 1, G_MAXUINT, &n, NULL))
            op = NULL;
    }
    if (!op) {
        usage(argv[0]);
        return 2;
    }
    if (!memory_ops_init(&error)) {
        fprintf(stderr, "bench_instructions: %s\n", error->message);
        return 1;
    }
    op->op(0, WARM_UP);
    guint64 admitted = op->op(WARM_UP, (guint)n);
    printf("%s: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " admitted\n", op->name, admitted, n);
    memory_ops_free();
    return 0;
}
