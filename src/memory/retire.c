/* SPDX-License-Identifier: MIT */
/* Memory that threads read without a lock, freed when none can reach it
 * (src/memory/retire.h). */
#include "memory/retire.h"

#include "memory/spin_wait.h"

sluice__epochs sluice__epochs_now = {1, 0};
__thread __attribute__((tls_model("initial-exec"))) sluice__reader *sluice__reader_mine;

static sluice__reader *readers; /* atomic: the list's head */

/* At a thread's exit: its record is free for the next thread. */
static void give_back(gpointer p)
{
    sluice__reader *r = p;
    sluice__reader_mine = NULL;
    __atomic_store_n(&r->used, 0, __ATOMIC_RELEASE);
}

static GPrivate owner = G_PRIVATE_INIT(give_back);

sluice__reader *sluice__reader_register(void)
{
    sluice__reader *r;
    for (r = __atomic_load_n(&readers, __ATOMIC_ACQUIRE); r; r = r->next) {
        gint unused = 0;
        if (__atomic_compare_exchange_n(&r->used, &unused, 1, FALSE, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            break;
    }
    if (!r) {
        r = g_aligned_alloc0(1, sizeof *r, SLUICE__LINE);
        r->used = 1;
        r->next = __atomic_load_n(&readers, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&readers, &r->next, r, FALSE, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED))
            ;
    }
    sluice__reader_mine = r;
    g_private_set(&owner, r);
    return r;
}

/* ---- retired memory ------------------------------------------------------------- */

typedef struct {
    gpointer p;
    GDestroyNotify free_func;
    guint64 epoch; /* when it was retired */
} retired;

static GMutex limbo_lock;
static GArray *limbo; /* retired, oldest first */

/* With limbo_lock: the next epoch, when every thread in a read section entered it
 * in this one. */
static gboolean advance(void)
{
    guint64 now = __atomic_load_n(&sluice__epochs_now.epoch, __ATOMIC_SEQ_CST);
    for (sluice__reader *r = __atomic_load_n(&readers, __ATOMIC_ACQUIRE); r; r = r->next) {
        guint64 active = __atomic_load_n(&r->active, __ATOMIC_SEQ_CST);
        if (active != 0 && active != now)
            return FALSE;
    }
    __atomic_store_n(&sluice__epochs_now.epoch, now + 1, __ATOMIC_SEQ_CST);
    return TRUE;
}

/* With limbo_lock: frees what no read section can reach any more (retired two
 * epochs ago); returns how much is left. */
static guint collect(void)
{
    if (advance())
        advance(); /* a second time when no read section is in the first */
    guint64 now = __atomic_load_n(&sluice__epochs_now.epoch, __ATOMIC_SEQ_CST);
    guint freed = 0;
    while (freed < limbo->len && g_array_index(limbo, retired, freed).epoch + 2 <= now) {
        retired *old = &g_array_index(limbo, retired, freed++);
        old->free_func(old->p);
    }
    g_array_remove_range(limbo, 0, freed);
    return limbo->len;
}

void sluice__retire(gpointer p, GDestroyNotify free_func)
{
    g_mutex_lock(&limbo_lock);
    if (!limbo)
        limbo = g_array_new(FALSE, FALSE, sizeof(retired));
    retired r = {p, free_func, __atomic_load_n(&sluice__epochs_now.epoch, __ATOMIC_SEQ_CST)};
    g_array_append_val(limbo, r);
    collect();
    g_mutex_unlock(&limbo_lock);
}

void sluice__retire_flush(void)
{
    for (guint spins = 0;; spins++) {
        g_mutex_lock(&limbo_lock);
        guint left = limbo ? collect() : 0;
        g_mutex_unlock(&limbo_lock);
        if (!left)
            return;
        sluice__spin_wait(spins);
    }
}

/* ---- fork() -------------------------------------------------------------------- */

static GMutex gate; /* held by a fork() under way */

void sluice__retire_wait_fork(void)
{
    g_mutex_lock(&gate);
    g_mutex_unlock(&gate);
}

void sluice__retire_fork_lock(void)
{
    g_mutex_lock(&gate);
    __atomic_store_n(&sluice__epochs_now.forking, 1, __ATOMIC_SEQ_CST);
    for (sluice__reader *r = __atomic_load_n(&readers, __ATOMIC_ACQUIRE); r; r = r->next)
        for (guint spins = 0; __atomic_load_n(&r->active, __ATOMIC_SEQ_CST); spins++)
            sluice__spin_wait(spins);
    g_mutex_lock(&limbo_lock);
}

void sluice__retire_fork_unlock(void)
{
    g_mutex_unlock(&limbo_lock);
    __atomic_store_n(&sluice__epochs_now.forking, 0, __ATOMIC_SEQ_CST);
    g_mutex_unlock(&gate);
}
