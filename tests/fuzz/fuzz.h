/* SPDX-License-Identifier: MIT */
/* What the libFuzzer harnesses share: the entry point and an assertion that aborts. */
#ifndef SLUICE_FUZZ_H
#define SLUICE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* libFuzzer's entry point, one per harness; replay.c calls it in the normal build. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of the code under test: a crash (and so a finding) when it fails,
 * whatever the build type. */
#define FUZZ_ASSERT(cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
