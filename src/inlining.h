/* SPDX-License-Identifier: MIT */
/* How the path of a decision is compiled: one function, with no calls between files.
 *
 * The entry points of a decision (sluice_acquire, and the macros' sluice__enter
 * past a name with no rule) are flattened: every call they make is inlined into
 * them, and with link-time optimization (the build's default with GCC,
 * CMakeLists.txt) that crosses files, so an in-process decision runs from the
 * name's lookup to the counters without a call between the library's files
 * (about 30% fewer instructions than through the files' functions). What a
 * decision seldom needs, or needs at the cost of a round trip, a wait or a lock, is
 * kept out of line, so that flattening copies only the path that is taken most. */
#ifndef SLUICE_INLINING_H
#define SLUICE_INLINING_H

/* An entry point of a decision: what it calls is inlined into it. */
#define SLUICE__FLATTEN __attribute__((flatten))

/* Not on the common path of a decision: left a call. */
#define SLUICE__OUT_OF_LINE __attribute__((noinline))

#endif
