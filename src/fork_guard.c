/* SPDX-License-Identifier: MIT */
/* fork() while other threads decide: the locks a decision takes are held across
 * fork() (pthread_atfork), in the order the code nests them, so that the child
 * finds them free and what they guard whole, and can go on deciding.
 *
 * Held: the asynchronous calls' release lock, then the engine's wake lock (a waiting
 * async call takes them in that order), then every memory store's lock (taken with
 * neither of them held) with its shared state's version, then the stripes of the
 * denial cache's and the prefetch store's keyed slots (taken with none held); the
 * child forgets the permits its parent had in hand; and the line of the counter
 * clock (held last, released first). Without this a child forked
 * while threads decide could find a limit's lock taken, or its state half
 * written, and hang on its first decision of that limit. The Redis connections and the keyfile
 * watcher have their own handlers (their locks nest with none of these). Not held:
 * the lifecycle and registry locks of init, reload and shutdown, and a breaker's
 * lock while it changes state: a child forked in those moments can still hang on
 * them. */
#include "fork_guard.h"

#include <pthread.h>

#include <glib.h>

#include "async.h"
#include "memory/memory.h"
#include "counter_clock.h"
#include "engine.h"
#include "key_slots.h"
#include "prefetch.h"

static void before_fork(void)
{
    sluice__async_fork_lock();
    sluice__engine_fork_lock();
    sluice__memory_stores_lock();
    sluice__key_stripes_lock();
    sluice__monotonic_fork_lock();
}

static void after_fork_common(void)
{
    sluice__monotonic_fork_unlock();
    sluice__key_stripes_unlock();
    sluice__memory_stores_unlock();
    sluice__engine_fork_unlock();
    sluice__async_fork_unlock();
}

static void after_fork_parent(void)
{
    after_fork_common();
}

static void after_fork_child(void)
{
    sluice__prefetch_fork_child();
    after_fork_common();
}

void sluice__fork_guard_install(void)
{
    static gsize installed;
    if (g_once_init_enter(&installed)) {
        pthread_atfork(before_fork, after_fork_parent, after_fork_child);
        g_once_init_leave(&installed, 1);
    }
}
