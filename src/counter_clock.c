/* SPDX-License-Identifier: MIT */
/* CLOCK_MONOTONIC read cheaply: the CPU's time-stamp counter on a line kept in step
 * with clock_gettime.
 *
 * The counter is used only where the kernel keeps CLOCK_MONOTONIC on it itself
 * (its clocksource is "tsc") and the CPU says it is invariant (one rate in every
 * power state), and not when SLUICE_CLOCK=system is in the environment. Ticks
 * become nanoseconds on a line through an anchor: a counter reading and this
 * clock's time there. When the counter passes the next anchor, the reader that
 * sees it first reads clock_gettime between two counter reads and draws the next
 * line from there, with the slope of the rate measured since the start. The line
 * starts at clock_gettime's time, unless the old line gave more before its next
 * anchor: then it starts there (never back) and is slowed by what closes the gap
 * by the anchor after, at most 1000 ppm. So the clock stays within the rate error
 * times the span between anchors (at most 16 ms: well under a µs here) of
 * clock_gettime, and never goes back. The counter is read without a fence (a fence
 * costs as much as the read), so two threads' readings may be out of the order
 * of the reads by a few ns: what keeps decisions in order (src/memory/order.h)
 * does not rest on it. A reader that finds the line being drawn waits for it. When
 * at an anchor the line is more than MAX_ERROR_NS off clock_gettime (the counter
 * jumped, or the kernel stopped trusting it and left it), the counter is not
 * keeping CLOCK_MONOTONIC's time: from then on the clock is clock_gettime. A
 * reading past the next anchor, or before the current one, checks the line, so a
 * jump either way is seen at the first reading after it. */
#include "counter_clock.h"

#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#define HAVE_COUNTER 1
#else
#define HAVE_COUNTER 0
#endif

#define MAX_SPAN_NS  (16 * G_GINT64_CONSTANT(1000000)) /* between anchors, once settled */
#define SLEW_PER     1000                              /* slewing moves the slope at most 1/1000 */
#define CALIBRATE_NS (200 * G_GINT64_CONSTANT(1000))   /* the first rate's least span */
#define MAX_SPINS    1000 /* waiting for a line being drawn: then clock_gettime */
#define MAX_ERROR_NS G_GINT64_CONSTANT(1000000)     /* at an anchor: then clock_gettime      */
#define MAX_WIDTH_NS (50 * G_GINT64_CONSTANT(1000)) /* a pair this narrow can tell */

typedef enum {
    SOURCE_UNDECIDED,
    SOURCE_COUNTER,
    SOURCE_SYSTEM,
} source;

/* The line, behind a version word (even: stable; odd: being drawn). */
typedef struct {
    guint64 version;
    guint64 tsc;  /* the anchor's counter reading          */
    gint64 ns;    /* this clock's time there               */
    guint64 mult; /* nanoseconds per tick, times 2^32      */
    guint64 next; /* the counter reading of the next anchor */
} __attribute__((aligned(64))) line;

/* A counter reading and clock_gettime's time at it, read within `width` ticks. */
typedef struct {
    guint64 tsc;
    gint64 ns;
    guint64 width;
} pair;

static line current;
static gint chosen;        /* atomic: a source */
static pair first;         /* the first pair: the rate is measured from it   */
static guint64 span_ticks; /* between anchors: doubles up to MAX_SPAN_NS     */
static guint64 max_span_ticks;
static guint64 max_width_ticks; /* MAX_WIDTH_NS */

static __thread __attribute__((tls_model("initial-exec"))) gint64 last_ns;

static gint64 system_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (gint64)t.tv_sec * G_GINT64_CONSTANT(1000000000) + t.tv_nsec;
}

/* Never less than what this thread read before. */
static inline gint64 forward(gint64 ns)
{
    if (G_UNLIKELY(ns < last_ns))
        return last_ns;
    last_ns = ns;
    return ns;
}

#if HAVE_COUNTER

#ifdef SLUICE_COUNTER_CLOCK_JUMPS
static guint64 jumped; /* atomic: ticks added to every reading (sluice__monotonic_jump) */
#endif

static inline guint64 ticks(void)
{
#ifdef SLUICE_COUNTER_CLOCK_JUMPS
    return __rdtsc() + __atomic_load_n(&jumped, __ATOMIC_RELAXED);
#else
    return __rdtsc();
#endif
}

/* a ticks at mult nanoseconds per tick (times 2^32); a may be negative */
static inline gint64 scale(gint64 a, guint64 mult)
{
    return (gint64)(((__int128)a * (__int128)mult) >> 32);
}

/* clock_gettime between two fenced counter reads: the narrowest of three, its
 * counter taken halfway. */
static pair measure(void)
{
    pair best = {0, 0, G_MAXUINT64};
    for (int i = 0; i < 3; i++) {
        _mm_lfence();
        guint64 before = ticks();
        _mm_lfence();
        gint64 ns = system_ns();
        _mm_lfence();
        guint64 after = ticks();
        if (after - before < best.width)
            best = (pair){before + (after - before) / 2, ns, after - before};
    }
    return best;
}

/* The CPU says its counter is invariant (CPUID 0x80000007, EDX bit 8). */
static gboolean invariant_counter(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007)
        return FALSE;
    __get_cpuid(0x80000007, &a, &b, &c, &d);
    return (d & (1u << 8)) != 0;
}

/* The kernel keeps CLOCK_MONOTONIC on the counter. */
static gboolean kernel_on_counter(void)
{
    g_autofree char *name = NULL;
    if (!g_file_get_contents("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                             &name, NULL, NULL))
        return FALSE;
    return strcmp(g_strstrip(name), "tsc") == 0;
}

/* Measures the first rate (over CALIBRATE_NS at least) and draws the first line:
 * FALSE when the rate is not that of a counter between 100 MHz and 100 GHz. */
static gboolean calibrate(void)
{
    first = measure();
    pair p;
    do
        p = measure();
    while (p.ns - first.ns < CALIBRATE_NS);
    if (p.tsc <= first.tsc)
        return FALSE;
    guint64 mult =
        (guint64)(((unsigned __int128)(guint64)(p.ns - first.ns) << 32) / (p.tsc - first.tsc));
    if (mult < (G_GUINT64_CONSTANT(1) << 32) / 100 || mult > (G_GUINT64_CONSTANT(10) << 32))
        return FALSE;
    max_span_ticks = (guint64)(((unsigned __int128)MAX_SPAN_NS << 32) / mult);
    max_width_ticks = (guint64)(((unsigned __int128)MAX_WIDTH_NS << 32) / mult);
    span_ticks = 4 * (p.tsc - first.tsc);
    current = (line){0, p.tsc, p.ns, mult, p.tsc + span_ticks};
    return TRUE;
}

/* With the version held: TRUE, and the counter left for clock_gettime, when the
 * line is off p (narrow enough to tell) by more than MAX_ERROR_NS; *error: by how
 * much (clock_gettime less the line). */
static gboolean off_the_line(const pair *p, gint64 *error)
{
    *error = p->ns - (current.ns + scale((gint64)(p->tsc - current.tsc), current.mult));
    if (p->width > max_width_ticks || (*error <= MAX_ERROR_NS && *error >= -MAX_ERROR_NS))
        return FALSE;
    g_atomic_int_set(&chosen, SOURCE_SYSTEM);
    return TRUE;
}

/* The version held from `seen`: lets it go with the line as it was, and says why
 * the counter was left when it was. */
static void let_go(guint64 seen, gboolean left, gint64 error)
{
    __atomic_store_n(&current.version, seen, __ATOMIC_RELEASE);
    if (left)
        g_warning("the CPU's time-stamp counter is %" G_GINT64_FORMAT " ms %s "
                  "CLOCK_MONOTONIC: decisions read clock_gettime from now on",
                  ABS(error) / 1000000, error < 0 ? "ahead of" : "behind");
}

/* Holds the line at version `seen` (odd until let go): FALSE when another reader
 * changed or holds it. */
static gboolean hold(guint64 seen)
{
    return __atomic_compare_exchange_n(&current.version, &seen, seen + 1, FALSE, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}

/* A reading before the line's anchor (`seen`): the counter went back. Checks the
 * line against clock_gettime, unless another reader holds it. */
static void went_back(guint64 seen)
{
    pair p = measure();
    if (!hold(seen))
        return;
    gint64 error;
    gboolean left = off_the_line(&p, &error);
    let_go(seen, left, error);
}

/* Draws the next line through a pair measured at or after `seen`'s next anchor,
 * unless another reader drew it first, or the line is off (off_the_line). */
static void reanchor(guint64 seen)
{
    pair p = measure(); /* before the version is held: readers wait a few stores at most */
    if (!hold(seen))
        return;
    gint64 error;
    if (off_the_line(&p, &error)) {
        let_go(seen, TRUE, error);
        return;
    }
    /* readers used the line only before its next anchor: it gave at most `given` */
    gint64 given = current.ns + scale((gint64)(current.next - current.tsc), current.mult);
    gint64 here = MAX(p.ns, given);
    gint64 gap = p.ns - here; /* <= 0: this clock is ahead of clock_gettime by -gap */
    guint64 rate =
        (guint64)(((unsigned __int128)(guint64)(p.ns - first.ns) << 32) / (p.tsc - first.tsc));
    span_ticks = MIN(2 * span_ticks, max_span_ticks);
    gap = MAX(gap, -scale((gint64)span_ticks, rate) / SLEW_PER);
    __int128 slew = (__int128)gap * ((__int128)1 << 32) / (__int128)span_ticks;
    __atomic_store_n(&current.tsc, p.tsc, __ATOMIC_RELAXED);
    __atomic_store_n(&current.ns, here, __ATOMIC_RELAXED);
    __atomic_store_n(&current.mult, (guint64)((__int128)rate + slew), __ATOMIC_RELAXED);
    __atomic_store_n(&current.next, p.tsc + span_ticks, __ATOMIC_RELAXED);
    __atomic_store_n(&current.version, seen + 2, __ATOMIC_RELEASE);
}

#endif /* HAVE_COUNTER */

static source choose(void)
{
    static gsize once;
    if (g_once_init_enter(&once)) {
        source s = SOURCE_SYSTEM;
        const char *forced = g_getenv("SLUICE_CLOCK");
#if HAVE_COUNTER
        if (!(forced && strcmp(forced, "system") == 0) && invariant_counter() &&
            kernel_on_counter() && calibrate())
            s = SOURCE_COUNTER;
#else
        (void)forced;
#endif
        g_atomic_int_set(&chosen, s);
        g_once_init_leave(&once, 1);
    }
    return (source)g_atomic_int_get(&chosen);
}

gint64 sluice__monotonic_ns(void)
{
    source s = (source)g_atomic_int_get(&chosen);
    if (G_UNLIKELY(s == SOURCE_UNDECIDED))
        s = choose();
#if HAVE_COUNTER
    for (guint spins = 0; G_LIKELY(s == SOURCE_COUNTER) && spins < MAX_SPINS; spins++) {
        /* acquire loads stand for a seqlock's fences (which ThreadSanitizer does not model) */
        guint64 v = __atomic_load_n(&current.version, __ATOMIC_ACQUIRE);
        guint64 tsc0 = __atomic_load_n(&current.tsc, __ATOMIC_ACQUIRE);
        gint64 ns0 = __atomic_load_n(&current.ns, __ATOMIC_ACQUIRE);
        guint64 mult = __atomic_load_n(&current.mult, __ATOMIC_ACQUIRE);
        guint64 next = __atomic_load_n(&current.next, __ATOMIC_ACQUIRE);
        guint64 now = ticks();
        if (G_UNLIKELY((v & 1) || __atomic_load_n(&current.version, __ATOMIC_RELAXED) != v)) {
            _mm_pause(); /* being drawn: a few stores */
            continue;
        }
        if (G_UNLIKELY(now >= next)) {
            reanchor(v);
            s = (source)g_atomic_int_get(&chosen);
            continue;
        }
        if (G_UNLIKELY(now + max_width_ticks < tsc0)) {
            went_back(v);
            break; /* this reading: clock_gettime's */
        }
        return forward(ns0 + scale((gint64)(now - tsc0), mult));
    }
#endif
    return forward(system_ns());
}

#if HAVE_COUNTER
static guint64 held_for_fork; /* the version the line had when fork() held it */
#endif

void sluice__monotonic_fork_lock(void)
{
    /* the source chosen before fork(): a child forked while another thread chose
     * would wait for that thread, which it does not have, to finish choosing */
    source s = choose();
#if HAVE_COUNTER
    if (s != SOURCE_COUNTER)
        return;
    for (;;) { /* a reader draws a line in a few stores */
        guint64 v = __atomic_load_n(&current.version, __ATOMIC_RELAXED);
        if (!(v & 1) && __atomic_compare_exchange_n(&current.version, &v, v + 1, FALSE,
                                                    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            held_for_fork = v;
            return;
        }
        _mm_pause();
    }
#else
    (void)s;
#endif
}

void sluice__monotonic_fork_unlock(void)
{
#if HAVE_COUNTER
    if (g_atomic_int_get(&chosen) == SOURCE_COUNTER)
        __atomic_store_n(&current.version, held_for_fork, __ATOMIC_RELEASE);
#endif
}

#ifdef SLUICE_COUNTER_CLOCK_JUMPS
void sluice__monotonic_jump(gint64 ns)
{
#if HAVE_COUNTER
    if (choose() == SOURCE_COUNTER)
        __atomic_fetch_add(&jumped,
                           (guint64)((__int128)ns * ((__int128)1 << 32) /
                                     (__int128)__atomic_load_n(&current.mult, __ATOMIC_RELAXED)),
                           __ATOMIC_RELAXED);
#else
    (void)ns;
#endif
}
#endif

const char *sluice__monotonic_source(void)
{
    return choose() == SOURCE_COUNTER ? "tsc" : "system";
}
