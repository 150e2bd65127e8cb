/* SPDX-License-Identifier: MIT */
/* SipHash-1-3 (Aumasson and Bernstein), as Rust's and Python's hash tables use it:
 * fast on short keys and keyed, so that keys cannot be chosen to collide. */
#include "shm/hash.h"

#include <string.h>

#define ROTL(x, b) (guint64)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

static inline guint64 load64(const guint8 *p)
{
    guint64 v;
    memcpy(&v, p, 8);
    return GUINT64_FROM_LE(v);
}

guint64 sluice__shm_hash(const guint64 k[2], guint64 domain, const void *bytes, gsize length)
{
    guint64 v0 = k[0] ^ G_GUINT64_CONSTANT(0x736f6d6570736575);
    guint64 v1 = k[1] ^ G_GUINT64_CONSTANT(0x646f72616e646f6d);
    guint64 v2 = k[0] ^ G_GUINT64_CONSTANT(0x6c7967656e657261);
    guint64 v3 = k[1] ^ G_GUINT64_CONSTANT(0x7465646279746573);
    const guint8 *p = bytes;

    /* the domain as a first message word */
    v3 ^= domain;
    SIPROUND;
    v0 ^= domain;
    gsize left = length;
    for (; left >= 8; p += 8, left -= 8) {
        guint64 m = load64(p);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    guint64 b = (guint64)(length + 8) << 56;
    for (gsize i = 0; i < left; i++)
        b |= (guint64)p[i] << (8 * i);
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}
