#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# No dependency circle among src/ files: an edge from each object of the library to
# every other object defining a symbol it uses, and tsort must order them all.
#   layering.sh OBJECT...   (the library's objects, $<TARGET_OBJECTS:sluice_objects>)
set -euo pipefail
edges=$(for o in "$@"; do nm -P "$o" | sed "s|^|${o#*sluice_objects.dir/} |"; done | awk '
    $3 ~ /^[TDBR]$/ { owner[$2] = $1 }
    $3 == "U"       { used[$1] = used[$1] " " $2 }
    END {
        for (f in used) {
            n = split(used[f], syms, " ")
            for (i = 1; i <= n; i++)
                if ((syms[i] in owner) && owner[syms[i]] != f)
                    print f, owner[syms[i]]
        }
    }' | sort -u)
[ -n "$edges" ] || { echo "layering: no calls between objects found: wrong arguments?" >&2; exit 1; }
if ! order=$(tsort <<<"$edges" 2>&1 >/dev/null) || [ -n "$order" ]; then
    echo "layering: the src/ files call each other in a circle:" >&2
    echo "$order" >&2
    exit 1
fi
echo "layering: $(wc -l <<<"$edges") calls between $# objects, no circle"
