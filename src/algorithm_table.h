/* SPDX-License-Identifier: MIT */
/* The algorithms sluice knows: one table gives their codes, their keyfile names,
 * their Redis keys' tags and which of them a Lua script decides on Redis.
 * CMakeLists.txt reads this table too (cmake/algorithms.cmake) and embeds
 * lua/NAME.lua for each row with a script, so the C side and the scripts cannot
 * disagree. */
#ifndef SLUICE_ALGORITHM_TABLE_H
#define SLUICE_ALGORITHM_TABLE_H

/* X(code, name, tag, script), in the order of sluice__algorithm:
 *   code    its sluice__algorithm value
 *   name    its keyfile name (algorithm = NAME)
 *   tag     its Redis keys' tag after key_prefix ("sluice:fw:"), so that a limit whose
 *           algorithm a reload changes starts on fresh keys
 *   script  TRUE: lua/NAME.lua decides it on Redis; FALSE: it decides in process only
 * One row a line, as cmake/algorithms.cmake reads them. */
#define SLUICE__ALGORITHM_TABLE(X)                                                                 \
    X(SLUICE__FIXED_WINDOW, "fixed_window", "fw", TRUE)                                            \
    X(SLUICE__SLIDING_LOG, "sliding_log", "sl", TRUE)                                              \
    X(SLUICE__SLIDING_WINDOW, "sliding_window", "sw", TRUE)                                        \
    X(SLUICE__TOKEN_BUCKET, "token_bucket", "tb", TRUE)                                            \
    X(SLUICE__GCRA, "gcra", "gc", TRUE)                                                            \
    X(SLUICE__CONCURRENCY, "concurrency", "cc", TRUE)                                              \
    X(SLUICE__ADAPTIVE, "adaptive", "ad", FALSE)

/* How many rows the table has: an integer constant. */
#define SLUICE__ALGORITHM_ROW(code, name, tag, script) +1
#define SLUICE__ALGORITHMS                             (0 SLUICE__ALGORITHM_TABLE(SLUICE__ALGORITHM_ROW))

#endif
