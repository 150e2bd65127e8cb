/* SPDX-License-Identifier: MIT */
/* The clock decisions read (src/counter_clock.c, compiled in): on the time-stamp
 * counter where the kernel keeps CLOCK_MONOTONIC on it, and always within a few
 * microseconds of clock_gettime, never back on a thread, across its re-anchoring,
 * with threads reading at once; a counter that jumps is left for clock_gettime;
 * SLUICE_CLOCK=system reads clock_gettime; and
 * sluice_clock_now, the public reading, follows a virtual clock when one is set. */
#include <check.h>
#include <glib.h>
#include <string.h>
#include <time.h>

#include <sluice/sluice.h>

#include "counter_clock.h"

#define TOLERANCE_NS (20 * G_GINT64_CONSTANT(1000))     /* this clock vs clock_gettime */
#define RUN_NS       (600 * G_GINT64_CONSTANT(1000000)) /* > 30 anchors of 16 ms */

static gint64 system_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (gint64)t.tv_sec * G_GINT64_CONSTANT(1000000000) + t.tv_nsec;
}

/* Reads the clock between two clock_gettime reads for RUN_NS: each reading lies
 * within TOLERANCE_NS of the two, and none is less than the one before. Returns
 * the readings made. */
static gpointer bracket(gpointer unused)
{
    (void)unused;
    gint64 end = system_ns() + RUN_NS, previous = G_MININT64;
    gint64 readings = 0;
    for (;;) {
        gint64 before = system_ns();
        gint64 now = sluice__monotonic_ns();
        gint64 after = system_ns();
        ck_assert_int_ge(now, before - TOLERANCE_NS);
        ck_assert_int_le(now, after + TOLERANCE_NS);
        ck_assert_int_ge(now, previous);
        previous = now;
        readings++;
        if (after >= end)
            break;
    }
    return GINT_TO_POINTER(readings > 0);
}

/* The kernel keeps CLOCK_MONOTONIC on the time-stamp counter (as on the machines
 * CI runs on); the counter must be invariant too, which /proc/cpuinfo says. */
static gboolean machine_has_counter_clock(void)
{
    g_autofree char *source = NULL, *cpuinfo = NULL;
    if (!g_file_get_contents("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                             &source, NULL, NULL) ||
        !g_file_get_contents("/proc/cpuinfo", &cpuinfo, NULL, NULL))
        return FALSE;
    return strcmp(g_strstrip(source), "tsc") == 0 && strstr(cpuinfo, " constant_tsc") &&
           strstr(cpuinfo, " nonstop_tsc");
}

START_TEST(the_counter_is_read_where_the_kernel_keeps_the_clock_on_it)
{
#if defined(__x86_64__)
    ck_assert_str_eq(sluice__monotonic_source(), machine_has_counter_clock() ? "tsc" : "system");
#else
    ck_assert_str_eq(sluice__monotonic_source(), "system");
#endif
}
END_TEST

START_TEST(it_stays_within_microseconds_of_clock_gettime_and_never_goes_back)
{
    ck_assert(bracket(NULL));
}
END_TEST

START_TEST(threads_reading_at_once_each_see_it_so)
{
    GThread *threads[4];
    for (guint i = 0; i < G_N_ELEMENTS(threads); i++)
        threads[i] = g_thread_new("reader", bracket, NULL);
    for (guint i = 0; i < G_N_ELEMENTS(threads); i++)
        ck_assert(g_thread_join(threads[i]));
}
END_TEST

START_TEST(sluice_clock_system_reads_clock_gettime)
{
    g_setenv("SLUICE_CLOCK", "system", TRUE); /* a forked test: the first reading here */
    ck_assert_str_eq(sluice__monotonic_source(), "system");
    ck_assert(bracket(NULL));
}
END_TEST

/* The counter jumps by `by` ns while clock_gettime does not: the first reading
 * after the jump leaves the counter for clock_gettime, and the clock stays within
 * microseconds of clock_gettime, never back. */
static void counter_jumps(gint64 by)
{
    if (!machine_has_counter_clock()) {
        ck_assert_str_eq(sluice__monotonic_source(), "system"); /* nothing to leave */
        return;
    }
    ck_assert_str_eq(sluice__monotonic_source(), "tsc");
    sluice__monotonic_ns();
    sluice__monotonic_jump(by);
    gint64 before = system_ns();
    gint64 now = sluice__monotonic_ns();
    gint64 after = system_ns();
    ck_assert_str_eq(sluice__monotonic_source(), "system");
    ck_assert_int_ge(now, before - TOLERANCE_NS);
    ck_assert_int_le(now, after + TOLERANCE_NS);
    ck_assert(bracket(NULL));
}

START_TEST(a_counter_that_jumps_ahead_is_left_for_clock_gettime)
{
    counter_jumps(2 * G_GINT64_CONSTANT(1000000000));
}
END_TEST

START_TEST(a_counter_that_jumps_back_is_left_for_clock_gettime)
{
    counter_jumps(-2 * G_GINT64_CONSTANT(1000000000));
}
END_TEST

static gint64 virtual_now(gpointer data)
{
    return *(gint64 *)data;
}

START_TEST(sluice_clock_now_follows_a_virtual_clock_and_then_the_real_one)
{
    gint64 t = G_GINT64_CONSTANT(1795478400000000);
    sluice_clock_set(virtual_now, NULL, &t);
    ck_assert_int_eq(sluice_clock_now(), t);
    t += 1;
    ck_assert_int_eq(sluice_clock_now(), t);
    sluice_clock_set(NULL, NULL, NULL);
    gint64 before = g_get_monotonic_time();
    gint64 now = sluice_clock_now();
    gint64 after = g_get_monotonic_time();
    ck_assert_int_ge(now, before - TOLERANCE_NS / 1000);
    ck_assert_int_le(now, after + TOLERANCE_NS / 1000);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("clock");
    TCase *tc = tcase_create("clock");
    tcase_add_test(tc, the_counter_is_read_where_the_kernel_keeps_the_clock_on_it);
    tcase_add_test(tc, it_stays_within_microseconds_of_clock_gettime_and_never_goes_back);
    tcase_add_test(tc, threads_reading_at_once_each_see_it_so);
    tcase_add_test(tc, sluice_clock_system_reads_clock_gettime);
    tcase_add_test(tc, a_counter_that_jumps_ahead_is_left_for_clock_gettime); /* forked: */
    tcase_add_test(tc, a_counter_that_jumps_back_is_left_for_clock_gettime);  /* one each */
    tcase_add_test(tc, sluice_clock_now_follows_a_virtual_clock_and_then_the_real_one);
    suite_add_tcase(suite, tc);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}
