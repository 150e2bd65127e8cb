#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Instructions a redis-server spends per decision of each algorithm's common path (a limit
# that never denies, its state present), counted by callgrind, next to rate-limiter-flexible's
# RateLimiterRedis.consume script: a figure that does not move with the machine's load.
#
#   bench/redis_instructions.sh BUILD_DIR [ALGORITHM...]   (a build with SLUICE_BUILD_BENCH;
#                                                          default: every algorithm)
#
# For each row a redis-server runs under callgrind on a free loopback port, collecting only
# while it reads and runs commands (readQueryFromClient: parsing, the script and the commands
# it calls, the reply) and writes replies (writeToClient), not its event loop or cron. The
# client makes one call at a time: sluice through bench/redis_instructions.c (which loads
# sluice's Function library as sluice does), the peer by redis-cli's EVALSHA of its script.
# Each row runs N and 2N calls on servers of their own; the difference over N is what one
# decision costs, the start (loading, the first call) cancelled out. Beside it, the script
# command alone (FCALL or EVALSHA with the commands it calls; callgrind_annotate's inclusive
# count). SLUICE_BENCH_NODE_DIR (node_modules holding rate-limiter-flexible): the peer's
# script is read from there instead of the copy below.
set -euo pipefail
build=${1:?usage: redis_instructions.sh BUILD_DIR [ALGORITHM...]}
shift
algorithms=("$@")
[ ${#algorithms[@]} -gt 0 ] || algorithms=(fixed_window sliding_window token_bucket gcra sliding_log)
driver=$build/bench/redis_instructions
N=${N:-2000}
for tool in valgrind callgrind_annotate redis-server redis-cli; do
    command -v $tool >/dev/null || { echo "redis_instructions: $tool is not installed" >&2; exit 1; }
done
[ -x "$driver" ] || { echo "redis_instructions: no $driver: build the benchmarks" >&2; exit 1; }

# The peer: rate-limiter-flexible 11.4.0's incrTtlLuaScript (lib/RateLimiterRedis.js),
# Copyright 2019 Roman Voloboev, ISC licence; RateLimiterRedis.consume EVALs it with KEYS
# prefix:key and ARGV points, secDuration, points of the limit, duration.
peer_script="redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX') \
local consumed = redis.call('incrby', KEYS[1], ARGV[1]) \
local ttl = redis.call('pttl', KEYS[1]) \
if ttl == -1 then \
  redis.call('expire', KEYS[1], ARGV[2]) \
  ttl = 1000 * ARGV[2] \
end \
return {consumed, ttl} \
"
if [ -n "${SLUICE_BENCH_NODE_DIR:-}" ]; then
    source=$SLUICE_BENCH_NODE_DIR/rate-limiter-flexible/lib/RateLimiterRedis.js
    # the template literal; a backslash at a line's end continues the line
    peer_script=$(sed -n '/^const incrTtlLuaScript = `/,/^`;/p' "$source" |
        sed -e '1s/^const incrTtlLuaScript = `//' -e '/^`;/d' -e 's/\\$//' | tr '\n' ' ')
    [ -n "$peer_script" ] || { echo "redis_instructions: no script in $source" >&2; exit 1; }
fi

work=$(mktemp -d)
server=
stop_server() {
    if [ -n "$server" ]; then
        kill -TERM "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
        server=
    fi
}
trap 'stop_server; rm -rf "$work"' EXIT

# Starts redis-server under callgrind on a free port ($port), output to $work/out.
start_server() {
    local tries
    for tries in 1 2 3 4 5 6 7 8; do
        port=$((20000 + RANDOM % 40000))
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi
        rm -f "$work/out"
        valgrind --tool=callgrind --callgrind-out-file="$work/out" --collect-atstart=no \
            --toggle-collect=readQueryFromClient --toggle-collect=writeToClient \
            redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$work" >"$work/server.log" 2>&1 &
        server=$!
        local i
        for i in $(seq 600); do
            if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then return 0; fi
            kill -0 "$server" 2>/dev/null || break
            sleep 0.1
        done
        stop_server
    done
    echo "redis_instructions: cannot start redis-server under valgrind:" >&2
    cat "$work/server.log" >&2
    exit 1
}

# ROW CALLS: runs CALLS decisions of ROW (an algorithm, or peer) on a server of its own;
# prints the instructions counted, and those of the script command inclusive.
count() {
    start_server
    if [ "$1" = peer ]; then
        local sha
        sha=$(redis-cli -p "$port" SCRIPT LOAD "$peer_script")
        redis-cli -p "$port" -r $(($2 + 1)) EVALSHA "$sha" 1 peer:k 1 3600 1000000000000 3600 \
            >/dev/null
    else
        "$driver" "$port" "$1" "$2" >/dev/null
    fi
    stop_server
    local total script
    total=$(sed -n 's/^summary: //p' "$work/out")
    script=$(callgrind_annotate --inclusive=yes "$work/out" 2>/dev/null |
        awk '/:(fcallCommand|evalShaCommand) / { gsub(",", "", $1); print $1; exit }')
    echo "$total ${script:-0}"
}

# ROW: instructions per decision, all and the script command's: (2N - N) / N
per_call() {
    local one two
    one=($(count "$1" "$N"))
    two=($(count "$1" $((2 * N))))
    echo $(((two[0] - one[0] + N / 2) / N)) $(((two[1] - one[1] + N / 2) / N))
}

echo "instructions redis-server spends per decision, counted by callgrind ($N and $((2 * N)) calls, the difference):"
echo "all: reading the command, running it, writing the reply; script: the FCALL or EVALSHA with its commands"
printf '%-28s %10s %8s %10s %8s\n' "" "all" "x peer" "script" "x peer"
peer=($(per_call peer))
printf '%-28s %10d %8s %10d %8s\n' "rate-limiter-flexible" "${peer[0]}" "" "${peer[1]}" ""
for algorithm in "${algorithms[@]}"; do
    row=($(per_call $algorithm))
    awk -v d="sluice $algorithm" -v a="${row[0]}" -v s="${row[1]}" -v pa="${peer[0]}" \
        -v ps="${peer[1]}" 'BEGIN { printf "%-28s %10d %7.2fx %10d %7.2fx\n", d, a, a / pa, s, s / ps }'
done
