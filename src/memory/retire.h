/* SPDX-License-Identifier: MIT */
/* Memory that threads read without a lock (a memory store's table of keys, the
 * states of its keys): unlinked by a writer, it is freed only once every thread
 * that could have found it has left its read section (epoch-based reclamation).
 *
 * A read section costs the reading thread one exchange on a line of its own: no
 * line is written by two readers. Writers (under their own locks) retire what they
 * unlinked; what is retired is freed two epochs later, and the epoch advances when
 * every thread in a read section entered it in the current epoch. fork() waits for
 * the read sections to end and holds new ones off (sluice__retire_fork_lock). */
#ifndef SLUICE_MEMORY_RETIRE_H
#define SLUICE_MEMORY_RETIRE_H

#include <glib.h>

#include "memory/hot.h" /* SLUICE__LINE */

/* A thread's record: alone on its line. */
typedef struct sluice__reader {
    guint64 active;              /* atomic: 0 outside a read section, else its epoch */
    gint used;                   /* atomic: a thread's                               */
    struct sluice__reader *next; /* the list of records (they are never freed)      */
} __attribute__((aligned(SLUICE__LINE))) sluice__reader;

/* What read sections read: written when the epoch advances and around fork(). */
typedef struct {
    guint64 epoch; /* atomic: from 1 on */
    gint forking;  /* atomic: a fork() waits for the read sections to end */
} __attribute__((aligned(SLUICE__LINE))) sluice__epochs;

extern sluice__epochs sluice__epochs_now;
extern __thread __attribute__((tls_model("initial-exec"))) sluice__reader *sluice__reader_mine;

/* Out of line: the calling thread's first read section; a fork() under way. */
sluice__reader *sluice__reader_register(void);
void sluice__retire_wait_fork(void);

/* Enters a read section: what is reached from here on through pointers loaded with
 * __ATOMIC_SEQ_CST is not freed before sluice__read_leave. No lock is taken. */
static inline sluice__reader *sluice__read_enter(void)
{
    sluice__reader *r = sluice__reader_mine;
    if (G_UNLIKELY(!r))
        r = sluice__reader_register();
    for (;;) {
        (void)__atomic_exchange_n(&r->active,
                                  __atomic_load_n(&sluice__epochs_now.epoch, __ATOMIC_SEQ_CST),
                                  __ATOMIC_SEQ_CST);
        if (G_LIKELY(!__atomic_load_n(&sluice__epochs_now.forking, __ATOMIC_SEQ_CST)))
            return r;
        __atomic_store_n(&r->active, 0, __ATOMIC_RELEASE);
        sluice__retire_wait_fork();
    }
}

static inline void sluice__read_leave(sluice__reader *r)
{
    __atomic_store_n(&r->active, 0, __ATOMIC_RELEASE);
}

/* p, unlinked (by a store with __ATOMIC_SEQ_CST) so that a read section entered
 * from now on cannot reach it, is freed by free_func once the read sections that
 * could have reached it have ended. Takes no lock a read section waits for. */
void sluice__retire(gpointer p, GDestroyNotify free_func);
/* Waits until everything retired so far is freed. */
void sluice__retire_flush(void);

/* fork(): waits for every read section to end and holds new ones off until
 * sluice__retire_fork_unlock (in the parent and in the child). */
void sluice__retire_fork_lock(void);
void sluice__retire_fork_unlock(void);

#endif
