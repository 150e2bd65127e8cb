#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_replay: how long `sluice replay --svg` takes to draw a trace of a million lines,
# and how big the picture is, next to the same replay printing its lines (the baseline,
# from the same run).
#   bench/bench_replay.sh [PATH/TO/sluice]     (scripts/bench passes its build's)
# The trace (an hour of calls of three limits, made here with awk) and the keyfiles are
# temporary files. Rounds alternate the baseline, --svg and --compare --svg. Prints each
# round, the medians and the targets (a million lines drawn in at most 2 s, at most
# 150 KB a panel). Exits 0 whatever the figures, 1 when something cannot be set up.
set -euo pipefail

sluice=${1:-build/tools/sluice}
ROUNDS=${ROUNDS:-3}
LINES=${LINES:-1000000}
TARGET_S=2.0
TARGET_KB_PANEL=150

command -v "$sluice" >/dev/null || { echo "bench_replay: $sluice not found" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# An hour of traffic: api (most calls, a spike in the middle), login per user, export.
awk -v n="$LINES" 'BEGIN {
    srand(1); t = 0; step = 3600000 / n
    for (i = 0; i < n; i++) {
        t += step * (i > n / 2 && i < n / 2 + n / 20 ? 0.2 : 1.05)
        r = i % 10
        if (r < 7) print int(t), "api"
        else if (r < 9) print int(t), "login", "user" int(rand() * 50)
        else print int(t), "export", "-", 1 + int(rand() * 4)
    }
}' >"$work/trace"
cat >"$work/today.ini" <<'INI'
[limit:api]
algorithm = sliding_window
limit = 20000
window = 1m
[limit:login]
algorithm = token_bucket
limit = 5
window = 1s
per_key = false
[limit:export]
algorithm = fixed_window
limit = 100
window = 10s
INI
cat >"$work/tomorrow.ini" <<'INI'
[limit:api]
algorithm = token_bucket
limit = 20000
window = 1m
burst = 40000
shadow_bands = 300/1s
[limit:login]
algorithm = gcra
limit = 5
window = 1s
burst = 10
per_key = false
[limit:export]
algorithm = fixed_window
limit = 100
window = 10s
bands = 20000/1h
INI

seconds() { # COMMAND...: runs it (its output dropped), prints its wall seconds; fails with it
    local start=$EPOCHREALTIME
    "$@" >/dev/null 2>"$work/stderr" || {
        echo "bench_replay: $* failed: $(cat "$work/stderr")" >&2
        return 1
    }
    awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f\n", b - a }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "bench_replay: $(wc -l <"$work/trace") lines, $(du -k "$work/trace" | cut -f1) KB, $ROUNDS rounds"
printf '%-6s %14s %14s %16s %12s\n' round "lines (s)" "--svg (s)" "--compare (s)" "KB a panel"
for round in $(seq "$ROUNDS"); do
    base=$(seconds "$sluice" replay -c "$work/today.ini" "$work/trace") || exit 1
    svg=$(seconds "$sluice" replay -c "$work/today.ini" --svg "$work/out.svg" "$work/trace") || exit 1
    compare=$(seconds "$sluice" replay -c "$work/today.ini" --compare "$work/tomorrow.ini" \
        --svg "$work/compare.svg" "$work/trace") || exit 1
    panels=$(grep -c '<g class="panel"' "$work/compare.svg")
    kb=$(($(stat -c %s "$work/compare.svg") / 1024 / panels))
    echo "$base" >>"$work/base"
    echo "$svg" >>"$work/svg"
    echo "$compare" >>"$work/compare"
    echo "$kb" >>"$work/kb"
    printf '%-6s %14s %14s %16s %12s\n' "$round" "$base" "$svg" "$compare" "$kb"
done
m_base=$(median <"$work/base")
m_svg=$(median <"$work/svg")
m_compare=$(median <"$work/compare")
m_kb=$(median <"$work/kb")
printf '%-6s %14s %14s %16s %12s\n' median "$m_base" "$m_svg" "$m_compare" "$m_kb"
verdict() { awk -v v="$1" -v t="$2" 'BEGIN { print (v <= t ? "met" : "missed") }'; }
echo "target: --svg of $LINES lines in at most ${TARGET_S} s: $m_svg s ($(verdict "$m_svg" "$TARGET_S")); the baseline, printing every line: $m_base s"
echo "target: at most ${TARGET_KB_PANEL} KB a panel: $m_kb KB ($(verdict "$m_kb" "$TARGET_KB_PANEL"))"
