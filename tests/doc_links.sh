#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every relative link of README.md and the Markdown pages of docs/, examples/ and bench/
# leads to a file that exists and, for a #fragment into a Markdown page, to one of its
# headings (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens).
#   doc_links.sh SRC
set -euo pipefail
cd "$1"
# the anchors of a page, one a line
anchors() {
    awk '/^```/ { fence = !fence; next } !fence && /^#+ / {
        sub(/^#+ +/, ""); s = tolower($0); gsub(/[^a-z0-9_ -]/, "", s); gsub(/ /, "-", s); print s }' "$1"
}
bad=0 n=0
for page in README.md docs/*.md examples/*.md bench/*.md; do
    dir=$(dirname "$page")
    # the links outside code fences and code spans
    links=$(awk '/^```/ { fence = !fence; next } !fence { gsub(/`[^`]*`/, ""); print }' "$page" |
        grep -oE '\]\([^) ]+\)' | sed -e 's/^](//' -e 's/)$//' | grep -vE '^[a-z]+:' || true)
    for link in $links; do
        n=$((n + 1))
        file=${link%%#*}
        fragment=${link#"$file"}
        fragment=${fragment#\#}
        target=$page
        [ -z "$file" ] || target=$dir/$file
        if [ ! -e "$target" ]; then
            echo "doc_links: $page: $link: no such file" >&2
            bad=$((bad + 1))
        elif [ -n "$fragment" ] && [[ $target == *.md ]] && ! anchors "$target" | grep -qxF "$fragment"; then
            echo "doc_links: $page: $link: no such heading in $target" >&2
            bad=$((bad + 1))
        fi
    done
done
[ "$bad" -eq 0 ] || exit 1
echo "doc_links: $n links, each to a file and heading that exist"
