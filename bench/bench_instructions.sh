#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Instructions per call of the memory backend's operations (bench/memory_ops.c),
# counted by callgrind: a figure that does not move with the machine's load or speed,
# next to the ideal exact shared limit's (a clock read and a CAS) counted the same way.
#
#   bench/bench_instructions.sh BUILD_DIR    (a Release build with SLUICE_BUILD_BENCH)
#
# Each operation runs twice, N and 2N calls after the same start; the difference over N
# is what one call costs, start-up and shutdown cancelled out. The counter clock is
# used (valgrind emulates rdtsc); timed samples (one decision in eight) are averaged in.
set -euo pipefail
build=${1:?usage: bench_instructions.sh BUILD_DIR}
program=$build/bench/bench_instructions
N=20000
command -v valgrind >/dev/null || { echo "bench_instructions: valgrind is not installed" >&2; exit 1; }
[ -x "$program" ] || { echo "bench_instructions: no $program: build the benchmarks" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# instructions of `program OP CALLS`, as callgrind counts them
count() {
    valgrind --tool=callgrind --callgrind-out-file="$work/out" "$program" "$1" "$2" \
        >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    sed -n 's/^summary: //p' "$work/out"
}

# per call: the difference of N and 2N calls, over N
per_call() {
    local one two
    one=$(count "$1" "$N")
    two=$(count "$1" $((2 * N)))
    echo $(((two - one + N / 2) / N))
}

echo "instructions per call, counted by callgrind ($N and $((2 * N)) calls, the difference)"
printf '%-44s %12s %10s\n' "operation" "instr/call" "x ideal"
ideal=$(per_call ideal)
row() { # OP DESCRIPTION
    local n
    n=$(per_call "$1")
    awk -v d="$2" -v n="$n" -v i="$ideal" 'BEGIN { printf "%-44s %12d %9.1fx\n", d, n, n / i }'
}
printf '%-44s %12d %10s\n' "ideal exact shared limit (baseline)" "$ideal" "1.0x"
row acquire "allowed: sluice_acquire(name, NULL, 1)"
row decorated "allowed: RATE_LIMITED_FUNCTION call"
row keyed "allowed: RATE_LIMITED_KEY guard, 1000 keys"
row hot "hot limit: sluice_acquire, gcra"
row prefetch "hot limit, prefetch = 100"
row plain "plain call, undecorated"
row norule "no rule: RATE_LIMITED_FUNCTION call"
row norule-guard "no rule: RATE_LIMITED guard call"
