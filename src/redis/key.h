/* SPDX-License-Identifier: MIT */
/* The Redis key names of a limit and a caller: injective, one exact hash tag. */
#ifndef SLUICE_REDIS_KEY_H
#define SLUICE_REDIS_KEY_H

#include <glib.h>

#include "limiter.h"

/* Keys longer than this many bytes are stored under their SHA-256 instead. */
#define SLUICE__REDIS_KEY_MAX_PLAIN 200

/* The keys one script call touches: state = PREFIX{TAG}, seq = PREFIX{TAG}:seq.
 *
 * TAG is LEN:NAME:KEY, where LEN is the name's length in bytes (decimal), and NAME
 * and KEY are escaped: `%`, `{`, `}`, space, the control characters and DEL become
 * %XX (two upper-case hex digits); every other byte stays as it is. A key of more
 * than SLUICE__REDIS_KEY_MAX_PLAIN bytes makes TAG LEN:NAME#HEX instead, HEX being
 * the 64 lower-case hex digits of the key's SHA-256. A NULL key is the empty key
 * (sluice's API refuses empty keys, so the empty key is "no key").
 *
 * So TAG never holds a brace: both keys have exactly one `{` and one `}`, Redis
 * Cluster hashes exactly TAG, and both land in one slot. Different (name, key)
 * pairs give different keys (a hashed key differs from every plain one by the `#`
 * after the name; two hashed keys collide only if SHA-256 does). The prefix must
 * pass sluice__redis_key_prefix_check. */
typedef struct {
    char *state;
    char *seq;
} sluice__redis_keys;

void sluice__redis_keys_build(sluice__redis_keys *out, const char *prefix, const char *name,
                              const char *key);
void sluice__redis_keys_clear(sluice__redis_keys *keys);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(sluice__redis_keys, sluice__redis_keys_clear)

/* The state key written straight into a command, from what is cached: the key
 * prefix with the algorithm's tag (the backend's), and the limit name's part of
 * TAG, "{LEN:NAME" (escaped), which sluice__redis_name_tag makes at the limiter's
 * first call and keeps with it (registry.c frees it). The same key as
 * sluice__redis_keys_build's state. */
const char *sluice__redis_name_tag(sluice__limiter *limiter);
/* The bytes of PREFIX TAG + the rest of the key (key NULL: the empty key), where
 * head_len is the length of PREFIX TAG. */
gsize sluice__redis_key_size(gsize head_len, const char *key);
/* Writes the key at out (sluice__redis_key_size bytes); its length. */
gsize sluice__redis_key_write(char *out, const char *prefix, gsize prefix_len, const char *tag,
                              gsize tag_len, const char *key);

/* TRUE when prefix can start sluice's keys: it holds no `{` or `}` (which would
 * move the hash tag). FALSE and a sentence in *why otherwise. */
gboolean sluice__redis_key_prefix_check(const char *prefix, char **why);

#endif
