/* SPDX-License-Identifier: MIT */
/* Following the master through a failover: a thread subscribed to every Sentinel. */
#ifndef SLUICE_REDIS_SENTINEL_WATCH_H
#define SLUICE_REDIS_SENTINEL_WATCH_H

#include <glib.h>

#include "redis/sentinel.h"

typedef struct sluice__redis_watch sluice__redis_watch;

/* Called on the watch's thread with a master that said so (ROLE), after a
 * +switch-master or a request. */
typedef void (*sluice__redis_found_func)(const char *host, int port, gpointer data);

/* Starts a thread that keeps a subscription to +switch-master on each of s's
 * Sentinels and calls found with the master they switch to, and finds the master
 * again when asked (sluice__redis_watch_ask). step_us bounds each exchange with a
 * Sentinel or a server. s must outlive it. */
sluice__redis_watch *sluice__redis_watch_new(sluice__redis_sentinel *s, gint64 step_us,
                                             sluice__redis_found_func found, gpointer data);
/* Stops the thread for good and waits for it (at most a few steps); asking does
 * nothing from then on. In a child process whose own thread never started, there
 * is nothing to wait for. */
void sluice__redis_watch_stop(sluice__redis_watch *w);
/* Stops it, and frees it: nobody may ask any more. */
void sluice__redis_watch_free(sluice__redis_watch *w);

/* A call to the master failed (no connection, a timeout, READONLY): find it again
 * now, and until it is found. From any thread, without a lock or an allocation;
 * in a child process after fork() the first ask starts the child's own thread. */
void sluice__redis_watch_ask(sluice__redis_watch *w);

#endif
