/* SPDX-License-Identifier: MIT */
/* A window of calls of an adaptive limit: latencies kept by reservoir sampling (no
 * allocation, a uniform sample however many calls return), the drops, the most in
 * flight, and a length jittered so that processes close theirs apart. */
#include "adaptive/window.h"

#include <string.h>

#define JITTER 0.15

static guint64 next_random(sluice__window *w)
{
    guint64 x = w->random; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    w->random = x;
    return x * G_GUINT64_CONSTANT(2685821657736338717);
}

void sluice__window_init(sluice__window *w, guint64 random)
{
    memset(w, 0, sizeof *w);
    w->random = random ? random : G_GUINT64_CONSTANT(0x9e3779b97f4a7c15);
}

void sluice__window_open(sluice__window *w, gint64 now_ns, gint64 last_latency_ns)
{
    gint64 length = MAX(SLUICE__WINDOW_MIN_NS, 2 * last_latency_ns);
    double u = (double)(next_random(w) >> 11) / (double)(G_GUINT64_CONSTANT(1) << 53);
    w->end_ns = now_ns + length + (gint64)((double)length * JITTER * u);
    w->samples = w->drops = 0;
    w->max_in_flight = 0;
}

void sluice__window_add(sluice__window *w, gint64 latency_ns, gint64 in_flight)
{
    w->max_in_flight = MAX(w->max_in_flight, in_flight);
    if (latency_ns < 0) {
        w->drops++;
        return;
    }
    guint k = w->samples++;
    if (k < SLUICE__WINDOW_KEPT) {
        w->kept[k] = latency_ns;
    } else {
        guint64 j = next_random(w) % ((guint64)k + 1);
        if (j < SLUICE__WINDOW_KEPT)
            w->kept[j] = latency_ns;
    }
}

gboolean sluice__window_due(const sluice__window *w, gint64 now_ns)
{
    return now_ns >= w->end_ns && w->samples + w->drops >= SLUICE__WINDOW_MIN_SAMPLES;
}

gint64 sluice__window_median(sluice__window *w)
{
    guint n = MIN(w->samples, SLUICE__WINDOW_KEPT);
    if (n == 0)
        return 0;
    /* quickselect of the element at n / 2 (Hoare's partition) */
    gint64 *a = w->kept;
    gint lo = 0, hi = (gint)n - 1, k = (gint)n / 2;
    while (lo < hi) {
        gint64 pivot = a[lo + (hi - lo) / 2];
        gint i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i <= j) {
                gint64 t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return a[k];
}
