#!/usr/bin/env bash
# Installs sluice into a temporary prefix and builds examples/quickstart.c outside the
# tree twice, with pkg-config and with find_package(sluice); both must run and pass,
# and so must the installed sluice command. Then README.md's first program, its C and
# its keyfile as written there, built as README.md says, with an rpath.
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

echo "install_consumer: pkg-config and find_package consumers, and README.md's first program, built and passed"
