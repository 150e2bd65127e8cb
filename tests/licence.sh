#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The licence is stated everywhere it must be: LICENSE is the MIT licence of "the sluice
# authors", every source file opens with its SPDX line (in the first two lines, after a
# #! line), and sluice.pc and the Debian packages' copyright file name it.
#   licence.sh SRC
set -euo pipefail
src=$1
fail() {
    echo "licence: $*" >&2
    exit 1
}
grep -q "^MIT License$" "$src/LICENSE" || fail "LICENSE is not the MIT licence"
grep -q "^Copyright (c) [0-9]* the sluice authors$" "$src/LICENSE" || fail "LICENSE: no copyright line of the sluice authors"
grep -qx "License: MIT" "$src/cmake/sluice.pc.in" || fail "sluice.pc.in has no License: MIT"
grep -qx "License: Expat" "$src/cmake/debian/copyright" || fail "cmake/debian/copyright does not name the licence"
missing=$(cd "$src" && find . \( -name 'build*' -o -name .git \) -prune -o -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.lua' -o -name '*.sh' -o -name '*.js' -o -name '*.cmake' \
    -o -name '*.in' -o -name '*.supp' -o -name CMakeLists.txt -o -path './scripts/*' -o -path './.ci/*' \) \
    -print | sort | while read -r f; do
        head -n 2 "$f" | grep -q "SPDX-License-Identifier: MIT" || echo "$f"
    done)
[ -z "$missing" ] || fail "no SPDX-License-Identifier line atop: $missing"
echo "licence: LICENSE, sluice.pc, the packages' copyright and every source file's SPDX line"
