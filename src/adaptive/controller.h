/* SPDX-License-Identifier: MIT */
/* The controllers of an adaptive limit: each turns what one window of calls measured
 * into the next limit (docs/algorithms.md gives each formula). They are pure
 * arithmetic on the numbers they are given, so tests drive them on any clock. */
#ifndef SLUICE_ADAPTIVE_CONTROLLER_H
#define SLUICE_ADAPTIVE_CONTROLLER_H

#include <glib.h>

typedef enum {
    SLUICE__CONTROLLER_GRADIENT, /* the default */
    SLUICE__CONTROLLER_VEGAS,
    SLUICE__CONTROLLER_AIMD,
} sluice__controller;

/* The controllers' names in the keyfile, in sluice__controller order, NULL-ended. */
extern const char *const sluice__controller_names[];

/* What one window of calls measured, as every controller reads it. */
typedef struct {
    gint64 latency_ns;    /* the median latency of the calls that returned ok; 0: none did */
    gint64 base_ns;       /* the no-load latency (baseline.h); 0: not known yet         */
    gint64 max_in_flight; /* the most calls in flight at once                           */
    guint drops;          /* calls that ended dropped (a timeout, an error callback)    */
} sluice__window_view;

/* Each returns the limit after the window from the limit before it (a real number:
 * the limit admits its whole part), before it is kept within min_limit and limit. */
double sluice__gradient_next(double limit, const sluice__window_view *w);
double sluice__vegas_next(double limit, const sluice__window_view *w);
double sluice__aimd_next(double limit, const sluice__window_view *w);

/* The controller c's next limit. */
double sluice__controller_next(sluice__controller c, double limit, const sluice__window_view *w);

#endif
