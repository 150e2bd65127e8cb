/* SPDX-License-Identifier: MIT */
/* The hash of a caller's key that the in-process tables share (the memory
 * backend's per-key states, a limit's overrides): a word at a time, seeded per
 * table so that keys cannot be chosen from outside to collide. */
#ifndef SLUICE_KEY_HASH_H
#define SLUICE_KEY_HASH_H

#include <string.h>

#include <glib.h>

/* The hash of the len bytes of key under seed (then mixed as MurmurHash3's
 * finalizer): every bit depends on every byte. */
static inline guint64 sluice__key_hash(const char *key, gsize len, guint64 seed)
{
    guint64 h = seed ^ (len * G_GUINT64_CONSTANT(0x9e3779b97f4a7c15));
    const char *p = key;
    for (; len >= 8; len -= 8, p += 8) {
        guint64 w;
        memcpy(&w, p, 8);
        h = (h ^ w) * G_GUINT64_CONSTANT(0xff51afd7ed558ccd);
        h ^= h >> 32;
    }
    guint64 w = 0;
    memcpy(&w, p, len);
    h = (h ^ w) * G_GUINT64_CONSTANT(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    h *= G_GUINT64_CONSTANT(0xff51afd7ed558ccd);
    h ^= h >> 33;
    return h;
}

/* A seed for a table: random, per process. */
static inline guint64 sluice__key_seed(void)
{
    return (guint64)g_random_int() << 32 | g_random_int();
}

#endif
