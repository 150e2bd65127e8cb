#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The API reference (the `docs` target: cmake/docs_headers.cmake, then Doxygen over
# include/sluice with cmake/Doxyfile.in) builds with no warning, documents every function
# the shared library exports, and its gate can fail: a copy of the headers with an
# undocumented function, and a header without @file, are both refused.
#   api_docs.sh BUILD SRC LIBRARY (the shared library this build made: a build directory may
#   hold an older one beside it)
set -euo pipefail
build=$1
src=$2
lib=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
    echo "api_docs: $*" >&2
    exit 1
}

# 1. the target builds, and Doxygen says nothing (QUIET: what it prints is a warning)
rm -rf "$build/docs"
cmake --build "$build" --target docs >"$work/out.txt" 2>&1 || {
    cat "$work/out.txt" >&2
    fail "the docs target failed"
}
if grep -v '^API reference: \|Built target docs\|^\[.*\]\|^gmake\|^make' "$work/out.txt" | grep -q .; then
    cat "$work/out.txt" >&2
    fail "the docs target printed more than its comment (above)"
fi
[ -f "$build/docs/html/index.html" ] || fail "no $build/docs/html/index.html"

# 2. every function the shared library exports (but the macros' own sluice__ helpers) is in
# the reference, as a documented member
[ -f "$lib" ] || fail "no $lib"
nm -D --defined-only "$lib" | awk '{ print $3 }' | grep '^sluice_' | grep -v '^sluice__' |
    sort >"$work/exported"
[ -s "$work/exported" ] || fail "$lib exports no sluice_ function"
grep -o '<member refid="[^"]*" kind="function"><name>[^<]*' "$build/docs/xml/index.xml" |
    sed 's/.*<name>//' | sort -u >"$work/documented"
if comm -23 "$work/exported" "$work/documented" | grep .; then
    fail "exported but not in the API reference (above)"
fi

# 3. the gate refuses what is undocumented: an undocumented function in a documented
# header (Doxygen's warning fails it), and a header without @file (whose symbols Doxygen
# would not even mention)
cp -r "$src/include/sluice" "$work/sluice"
sed -i 's|^G_END_DECLS|SLUICE_API int sluice_undocumented_probe(int x);\nG_END_DECLS|' \
    "$work/sluice/acquire.h"
sed -e "s|^INPUT .*|INPUT = $work/sluice|" -e "s|^OUTPUT_DIRECTORY .*|OUTPUT_DIRECTORY = $work/out|" \
    "$build/Doxyfile" >"$work/Doxyfile"
if doxygen "$work/Doxyfile" >"$work/probe.txt" 2>&1; then
    fail "Doxygen accepted an undocumented sluice_undocumented_probe"
fi
grep -q "sluice_undocumented_probe.*not documented" "$work/probe.txt" ||
    fail "Doxygen failed, but not on the undocumented function: $(cat "$work/probe.txt")"
printf '#ifndef PROBE_H\n#define PROBE_H\nint sluice_probe(void);\n#endif\n' >"$work/sluice/probe.h"
if cmake -DHEADERS="$work/sluice" -P "$src/cmake/docs_headers.cmake" >"$work/files.txt" 2>&1; then
    fail "a header without @file was accepted"
fi
grep -q "probe.h" "$work/files.txt" || fail "the refusal does not name probe.h: $(cat "$work/files.txt")"
echo "api_docs: the reference builds with no warning and documents all $(wc -l <"$work/exported") exported functions"
