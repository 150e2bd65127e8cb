/* SPDX-License-Identifier: MIT */
/* The controllers by name: the keyfile's words, and the one that decides. */
#include "adaptive/controller.h"

const char *const sluice__controller_names[] = {"gradient", "vegas", "aimd", NULL};

double sluice__controller_next(sluice__controller c, double limit, const sluice__window_view *w)
{
    switch (c) {
    case SLUICE__CONTROLLER_VEGAS:
        return sluice__vegas_next(limit, w);
    case SLUICE__CONTROLLER_AIMD:
        return sluice__aimd_next(limit, w);
    default:
        return sluice__gradient_next(limit, w);
    }
}
