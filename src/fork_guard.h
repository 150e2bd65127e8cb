/* SPDX-License-Identifier: MIT */
/* fork() while other threads decide: the child finds the decision path's locks free. */
#ifndef SLUICE_FORK_GUARD_H
#define SLUICE_FORK_GUARD_H

/* Installs the pthread_atfork handlers, once per process; called by sluice_init. */
void sluice__fork_guard_install(void);

#endif
