/* SPDX-License-Identifier: MIT */
/* The RESP writer: a command's arguments in Redis' protocol, with no allocation
 * when it fits the caller's buffer and no printf. */
#include "redis/resp.h"

#include <string.h>

gsize sluice__redis_decimal(char *out, gint64 v)
{
    char digits[20];
    gsize n = 0, len = 0;
    guint64 u = v < 0 ? (guint64)0 - (guint64)v : (guint64)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        out[len++] = '-';
    while (n > 0)
        out[len++] = digits[--n];
    return len;
}

/* Appends `<mark><n>\r\n` at buf + at when it fits in size; the new position. */
static gsize put_count(char *buf, gsize size, gsize at, char mark, gsize n)
{
    char text[24];
    text[0] = mark;
    gsize len = 1 + sluice__redis_decimal(text + 1, (gint64)n);
    text[len++] = '\r';
    text[len++] = '\n';
    if (at + len <= size)
        memcpy(buf + at, text, len);
    return at + len;
}

gsize sluice__redis_format(char *buf, gsize size, int argc, const char *const *argv)
{
    gsize at = put_count(buf, size, 0, '*', (gsize)argc);
    for (int i = 0; i < argc; i++) {
        gsize len = strlen(argv[i]);
        at = put_count(buf, size, at, '$', len);
        if (at + len + 2 <= size) {
            memcpy(buf + at, argv[i], len);
            memcpy(buf + at + len, "\r\n", 2);
        }
        at += len + 2;
    }
    return at;
}

char *sluice__redis_format_in(char *small, gsize size, int argc, const char *const *argv,
                              gsize *len)
{
    *len = sluice__redis_format(small, size, argc, argv);
    if (*len <= size)
        return small;
    char *big = g_malloc(*len); /* EVAL with a script's source, a DEL of many keys */
    sluice__redis_format(big, *len, argc, argv);
    return big;
}
