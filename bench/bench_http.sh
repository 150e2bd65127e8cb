#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_http: requests per second of examples/http_service under wrk on loopback, for a
# handler with no rule (/hello) and one with a Redis-backed rule (/login) in one run.
#   bench/bench_http.sh [PATH/TO/http_service]     (scripts/bench passes its build's)
# Starts its own redis-server and service on free 127.0.0.1 ports and stops those two
# processes, and only them, on every way out. Prints each round, the best of each
# handler and their ratio against the target (the limited handler at least 80% of the
# unlimited one's rate while under its limit). Exits 0 whatever the figures, 1 when
# something cannot be set up or a round sees errors or non-2xx answers.
set -euo pipefail

service=${1:-build/examples/http_service}
ROUNDS=${ROUNDS:-5}         # rounds of each handler, alternating
DURATION=${DURATION:-5s}    # each wrk run
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}       # wrk threads
WORKERS=${WORKERS:-4}       # the service's worker threads (see bench/README.md)
TARGET=0.80

for tool in wrk redis-server redis-cli "$service"; do
    command -v "$tool" >/dev/null || { echo "bench_http: $tool not found" >&2; exit 1; }
done

work=$(mktemp -d)
redis_pid=
service_pid=
stop() {
    # only the processes this script started, by pid
    [ -n "$service_pid" ] && kill "$service_pid" 2>/dev/null && wait "$service_pid" 2>/dev/null
    [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
    rm -rf "$work"
}
trap stop EXIT
trap 'exit 1' INT TERM HUP

# A free loopback port: nothing answers on it now (the server that takes it says if not).
free_port() {
    local port
    for _ in $(seq 50); do
        port=$((20000 + RANDOM % 40000))
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
    done
    echo "bench_http: no free port found" >&2
    exit 1
}

# ---- redis-server -------------------------------------------------------------------
for attempt in 1 2 3 4 5; do
    redis_port=$(free_port)
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$work" --loglevel warning --daemonize no >"$work/redis.log" 2>&1 &
    redis_pid=$!
    for _ in $(seq 200); do
        redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
        kill -0 "$redis_pid" 2>/dev/null || break
        sleep 0.02
    done
    redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    redis_pid=
done
[ -n "$redis_pid" ] || { echo "bench_http: redis-server did not start" >&2; exit 1; }

# ---- the service: /login limited through that Redis, far above what wrk can send -----
cat >"$work/bench.ini" <<EOF
# written by bench_http: /login has a Redis-backed rule that never says no at this rate
[sluice]
backend  = redis
redis    = redis://127.0.0.1:$redis_port/0
timeout  = 1s
on_error = deny

[limit:http.login]
algorithm = gcra
limit     = 1000000
window    = 1s
EOF
"$service" --port 0 --config "$work/bench.ini" --workers "$WORKERS" \
    >"$work/service.out" 2>"$work/service.log" &
service_pid=$!
port=
for _ in $(seq 500); do
    port=$(sed -n 's|^http_service: listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$work/service.out")
    [ -n "$port" ] && break
    kill -0 "$service_pid" 2>/dev/null || break
    sleep 0.02
done
if [ -z "$port" ]; then
    echo "bench_http: the service did not start:" >&2
    cat "$work/service.log" >&2
    exit 1
fi
base=http://127.0.0.1:$port
for path in /hello "/login?user=bench"; do
    status=$(curl -s -o /dev/null -w '%{http_code}' "$base$path")
    [ "$status" = 200 ] || { echo "bench_http: $path answers $status" >&2; exit 1; }
done

# ---- wrk ----------------------------------------------------------------------------
hz=$(getconf CLK_TCK)
# CPU time a process has used so far, in clock ticks (utime + stime).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# One wrk run of $2 for $1; prints "requests/s service-µs/req redis-µs/req". Fails on
# socket errors or non-2xx answers.
run() {
    local out s0 r0 s1 r1
    s0=$(ticks "$service_pid")
    r0=$(ticks "$redis_pid")
    out=$(wrk -t "$THREADS" -c "$CONNECTIONS" -d "$1" "$base$2")
    s1=$(ticks "$service_pid")
    r1=$(ticks "$redis_pid")
    if grep -q -e "Non-2xx" -e "Socket errors" <<<"$out"; then
        echo "bench_http: $2: errors or non-2xx answers:" >&2
        echo "$out" >&2
        exit 1
    fi
    awk -v s="$((s1 - s0))" -v r="$((r1 - r0))" -v hz="$hz" '
        /requests in/ { n = $1 }
        /^Requests\/sec:/ { rps = $2 }
        END { printf "%.0f %.1f %.1f\n", rps, s * 1e6 / hz / n, r * 1e6 / hz / n }' <<<"$out"
}

echo "bench_http: examples/http_service on $base, redis-server on 127.0.0.1:$redis_port"
echo "  wrk -t $THREADS -c $CONNECTIONS -d $DURATION, $ROUNDS rounds alternating; service --workers $WORKERS"
echo "  $(nproc) CPUs, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
run 1s /hello >/dev/null # warm-up: connections, worker threads, Redis connections
run 1s "/login?user=bench" >/dev/null

names=("/hello: no rule" "/login: gcra on Redis, 10^6/s (allowed)")
paths=(/hello "/login?user=bench")
best=(0 0)
cpu=("" "")
echo
printf '%-42s %5s %12s %14s %14s\n' handler round requests/s "service µs/req" "redis µs/req"
for r in $(seq "$ROUNDS"); do
    for i in 0 1; do
        result=$(run "$DURATION" "${paths[$i]}") # a failed run ends the script here
        read -r rps svc red <<<"$result"
        printf '%-42s %5s %12s %14s %14s\n' "${names[$i]}" "$r" "$rps" "$svc" "$red"
        [ "$rps" -gt "${best[$i]}" ] && best[$i]=$rps
        cpu[$i]="${cpu[$i]} $svc"
    done
done
echo
median() { printf '%s\n' $1 | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
awk -v h="${best[0]}" -v l="${best[1]}" -v t="$TARGET" \
    -v ch="$(median "${cpu[0]}")" -v cl="$(median "${cpu[1]}")" 'BEGIN {
    ratio = l / h
    verdict = "MISS"
    if (ratio >= t)
        verdict = "PASS"
    printf "best requests/s: /hello %d, /login %d\n", h, l
    printf "ratio limited / unlimited: %.2f (target >= %.2f): %s\n", ratio, t, verdict
    printf "service CPU per request (median): /hello %.1f µs, /login %.1f µs: a CPU-bound service\n", ch, cl
    printf "  whose Redis runs elsewhere would serve %.2f of the unlimited rate on the limited handler\n", ch / cl
}'
denials=$(grep -c "denied: " "$work/service.log" || true)
[ "$denials" = 0 ] || echo "bench_http: warning: the service denied $denials requests" >&2
echo "  load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
