/* SPDX-License-Identifier: MIT */
/* The keyfile watcher: a thread that notices when the keyfile is saved. */
#ifndef SLUICE_WATCH_H
#define SLUICE_WATCH_H

#include <glib.h>

/* What stat(2) says of a file; two equal stamps mean an unchanged file. */
typedef struct {
    gboolean exists;
    guint64 device, inode, size;
    gint64 mtime_ns, ctime_ns;
} sluice__file_stamp;

/* The stamp of path now (exists FALSE when it cannot be stat'ed). */
void sluice__file_stamp_read(const char *path, sluice__file_stamp *stamp);

/* Called by the watcher thread (holding no lock of the watcher's) when the
 * watched file changed and then stayed the same for one tick. */
typedef void (*sluice__watch_changed_func)(void);

/* Watches path (NULL: nothing), whose contents as loaded had `loaded` as stamp;
 * starts the thread on first use. A save is noticed within two ticks of 100 ms
 * (a file still being written is left alone until it stops changing); a rename
 * over the file and a symlink pointed elsewhere are saves too. */
void sluice__watch_file(const char *path, const sluice__file_stamp *loaded,
                        sluice__watch_changed_func changed);

/* Stops and joins the thread. The caller must not hold a lock that `changed`
 * takes. */
void sluice__watch_stop(void);

#endif
