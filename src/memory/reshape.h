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

/* With the lock held, the store laid out for rule: blocks the calls without a key
 * until until_us (0: lifts the block). While blocked they are decided under the lock,
 * where the block is seen, not on the lock-free state. */
void sluice__memory_block_keyless(sluice__memory_store *store, const sluice__rule *rule,
                                  gint64 until_us);

#endif
