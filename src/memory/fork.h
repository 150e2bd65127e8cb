/* SPDX-License-Identifier: MIT */
/* Every memory store of the process, in one list: fork() holds them all
 * (sluice__memory_stores_lock, src/memory/memory.h). */
#ifndef SLUICE_MEMORY_FORK_H
#define SLUICE_MEMORY_FORK_H

#include "limiter.h"

/* A store made, or about to be freed: in the list, or out of it. */
void sluice__memory_stores_add(sluice__memory_store *store);
void sluice__memory_stores_remove(sluice__memory_store *store);

#endif
