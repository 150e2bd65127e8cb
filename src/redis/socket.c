/* SPDX-License-Identifier: MIT */
/* Waiting on a non-blocking socket until a deadline, with ppoll(). */
#define _GNU_SOURCE /* ppoll */
#include "redis/socket.h"

#include <errno.h>
#include <poll.h>
#include <time.h>

gboolean sluice__redis_ready(int fd, short events, gint64 deadline)
{
    for (;;) {
        gint64 left = deadline - g_get_monotonic_time();
        if (left <= 0)
            return FALSE;
        struct pollfd p = {.fd = fd, .events = events};
        struct timespec ts = {.tv_sec = left / 1000000, .tv_nsec = left % 1000000 * 1000};
        int n = ppoll(&p, 1, &ts, NULL);
        if (n > 0)
            return TRUE; /* ready, or an error or hang-up that the next I/O reports */
        if (n < 0 && errno != EINTR)
            return TRUE;
    }
}
