/* SPDX-License-Identifier: MIT */
/* The keyfile watcher: a thread polls stat(2) of the keyfile ten times a second.
 *
 * Polling rather than inotify: it needs no main loop, sees a rename over the file
 * and a symlink swapped to a new target (as configuration managers deploy) the
 * same way as a write in place, and costs one stat per tick. A change is acted on
 * once the file has looked the same for a whole tick, so that a file still being
 * written is not read half-way. */
#include "watch.h"

#include <pthread.h>
#include <sys/stat.h>

#define TICK_US (100 * 1000)

static GMutex lock; /* guards what follows */
static GCond wake;
static GThread *thread;
static gboolean stopping;
static char *path;                 /* NULL: nothing to watch */
static sluice__file_stamp current; /* of what was loaded (or tried) last */
static sluice__file_stamp pending; /* seen last tick, not yet acted on */
static sluice__watch_changed_func changed;

void sluice__file_stamp_read(const char *p, sluice__file_stamp *stamp)
{
    struct stat st;
    *stamp = (sluice__file_stamp){0};
    if (stat(p, &st) != 0)
        return;
    *stamp = (sluice__file_stamp){
        .exists = TRUE,
        .device = st.st_dev,
        .inode = st.st_ino,
        .size = (guint64)st.st_size,
        .mtime_ns = (gint64)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
        .ctime_ns = (gint64)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec,
    };
}

static gboolean same(const sluice__file_stamp *a, const sluice__file_stamp *b)
{
    return a->exists == b->exists && a->device == b->device && a->inode == b->inode &&
           a->size == b->size && a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

/* With lock held: TRUE when the file changed and stayed so for one tick (a file
 * that vanished is waited for: a save by delete and write brings it back). */
static gboolean saved(const sluice__file_stamp *now)
{
    gboolean stable = same(now, &pending);
    pending = *now;
    if (!now->exists || same(now, &current) || !stable)
        return FALSE;
    current = *now;
    return TRUE;
}

static gpointer watch(gpointer unused)
{
    (void)unused;
    g_mutex_lock(&lock);
    while (!stopping) {
        gint64 until = g_get_monotonic_time() + TICK_US;
        while (!stopping && g_cond_wait_until(&wake, &lock, until))
            ;
        if (stopping || !path)
            continue;
        g_autofree char *watched = g_strdup(path);
        g_mutex_unlock(&lock);
        sluice__file_stamp now;
        sluice__file_stamp_read(watched, &now);
        g_mutex_lock(&lock);
        /* the path may have changed while unlocked: then this stamp is stale */
        if (g_strcmp0(watched, path) == 0 && saved(&now)) {
            sluice__watch_changed_func call = changed;
            g_mutex_unlock(&lock);
            call();
            g_mutex_lock(&lock);
        }
    }
    g_mutex_unlock(&lock);
    return NULL;
}

/* fork(): the child has no watcher thread. It gets one again at its next
 * sluice_init or sluice_reload; the lock is held across fork so the child's copy
 * is consistent. */
static void before_fork(void)
{
    g_mutex_lock(&lock);
}

static void after_fork_parent(void)
{
    g_mutex_unlock(&lock);
}

static void after_fork_child(void)
{
    thread = NULL;
    g_mutex_unlock(&lock);
}

void sluice__watch_file(const char *p, const sluice__file_stamp *loaded,
                        sluice__watch_changed_func on_change)
{
    g_mutex_lock(&lock);
    g_free(path);
    path = g_strdup(p);
    current = pending = *loaded;
    changed = on_change;
    static gsize hooked;
    if (g_once_init_enter(&hooked)) {
        pthread_atfork(before_fork, after_fork_parent, after_fork_child);
        g_once_init_leave(&hooked, 1);
    }
    if (p && !thread)
        thread = g_thread_new("sluice-watch", watch, NULL);
    g_mutex_unlock(&lock);
}

void sluice__watch_stop(void)
{
    g_mutex_lock(&lock);
    GThread *t = thread; /* stays set until joined: a reload the thread is making
                          * meanwhile must not start another one */
    stopping = TRUE;
    g_cond_broadcast(&wake);
    g_mutex_unlock(&lock);
    if (t)
        g_thread_join(t);
    g_mutex_lock(&lock);
    thread = NULL;
    stopping = FALSE;
    g_clear_pointer(&path, g_free);
    g_mutex_unlock(&lock);
}
