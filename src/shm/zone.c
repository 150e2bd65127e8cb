/* SPDX-License-Identifier: MIT */
/* The zone's file: made, or opened and checked, and mapped whole.
 *
 * The file is /dev/shm/sluice-NAME (shm_open("/sluice-NAME")). Whoever makes it
 * holds an exclusive flock on it while it does, and marks the header ready last;
 * an opener waits on a shared flock, so it never reads a zone being made, and
 * finding one that is not ready once the lock is free (its maker died) makes it
 * itself. An existing file is refused before it is mapped when another user owns
 * it or its mode is wider than the keyfile's shm_mode, and after its header is
 * read when anything in it differs from what its size gives. */
#define _GNU_SOURCE
#include "shm/zone.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sluice/error.h>

#include "shm/lock.h"

#define SHM_PREFIX "sluice-"

char *sluice__zone_path(const char *name)
{
    return g_strdup_printf("/dev/shm/" SHM_PREFIX "%s", name);
}

static char *shm_name_of(const char *name)
{
    return g_strdup_printf("/" SHM_PREFIX "%s", name);
}

static gboolean fail(GError **error, int code, const char *path, const char *format, ...)
    G_GNUC_PRINTF(4, 5);

static gboolean fail(GError **error, int code, const char *path, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    g_autofree char *why = g_strdup_vprintf(format, ap);
    va_end(ap);
    g_set_error(error, SLUICE_ERROR, code, "zone %s: %s", path, why);
    return FALSE;
}

/* TRUE when this process is in group gid. */
static gboolean in_group(gid_t gid)
{
    if (getegid() == gid)
        return TRUE;
    int n = getgroups(0, NULL);
    if (n <= 0)
        return FALSE;
    g_autofree gid_t *groups = g_new(gid_t, n);
    n = getgroups(n, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return TRUE;
    return FALSE;
}

/* Whether this process may use the file st describes with shm_mode `mode`. */
static gboolean check_owner(const struct stat *st, guint mode, const char *path, GError **error)
{
    guint file_mode = st->st_mode & 0777;
    if (!S_ISREG(st->st_mode))
        return fail(error, SLUICE_ERROR_BACKEND, path, "not a regular file");
    if (file_mode & ~mode)
        return fail(error, SLUICE_ERROR_BACKEND, path,
                    "its mode %04o lets more in than shm_mode %04o; remove it with sluice zone "
                    "--remove",
                    file_mode, mode);
    if (st->st_uid == geteuid())
        return TRUE;
    if ((mode & 0060) == 0060 && (file_mode & 0060) == 0060 && in_group(st->st_gid))
        return TRUE; /* shm_mode = 0660: shared with the file's group */
    return fail(error, SLUICE_ERROR_BACKEND, path,
                "belongs to another user (uid %u), not to this process's (uid %u)",
                (guint)st->st_uid, (guint)geteuid());
}

gboolean sluice__zone_format(guint8 *base, guint64 size, sluice__zone_share share,
                             const guint64 secret[2])
{
    sluice__zone_layout l = sluice__zone_layout_of(size, share);
    if (l.n_stripes == 0)
        return FALSE;
    sluice__zone_header *h = (sluice__zone_header *)base;
    memcpy(h->magic, SLUICE__ZONE_MAGIC, sizeof h->magic);
    h->version = SLUICE__ZONE_LAYOUT;
    h->header_bytes = sizeof *h;
    h->mutex_bytes = sizeof(pthread_mutex_t);
    h->layout = l;
    h->secret[0] = secret[0];
    h->secret[1] = secret[1];
    h->created_us = g_get_real_time();
    gboolean ok = sluice__zone_lock_init(&h->lock) && sluice__zone_lock_init(&h->pool_lock);
    sluice__zone_chunk *chunks = (sluice__zone_chunk *)(base + l.chunks_off);
    for (guint32 i = 0; i < l.n_chunks; i++)
        chunks[i].next = i + 1 < l.n_chunks ? i + 2 : 0;
    h->pool_head = l.n_chunks ? 1 : 0;
    h->pool_free = l.n_chunks;
    for (guint32 i = 0; ok && i < l.n_stripes; i++) {
        sluice__zone_stripe *s = (sluice__zone_stripe *)(base + l.stripes_off + i * l.stripe_bytes);
        ok = sluice__zone_lock_init(&s->lock);
    }
    if (ok)
        __atomic_store_n(&h->ready, SLUICE__ZONE_READY, __ATOMIC_RELEASE);
    return ok;
}

/* Writes a fresh zone of `size` bytes into the file (held exclusively). */
static gboolean make(int fd, guint64 size, guint mode, sluice__zone_share share, const char *path,
                     GError **error)
{
    if (sluice__zone_layout_of(size, share).n_stripes == 0)
        return fail(error, SLUICE_ERROR_BACKEND, path, "%" G_GUINT64_FORMAT " bytes is too small",
                    size);
    /* from empty: a zone left half made by a process that died is made again */
    if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)size) != 0)
        return fail(error, SLUICE_ERROR_BACKEND, path,
                    "cannot size it to %" G_GUINT64_FORMAT " bytes: %s", size, g_strerror(errno));
    (void)fchmod(fd, mode); /* as the keyfile says, whatever the umask */
    guint8 *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return fail(error, SLUICE_ERROR_BACKEND, path, "cannot map it: %s", g_strerror(errno));
    guint64 secret[2];
    if (getrandom(secret, sizeof secret, 0) != sizeof secret) {
        secret[0] = g_random_int() | (guint64)g_random_int() << 32;
        secret[1] = g_random_int() | (guint64)g_random_int() << 32;
    }
    gboolean ok = sluice__zone_format(base, size, share, secret);
    munmap(base, size);
    if (!ok)
        return fail(error, SLUICE_ERROR_BACKEND, path, "cannot make its locks");
    return TRUE;
}

/* TRUE when the file holds a zone marked ready (at least its header's bytes). */
static gboolean is_ready(int fd)
{
    sluice__zone_header h;
    return pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
           __atomic_load_n(&h.ready, __ATOMIC_ACQUIRE) == SLUICE__ZONE_READY;
}

/* Opens the zone's file (making it if there is none), holding a shared flock on it
 * once it is ready: -1 and *error when it cannot be. */
static int open_ready(const char *name, guint64 size, guint mode, sluice__zone_share share,
                      const char *path, GError **error)
{
    g_autofree char *shm = shm_name_of(name);
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = shm_open(shm, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
        if (fd < 0 && errno == EEXIST)
            fd = shm_open(shm, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0 && errno == ENOENT)
            continue; /* removed in between */
        if (fd < 0) {
            fail(error, SLUICE_ERROR_BACKEND, path, "cannot open it: %s", g_strerror(errno));
            return -1;
        }
        struct stat st;
        if (fstat(fd, &st) != 0 || !check_owner(&st, mode, path, error)) {
            if (!error || !*error)
                fail(error, SLUICE_ERROR_BACKEND, path, "cannot read it: %s", g_strerror(errno));
            close(fd);
            return -1;
        }
        /* the maker holds LOCK_EX while it makes the zone */
        if (flock(fd, LOCK_SH) == 0 && is_ready(fd))
            return fd;
        if (flock(fd, LOCK_EX) != 0) {
            fail(error, SLUICE_ERROR_BACKEND, path, "cannot lock it: %s", g_strerror(errno));
            close(fd);
            return -1;
        }
        if (is_ready(fd) || make(fd, size, mode, share, path, error)) {
            flock(fd, LOCK_SH); /* converted: the zone stays as it is while it is checked */
            return fd;
        }
        flock(fd, LOCK_UN);
        close(fd);
        return -1;
    }
    fail(error, SLUICE_ERROR_BACKEND, path, "removed again and again while being opened");
    return -1;
}

/* A zone over bytes whose header has been checked. */
static sluice__zone *zone_of(guint8 *base)
{
    sluice__zone *z = g_new0(sluice__zone, 1);
    z->base = base;
    z->h = (sluice__zone_header *)base;
    z->l = z->h->layout; /* checked to be what the size gives: copied once */
    z->proc = -1;
    z->pid = getpid();
    return z;
}

sluice__zone *sluice__zone_attach(const char *name, gint64 size, guint mode,
                                  sluice__zone_share share, GError **error)
{
    g_autofree char *path = sluice__zone_path(name);
    int fd = open_ready(name, (guint64)size, mode, share, path, error);
    if (fd < 0)
        return NULL;
    struct stat st;
    sluice__zone_header h;
    char *why = NULL;
    guint8 *base = MAP_FAILED;
    if (fstat(fd, &st) != 0 || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        fail(error, SLUICE_ERROR_BACKEND, path, "cannot read it: %s", g_strerror(errno));
    } else if (!sluice__zone_header_check(&h, sizeof h, (guint64)st.st_size, &why)) {
        fail(error, SLUICE_ERROR_BACKEND, path, "%s", why);
        g_free(why);
    } else {
        base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
            fail(error, SLUICE_ERROR_BACKEND, path, "cannot map it: %s", g_strerror(errno));
    }
    close(fd); /* the mapping stays; so does the flock's end */
    if (base == MAP_FAILED)
        return NULL;
    /* checked again as mapped: the file may have changed since it was read */
    if (!sluice__zone_header_check(base, (gsize)st.st_size, (guint64)st.st_size, &why)) {
        fail(error, SLUICE_ERROR_BACKEND, path, "%s", why);
        g_free(why);
        munmap(base, (size_t)st.st_size);
        return NULL;
    }
    sluice__zone *z = zone_of(base);
    z->name = g_strdup(name);
    z->path = g_steal_pointer(&path);
    return z;
}

sluice__zone *sluice__zone_wrap(guint8 *bytes, gsize length, GError **error)
{
    char *why = NULL;
    if (!sluice__zone_header_check(bytes, length, length, &why)) {
        fail(error, SLUICE_ERROR_BACKEND, "(bytes)", "%s", why);
        g_free(why);
        return NULL;
    }
    sluice__zone *z = zone_of(bytes);
    z->name = g_strdup("(bytes)");
    z->path = g_strdup("(bytes)");
    return z;
}

void sluice__zone_release(sluice__zone *zone)
{
    g_free(zone->name);
    g_free(zone->path);
    g_free(zone);
}

void sluice__zone_detach(sluice__zone *zone)
{
    if (!zone)
        return;
    munmap(zone->base, zone->l.size);
    sluice__zone_release(zone);
}

gboolean sluice__zone_remove(const char *name, GError **error)
{
    g_autofree char *shm = shm_name_of(name);
    g_autofree char *path = sluice__zone_path(name);
    if (shm_unlink(shm) == 0)
        return TRUE;
    return fail(error, errno == ENOENT ? SLUICE_ERROR_INVALID_ARGUMENT : SLUICE_ERROR_IO, path,
                "cannot remove it: %s", g_strerror(errno));
}
