/* SPDX-License-Identifier: MIT */
/* ThreadSanitizer builds only: GLib's locks, made visible to TSan.
 *
 * GLib 2.74 implements GMutex, GRWLock and GCond with futexes and atomics inside
 * libglib, which is not instrumented, so TSan sees none of their ordering and
 * would report every access that a GMutex protects as a race. Linked into each
 * program of a TSan build (the test suites and the sluice command), this file
 * defines the GLib lock functions that sluice and the tests use: each calls GLib's own (found with
 * dlsym RTLD_NEXT) and tells TSan what it did with the mutex annotations of
 * <sanitizer/tsan_interface.h>, exactly as TSan's own pthread_mutex interceptors
 * do. The program's definitions come first in symbol lookup, so libsluice.so's
 * calls land here too. Nothing is suppressed: a race on data that no lock guards
 * is still reported. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <glib.h>
#include <sanitizer/tsan_interface.h>
#include <stdio.h>
#include <stdlib.h>

#undef g_once_init_enter
#undef g_once_init_leave

/* The GLib functions wrapped here: return type, name, parameters. */
#define WRAPPED(X)                                                                                 \
    X(void, g_mutex_init, (GMutex *))                                                              \
    X(void, g_mutex_clear, (GMutex *))                                                             \
    X(void, g_mutex_lock, (GMutex *))                                                              \
    X(gboolean, g_mutex_trylock, (GMutex *))                                                       \
    X(void, g_mutex_unlock, (GMutex *))                                                            \
    X(void, g_rw_lock_writer_lock, (GRWLock *))                                                    \
    X(gboolean, g_rw_lock_writer_trylock, (GRWLock *))                                             \
    X(void, g_rw_lock_writer_unlock, (GRWLock *))                                                  \
    X(void, g_rw_lock_reader_lock, (GRWLock *))                                                    \
    X(gboolean, g_rw_lock_reader_trylock, (GRWLock *))                                             \
    X(void, g_rw_lock_reader_unlock, (GRWLock *))                                                  \
    X(void, g_cond_wait, (GCond *, GMutex *))                                                      \
    X(gboolean, g_cond_wait_until, (GCond *, GMutex *, gint64))                                    \
    X(gboolean, g_once_init_enter, (volatile void *))                                              \
    X(void, g_once_init_leave, (volatile void *, gsize))

/* real_NAME: GLib's own NAME. */
#define DECLARE_REAL(ret, name, params)                                                            \
    typedef ret(*name##_fn) params;                                                                \
    static name##_fn real_##name;
WRAPPED(DECLARE_REAL)

static void *resolve(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "tsan_glib: %s not found in GLib\n", name);
        abort();
    }
    return f;
}

#define RESOLVE(name)                                                                              \
    do {                                                                                           \
        if (!real_##name)                                                                          \
            real_##name = (name##_fn)resolve(#name);                                               \
    } while (0)
#define RESOLVE_ONE(ret, name, params) RESOLVE(name);

/* Before main, while there is one thread: later calls only read the pointers
 * (RESOLVE in each wrapper covers calls from other constructors before this one). */
__attribute__((constructor)) static void resolve_all(void)
{
    WRAPPED(RESOLVE_ONE)
}

void g_mutex_init(GMutex *m)
{
    RESOLVE(g_mutex_init);
    real_g_mutex_init(m);
    __tsan_mutex_create(m, __tsan_mutex_not_static);
}

void g_mutex_clear(GMutex *m)
{
    RESOLVE(g_mutex_clear);
    __tsan_mutex_destroy(m, __tsan_mutex_not_static);
    real_g_mutex_clear(m);
}

/* A lock, try-lock and unlock function of GLib, annotated as TSan's own
 * pthread_mutex interceptors annotate theirs; `flags` is 0 for an exclusive lock,
 * __tsan_mutex_read_lock for a shared one. */
#define LOCK(name, type, flags)                                                                    \
    void name(type *l)                                                                             \
    {                                                                                              \
        RESOLVE(name);                                                                             \
        __tsan_mutex_pre_lock(l, flags);                                                           \
        real_##name(l);                                                                            \
        __tsan_mutex_post_lock(l, flags, 0);                                                       \
    }
#define TRYLOCK(name, type, flags)                                                                 \
    gboolean name(type *l)                                                                         \
    {                                                                                              \
        RESOLVE(name);                                                                             \
        __tsan_mutex_pre_lock(l, (flags) | __tsan_mutex_try_lock);                                 \
        gboolean ok = real_##name(l);                                                              \
        __tsan_mutex_post_lock(                                                                    \
            l, (flags) | __tsan_mutex_try_lock | (ok ? 0 : __tsan_mutex_try_lock_failed), 0);      \
        return ok;                                                                                 \
    }
#define UNLOCK(name, type, flags)                                                                  \
    void name(type *l)                                                                             \
    {                                                                                              \
        RESOLVE(name);                                                                             \
        __tsan_mutex_pre_unlock(l, flags);                                                         \
        real_##name(l);                                                                            \
        __tsan_mutex_post_unlock(l, flags);                                                        \
    }

LOCK(g_mutex_lock, GMutex, 0)
TRYLOCK(g_mutex_trylock, GMutex, 0)
UNLOCK(g_mutex_unlock, GMutex, 0)
LOCK(g_rw_lock_writer_lock, GRWLock, 0)
TRYLOCK(g_rw_lock_writer_trylock, GRWLock, 0)
UNLOCK(g_rw_lock_writer_unlock, GRWLock, 0)
LOCK(g_rw_lock_reader_lock, GRWLock, __tsan_mutex_read_lock)
TRYLOCK(g_rw_lock_reader_trylock, GRWLock, __tsan_mutex_read_lock)
UNLOCK(g_rw_lock_reader_unlock, GRWLock, __tsan_mutex_read_lock)

/* Waiting releases the mutex and takes it again before returning. */
void g_cond_wait(GCond *c, GMutex *m)
{
    RESOLVE(g_cond_wait);
    __tsan_mutex_pre_unlock(m, 0);
    __tsan_mutex_post_unlock(m, 0);
    real_g_cond_wait(c, m);
    __tsan_mutex_pre_lock(m, 0);
    __tsan_mutex_post_lock(m, 0, 0);
}

gboolean g_cond_wait_until(GCond *c, GMutex *m, gint64 end_time)
{
    RESOLVE(g_cond_wait_until);
    __tsan_mutex_pre_unlock(m, 0);
    __tsan_mutex_post_unlock(m, 0);
    gboolean signalled = real_g_cond_wait_until(c, m, end_time);
    __tsan_mutex_pre_lock(m, 0);
    __tsan_mutex_post_lock(m, 0, 0);
    return signalled;
}

/* The address of a volatile location, as TSan's annotations take it (they only note
 * the address; nothing is read or written through it). */
static void *tsan_address(volatile void *location)
{
    return (void *)(guintptr)location;
}

/* g_once: what the initializing thread wrote before leave is seen by every thread
 * that finds the location set (the inline fast path's atomic load acquires it). */
gboolean g_once_init_enter(volatile void *location)
{
    RESOLVE(g_once_init_enter);
    gboolean initialize = real_g_once_init_enter(location);
    if (!initialize)
        __tsan_acquire(tsan_address(location));
    return initialize;
}

void g_once_init_leave(volatile void *location, gsize result)
{
    RESOLVE(g_once_init_leave);
    __tsan_release(tsan_address(location));
    real_g_once_init_leave(location, result);
}
