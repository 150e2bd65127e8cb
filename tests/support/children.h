/* SPDX-License-Identifier: MIT */
/* Processes that a suite or a benchmark forks at once (to share a zone, say) and
 * waits for together. */
#ifndef SLUICE_TEST_CHILDREN_H
#define SLUICE_TEST_CHILDREN_H

#include <sys/types.h>

#include <glib.h>

/* What child i of children_fork runs; it returns its exit status. */
typedef int (*children_body)(guint i, gpointer data);

/* Forks n children, their pids in pids[]: child i runs body(i, data) and exits with
 * what it returns, or dies of SIGALRM after alarm_s seconds (0: never). Aborts
 * (g_error) when fork fails. */
void children_fork(guint n, guint alarm_s, children_body body, gpointer data, pid_t *pids);

/* Waits for the n children of pids; returns how many exited with status 0. */
guint children_wait(guint n, const pid_t *pids);

#endif
