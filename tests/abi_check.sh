#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The ABI guard (docs/abi.md): the public ABI of the built libsluice.so against the
# committed baseline abi/libsluice.so.MAJOR.abi of its soname, with libabigail's abidiff
# (Debian's abigail-tools), which reads the library's DWARF and looks only at the
# types that the installed headers (include/sluice/, and the generated version.h)
# declare. Fails when
#   - there is no baseline for the library's soname: the soname moved (a new major
#     version) without its baseline, or the baseline moved without the soname;
#   - abidiff finds an incompatible change (ABIDIFF_ABI_INCOMPATIBLE_CHANGE: a function
#     removed, ...), or a change to a function or type a program already uses (a
#     structure resized, a parameter changed): a break, which takes a new major version;
#   - abidiff fails, or the library has no debug information to read.
# What a minor version may add (functions; fields at the end of struct sluice_descriptor,
# which abi/libsluice.abignore allows) passes, its report printed: the baseline takes it
# with --update when that version is released.
#   abi_check.sh BUILD SRC            checks BUILD/libsluice.so
#   abi_check.sh --update BUILD SRC   writes SRC/abi/libsluice.so.MAJOR.abi from it; refuses
#                                     an incompatible change to an existing baseline
set -euo pipefail
update=0
if [ "${1:-}" = --update ]; then
    update=1
    shift
fi
build=$(realpath "$1")
src=$(realpath "$2")
lib=$build/libsluice.so
fail() {
    echo "abi_check: $*" >&2
    exit 1
}

[ -f "$lib" ] || fail "no $lib: build the target sluice first"
readelf -S "$lib" | grep -q '\.debug_info' ||
    fail "$lib has no debug information: abidiff needs a RelWithDebInfo or Debug build"
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -n "$soname" ] || fail "$lib has no soname"
baseline=$src/abi/$soname.abi
# the public headers, as installed: include/sluice/ and the generated version.h
headers=(--headers-dir "$src/include/sluice" --headers-dir "$build/include/sluice")
headers2=(--headers-dir2 "$src/include/sluice" --headers-dir2 "$build/include/sluice")

# abidiff's exit status is a bit field (abidiff(1)): ERROR 1, USAGE_ERROR 2, ABI_CHANGE 4,
# ABI_INCOMPATIBLE_CHANGE 8. abidiff sets 8 only for what it knows to break (a function
# or variable removed); a structure that grows, which breaks a program that allocates
# it, is ABI_CHANGE: so a change passes only when all it does is add (every "changes
# summary" line of the report: 0 Removed, 0 Changed). Prints the report; returns 0 when
# the built library offers everything the baseline has, unchanged, 1 otherwise.
compare() {
    local status=0 report
    report=$(abidiff --no-default-suppression --suppressions "$src/abi/libsluice.abignore" \
        --no-show-locs --drop-private-types "${headers2[@]}" "$baseline" "$lib") || status=$?
    [ -z "$report" ] || printf '%s\n' "$report"
    if [ $((status & 3)) -ne 0 ]; then
        fail "abidiff failed (exit status $status)"
    fi
    if [ $((status & 8)) -ne 0 ]; then
        echo "abi_check: an incompatible change of the ABI of $soname (above)" >&2
        return 1
    fi
    if [ $((status & 4)) -ne 0 ] &&
        grep -Eq 'changes summary: ([1-9][0-9]* Removed|[0-9]+ Removed, [1-9][0-9]* Changed)' <<<"$report"; then
        echo "abi_check: a change of what $soname already offered (above)" >&2
        return 1
    fi
    return 0
}

if [ $update -eq 1 ]; then
    if [ -f "$baseline" ] && ! compare; then
        fail "not updating $baseline: a break takes a new major version, and with it a new soname (docs/abi.md)"
    fi
    mkdir -p "$src/abi"
    # no paths of this machine in the file: the sources as SRC/, the build as BUILD/
    # (the locations stay: abidiff tells public types from private ones by them)
    abidw --no-corpus-path --no-comp-dir-path --type-id-style hash \
        --drop-private-types "${headers[@]}" "$lib" |
        sed "s|$build/|BUILD/|g; s|$src/|SRC/|g" >"$baseline.new"
    mv "$baseline.new" "$baseline"
    echo "abi_check: wrote $baseline"
    exit 0
fi

if [ ! -f "$baseline" ]; then
    have=$(cd "$src/abi" 2>/dev/null && ls -- *.abi 2>/dev/null | xargs)
    fail "no baseline for $soname (abi/ has: ${have:-nothing}). The soname and the baseline move together: a new major version commits its baseline with tests/abi_check.sh --update (docs/abi.md)"
fi
compare || fail "$lib breaks the ABI of the baseline $baseline; keep the ABI, or release a new major version with a new soname and baseline (docs/abi.md)"
echo "abi_check: $soname offers everything its baseline has"
