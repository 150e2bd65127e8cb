/* SPDX-License-Identifier: MIT */
/* A reload's change to a memory store: its states laid out for the new rule. */
#ifndef SLUICE_MEMORY_RESHAPE_H
#define SLUICE_MEMORY_RESHAPE_H

#include "limiter.h"
#include "rule.h"

/* With the lock held: the store's states laid out for rule. A rule that keeps state
 * differently (another algorithm or per_key) starts the store afresh; other changes
 * apply to the states as they are, and a band that stays (the same limit, window
 * and burst) keeps its state when others come and go. Lock-free decisions laid out
 * for another rule start again. */
void sluice__memory_reshape(sluice__memory_store *store, const sluice__rule *rule);

#endif
