/* SPDX-License-Identifier: MIT */
/* The Redis password outside the URL ($SLUICE_REDIS_PASSWORD, password_file), and
 * keeping it out of messages. */
#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#define MAX_SECRET_BYTES 4096

void sluice__secret_wipe(void *p, gsize n)
{
    explicit_bzero(p, n);
}

/* Zeroes and frees the whole buffer of a secret that is not returned. */
static void wipe(char *buffer, gsize size)
{
    sluice__secret_wipe(buffer, size);
    g_free(buffer);
}

char *sluice__secret_read_file(const char *path, char **why)
{
    g_autofree char *name = g_filename_display_name(path);
    int fd = g_open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY, 0);
    if (fd < 0) {
        *why = g_strdup_printf("cannot read %s: %s", name, g_strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        *why = g_strdup_printf("cannot read %s: not a regular file", name);
        return NULL;
    }
    gsize size = MAX_SECRET_BYTES + 2, n = 0;
    char *secret = g_malloc0(size);
    while (n < size - 1) {
        ssize_t got = read(fd, secret + n, size - 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            *why = g_strdup_printf("cannot read %s: %s", name, g_strerror(errno));
            close(fd);
            wipe(secret, size);
            return NULL;
        }
        if (got == 0)
            break;
        n += (gsize)got;
    }
    close(fd);
    if (n > 0 && secret[n - 1] == '\n')
        secret[--n] = '\0';
    if (n > 0 && secret[n - 1] == '\r')
        secret[--n] = '\0';
    const char *wrong = n == 0                 ? "is empty; expected the password"
                        : n > MAX_SECRET_BYTES ? "is larger than 4 KiB; expected the password"
                        : strlen(secret) != n  ? "holds a NUL byte; expected the password"
                                               : NULL;
    if (wrong) {
        *why = g_strdup_printf("%s %s", name, wrong);
        wipe(secret, size);
        return NULL;
    }
    return secret;
}

gboolean sluice__secret_file_exposed(const char *path, guint *mode)
{
    GStatBuf st;
    if (g_stat(path, &st) != 0)
        return FALSE;
    *mode = st.st_mode & 07777;
    return (st.st_mode & (S_IRWXG | S_IRWXO)) != 0;
}

/* Where the URL that starts at p ends in a message: white space or a quote. */
static const char *url_end(const char *p)
{
    const char *end = p + strcspn(p, " \t\r\n\"'<>");
    const char *quote = g_strstr_len(p, end - p, "\xe2\x80\x9d"); /* ”: GLib quotes “so” */
    return quote ? quote : end;
}

char *sluice__secret_redact(const char *text)
{
    GString *out = g_string_new(NULL);
    const char *p = text, *scheme;
    while ((scheme = strstr(p, "://")) != NULL) {
        const char *rest = scheme + 3, *end = url_end(rest), *at = NULL;
        for (const char *q = rest; q < end; q++) /* the last @ ends the user information */
            if (*q == '@')
                at = q;
        g_string_append_len(out, p, rest - p);
        if (at)
            g_string_append(out, "***");
        p = at ? at : rest;
    }
    g_string_append(out, p);
    return g_string_free(out, FALSE);
}

void sluice__secret_free(char *secret)
{
    if (!secret)
        return;
    sluice__secret_wipe(secret, strlen(secret));
    g_free(secret);
}
