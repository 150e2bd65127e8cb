/* SPDX-License-Identifier: MIT */
/* The Redis scripts of lua/, embedded at build time: one per algorithm. */
#ifndef SLUICE_LUA_SCRIPTS_H
#define SLUICE_LUA_SCRIPTS_H

/* Indexed by sluice__algorithm; generated from lua/NAME.lua by cmake/embed_lua.cmake. */
extern const char *const sluice__lua_scripts[];

#endif
