/* SPDX-License-Identifier: MIT */
/* The Redis scripts of lua/, embedded at build time: one per algorithm. */
#ifndef SLUICE_LUA_SCRIPTS_H
#define SLUICE_LUA_SCRIPTS_H

#include "algorithm_table.h"

/* Indexed by sluice__algorithm; generated from lua/NAME.lua by cmake/embed_lua.cmake
 * for each row of SLUICE__ALGORITHM_TABLE, NULL where the row has no script. (Its
 * size here and the generated definition's must agree, or the build fails.) */
extern const char *const sluice__lua_scripts[SLUICE__ALGORITHMS];

#endif
