/* SPDX-License-Identifier: MIT */
/* The keyed hash of the shm backend: which stripe, cell and tag a key's state has. */
#ifndef SLUICE_SHM_HASH_H
#define SLUICE_SHM_HASH_H

#include <glib.h>

/* SipHash-1-3 of `length` bytes under the 128-bit key k (the zone's secret), with
 * `domain` mixed in first: another domain, another hash of the same bytes. A
 * program that cannot read the zone cannot choose keys that collide. */
guint64 sluice__shm_hash(const guint64 k[2], guint64 domain, const void *bytes, gsize length);

/* A second hash from a first and a number (a band's): one multiply-mix. */
static inline guint64 sluice__shm_mix(guint64 h, guint64 n)
{
    h ^= n * G_GUINT64_CONSTANT(0x9e3779b97f4a7c15);
    h ^= h >> 33;
    h *= G_GUINT64_CONSTANT(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= G_GUINT64_CONSTANT(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h;
}

#endif
