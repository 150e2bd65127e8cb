#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs sluice into a temporary prefix and builds examples/quickstart.c outside the
# tree twice, with pkg-config and with find_package(sluice); both must run and pass,
# and so must the installed sluice command. Then README.md's first program, its C and
# its keyfile as written there, built as README.md says, with an rpath. Then (from the
# source tree) a consumer that adds sluice with add_subdirectory and one with
# FetchContent, which build only the library, and sluice configured and built alone
# on what looks like a machine with only the library's dependencies.
#   install_consumer.sh BUILD SRC                  installs BUILD with cmake --install
#   install_consumer.sh --installed PREFIX SRC     uses what is already in PREFIX
#                                                  (tests/debian_packages.sh: the packages' files)
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$1" = --installed ]; then
    prefix=$(realpath "$2")
    src=$3
else
    prefix=$work/prefix
    cmake --install "$1" --prefix "$prefix" >/dev/null
    src=$2
fi
pcdir=$(dirname "$(find "$prefix" -name sluice.pc)")
libdir=$(dirname "$pcdir")

# 1. pkg-config
export PKG_CONFIG_PATH=$pcdir
cc -std=gnu11 -Wall -Wextra -Werror "$src/examples/quickstart.c" -o "$work/quickstart" \
    $(pkg-config --cflags --libs sluice)
LD_LIBRARY_PATH=$libdir "$work/quickstart" "$src/examples/quickstart.ini" >"$work/out.txt"
grep -q "export #5: ran the body" "$work/out.txt"
grep -q "export #6: degraded" "$work/out.txt"
# only the public API is exported
if nm -D --defined-only "$libdir/libsluice.so" | awk '{print $3}' | grep -v '^sluice_\|^sluice__enter$\|^sluice__leave$\|^sluice__register$' | grep -q .; then
    echo "symbols exported beyond the public API:" >&2
    nm -D --defined-only "$libdir/libsluice.so" | awk '{print $3}' | grep -v '^sluice' >&2
    exit 1
fi
# the soname is libsluice.so.MAJOR, the major version of sluice.pc (docs/abi.md)
major=$(pkg-config --modversion sluice | cut -d. -f1)
soname=$(objdump -p "$libdir/libsluice.so" | awk '$1 == "SONAME" { print $2 }')
if [ "$soname" != "libsluice.so.$major" ]; then
    echo "install_consumer: the soname is '$soname'; expected libsluice.so.$major" >&2
    exit 1
fi
# and nothing of sluice's own test hooks (tests/support/testing.h): neither symbol nor header
if nm -D --defined-only "$libdir/libsluice.so" | grep -q sluice_testing_ ||
    [ -e "$prefix/include/sluice/testing.h" ]; then
    echo "install_consumer: the test hooks are installed" >&2
    exit 1
fi

# the sluice command runs from the prefix (it finds the library beside it) and has its man page
"$prefix/bin/sluice" lint "$src/examples/quickstart.ini" | grep -q ": ok$"
test -f "$prefix/share/man/man1/sluice.1" || test -f "$prefix/share/man/man1/sluice.1.gz" # (gzipped in the packages)

# 2. find_package(sluice), static archive
mkdir -p "$work/consumer"
cp "$src/examples/quickstart.c" "$work/consumer/"
cat >"$work/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(sluice REQUIRED)
add_executable(quickstart quickstart.c)
target_link_libraries(quickstart PRIVATE sluice::sluice_static)
CMAKE
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer/build" >/dev/null
"$work/consumer/build/quickstart" "$src/examples/quickstart.ini" >/dev/null
# 3. README.md's "A first program": app.c and limits.ini as written, the output it states
mkdir -p "$work/readme"
awk '/^## A first program/ { on = 1; next } /^## / { on = 0 }
     on && /^```c$/ { out = "app.c"; next } on && /^```ini$/ { out = "limits.ini"; next }
     /^```$/ { out = ""; next } on && out { print > (dir "/" out) }' dir="$work/readme" "$src/README.md"
(cd "$work/readme" && cc app.c -o app $(pkg-config --cflags --libs sluice) -Wl,-rpath,"$libdir" &&
    ./app >out.txt) || { echo "install_consumer: README.md's first program failed" >&2; exit 1; }
grep -qx "call 5: export 200, login 429" "$work/readme/out.txt" &&
    grep -qx "call 6: export 429, login 429" "$work/readme/out.txt" ||
    { echo "install_consumer: README.md's first program printed:" >&2; cat "$work/readme/out.txt" >&2; exit 1; }


if [ "$1" != --installed ]; then
    # 4. add_subdirectory and FetchContent: only the library is built (no suite, no
    # example, no benchmark), and sluice's warnings stay on sluice's targets
    for how in add_subdirectory FetchContent; do
        dir=$work/$how
        mkdir -p "$dir"
        cp "$src/examples/quickstart.c" "$dir/"
        if [ $how = add_subdirectory ]; then
            add="add_subdirectory(\"$src\" sluice)"
        else
            add="include(FetchContent)
FetchContent_Declare(sluice SOURCE_DIR \"$src\")
FetchContent_MakeAvailable(sluice)"
        fi
        cat >"$dir/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(consumer C)
$add
add_executable(quickstart quickstart.c)
target_link_libraries(quickstart PRIVATE sluice::sluice)
CMAKE
        cmake -S "$dir" -B "$dir/build" -DSLUICE_LTO=OFF >/dev/null
        cmake --build "$dir/build" -j2 --target quickstart >/dev/null
        "$dir/build/quickstart" "$src/examples/quickstart.ini" | grep -q "export #6: degraded" ||
            { echo "install_consumer: the $how consumer's quickstart failed" >&2; exit 1; }
        for t in check_api quickstart_example http_service bench_memory; do
            if find "$dir/build" -name "$t" -type f | grep -q .; then
                echo "install_consumer: the $how consumer built sluice's $t" >&2
                exit 1
            fi
        done
        if grep -q -- "-Wcast-qual\|-Werror" "$dir/build/CMakeFiles/quickstart.dir/flags.make"; then
            echo "install_consumer: the $how consumer's own target got sluice's warnings" >&2
            exit 1
        fi
    done

    # 5. sluice alone, where pkg-config knows only the library's dependencies and there is
    # no doxygen: it configures (each optional part off, with a message) and builds
    mkdir -p "$work/bare/bin"
    cat >"$work/bare/bin/pkg-config" <<'SH'
#!/bin/sh
# pkg-config of a machine without check, libpng, json-glib and libsoup
for a in "$@"; do
    case "$a" in check* | libpng* | json-glib* | libsoup*) exit 1 ;; esac
done
exec /usr/bin/pkg-config "$@"
SH
    chmod +x "$work/bare/bin/pkg-config"
    cmake -S "$src" -B "$work/bare/build" -DPKG_CONFIG_EXECUTABLE="$work/bare/bin/pkg-config" \
        -DDOXYGEN_EXECUTABLE=DOXYGEN_EXECUTABLE-NOTFOUND -DSLUICE_LTO=OFF >"$work/bare/configure.txt" ||
        { echo "install_consumer: sluice did not configure without its optional dependencies" >&2;
          cat "$work/bare/configure.txt" >&2; exit 1; }
    for part in "the check suites" "examples/http_service"; do
        grep -qF "sluice: $part" "$work/bare/configure.txt" ||
            { echo "install_consumer: no message that $part is off" >&2; cat "$work/bare/configure.txt" >&2; exit 1; }
    done
    cmake --build "$work/bare/build" -j2 --target sluice sluice_cli >/dev/null
fi

echo "install_consumer: pkg-config, find_package, add_subdirectory and FetchContent consumers, README.md's first program, and a build without optional dependencies passed"
