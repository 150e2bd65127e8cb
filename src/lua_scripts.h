/* SPDX-License-Identifier: MIT */
/* The Lua of lua/ for the redis backend, embedded at build time: per algorithm, its
 * entries as EVALSHA scripts and as the functions of the Redis 7 Function library
 * `sluice`, and that library. */
#ifndef SLUICE_LUA_SCRIPTS_H
#define SLUICE_LUA_SCRIPTS_H

#include "algorithm_table.h"

/* An algorithm's entries (lua/prelude.lua): decide, the common path, whose constants
 * the client works out; exact, the same decision on any rule; bands, a rule with
 * bands; warmup, a rule with a warm-up (token_bucket and gcra; NULL for the others);
 * penalize and block, a key's policy (sluice_penalize, sluice_block). */
typedef enum {
    SLUICE__LUA_DECIDE,
    SLUICE__LUA_EXACT,
    SLUICE__LUA_BANDS,
    SLUICE__LUA_WARMUP,
    SLUICE__LUA_PENALIZE,
    SLUICE__LUA_BLOCK,
} sluice__lua_entry;
#define SLUICE__LUA_ENTRIES 6

/* Indexed by sluice__algorithm and entry; generated from lua/ by cmake/embed_lua.cmake
 * for each row of SLUICE__ALGORITHM_TABLE, NULL where the row has no script. (Their
 * size here and the generated definitions' must agree, or the build fails.) */
/* The EVALSHA script: lua/prelude.lua, lua/NAME.lua and `return ENTRY(KEYS, ARGV)`. */
extern const char *const sluice__lua_scripts[SLUICE__ALGORITHMS][SLUICE__LUA_ENTRIES];
/* Its SHA1, in hex. */
extern const char *const sluice__lua_shas[SLUICE__ALGORITHMS][SLUICE__LUA_ENTRIES];
/* Its function in the library: sluice_HASH_NAME_ENTRY. */
extern const char *const sluice__lua_functions[SLUICE__ALGORITHMS][SLUICE__LUA_ENTRIES];

/* The library `sluice` (FUNCTION LOAD): every entry, and sluice_version, which
 * answers {version, hash} and writes nothing. */
extern const char sluice__lua_library[];
/* The first 12 hex digits of the library's SHA1 (its functions' names carry it). */
extern const char sluice__lua_library_hash[];
/* sluice's version as MAJOR * 10^6 + MINOR * 10^3 + PATCH: a library of a smaller
 * version is replaced, never one of a larger. */
extern const long sluice__lua_library_version;

#endif
