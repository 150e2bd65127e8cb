#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The installed headers as consumers compile them, with -Wall -Wextra -Wpedantic
# -Werror: each header alone (GCC as C99 and as C++17), and tests/header_consumer.c
# (both decorating forms and the API) as C99, C11 and C++17 with GCC and, when
# installed, Clang. Each consumer must run and pass, and `sluice lint --program` must
# find every name it decorates. docs/compilers.md states what this checks.
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
pcdir=$(dirname "$(find "$work/prefix" -name sluice.pc)")
libdir=$(dirname "$pcdir")
export PKG_CONFIG_PATH=$pcdir
cflags=$(pkg-config --cflags sluice)
libs=$(pkg-config --libs sluice)
warnings="-Wall -Wextra -Wpedantic -Werror"

printf "[sluice]\nbackend = memory\non_error = allow\n" >"$work/consumer.ini"
for name in twice thrice flush healthz login; do # each 1 per hour; login per user
    printf "[limit:consumer.%s]\nlimit = 1\nwindow = 1h\n" $name >>"$work/consumer.ini"
done
echo "per_key = true" >>"$work/consumer.ini"
# the same limits on a Redis that does not answer: every decision fails (docs/api.md)
{
    printf "[sluice]\nbackend = redis\nredis = redis://127.0.0.1:1/0\ntimeout = 50ms\n"
    printf "on_error = allow\n"
    sed '1,/^on_error/d' "$work/consumer.ini"
} >"$work/down.ini"

compilers=("gcc -std=c99" "gcc -std=c11" "g++ -std=c++17 -x c++")
if command -v clang >/dev/null && command -v clang++ >/dev/null; then
    compilers+=("clang -std=c99" "clang -std=c11" "clang++ -std=c++17 -x c++")
else
    echo "header_standards: clang is not installed: GCC only"
fi
for compiler in "gcc -std=c99" "g++ -std=c++17 -x c++"; do
    for header in "$work"/prefix/include/sluice/*.h; do
        printf "#include <sluice/%s>\ntypedef int not_empty;\n" "${header##*/}" >"$work/one.c"
        $compiler $warnings $cflags -fsyntax-only "$work/one.c" ||
            { echo "header_standards: $compiler: <sluice/${header##*/}> alone fails" >&2; exit 1; }
    done
done
n=0
for compiler in "${compilers[@]}"; do
    n=$((n + 1))
    $compiler $warnings $cflags "$src/tests/header_consumer.c" -x none $libs -o "$work/consumer$n" ||
        { echo "header_standards: $compiler: tests/header_consumer.c fails to compile" >&2; exit 1; }
    LD_LIBRARY_PATH=$libdir "$work/consumer$n" "$work/consumer.ini" "$work/down.ini" |
        grep -qx "header_consumer: ok" ||
        { echo "header_standards: $compiler: the consumer failed" >&2; exit 1; }
    # its site records: every name has a rule, every rule a name
    lint=$("$work/prefix/bin/sluice" lint --program "$work/consumer$n" "$work/consumer.ini" 2>&1) &&
        [ "$lint" = "$work/consumer.ini: ok" ] ||
        { echo "header_standards: $compiler: sluice lint --program: $lint" >&2; exit 1; }
done
echo "header_standards: each header alone, and the consumer built, run and linted: ${compilers[*]}"
