# SPDX-License-Identifier: MIT
# Sourced by scripts/demo and scripts/test: installs the Debian 12 packages sluice
# needs when they are missing (as root through apt-get; otherwise says what to install).
# libsoup-3.0-dev: examples/http_service and tests/check_http_service.
# redis-sentinel: the redis-sentinel command that tests/support/redis_sentinel.c starts (three
# Sentinels watching a master and its replica, for the redis+sentinel:// tests).
# librsvg2-bin (rsvg-convert) and libpng-dev: tests/check_replay_svg renders the SVG of
# `sluice replay --svg` in a real renderer and reads the PNG back.
# libjson-glib-dev: tests/check_dashboard reads contrib/grafana's dashboard JSON.
# libssl-dev: TLS to Redis (rediss://); openssl: the command the TLS tests make their
# certificates with.
# doxygen: the API reference (cmake target docs), which the test api_docs builds.
# dpkg-dev (dpkg-shlibdeps, dpkg-buildflags, dpkg-architecture, dpkg-parsechangelog),
# file (CPack's Debian generator finds the ELF files with it) and lintian: the test
# debian_packages builds the Debian packages with cpack and checks them with lintian.
# abigail-tools (libabigail's abidw and abidiff, as Debian packages them): the test abi
# compares the library's public ABI with the committed baseline (tests/abi_check.sh,
# docs/abi.md).
SLUICE_DEBIAN_PACKAGES=(build-essential cmake pkg-config libglib2.0-dev check libhiredis-dev redis-server
                        redis-sentinel libsoup-3.0-dev librsvg2-bin libpng-dev libjson-glib-dev
                        libssl-dev openssl doxygen dpkg-dev file lintian abigail-tools)
# Only for `scripts/test --valgrind` and `scripts/test --fuzz` (libFuzzer is in clang's runtime).
SLUICE_VALGRIND_PACKAGES=(valgrind)
SLUICE_FUZZ_PACKAGES=(clang libclang-rt-14-dev)
# Only for scripts/bench: bench_redis's peer (bench/peer_rlf.js) is rate-limiter-flexible's
# RateLimiterRedis on ioredis, under node; the library and the tests never need them.
SLUICE_BENCH_NODE_PACKAGES=(nodejs npm)
SLUICE_BENCH_NPM_PACKAGES=(rate-limiter-flexible@11.4.0 ioredis@6.0.0)

sluice_install_deps() {
    local missing=()
    for p in "${SLUICE_DEBIAN_PACKAGES[@]}" "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "sluice: installing ${missing[*]}" >&2
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null; then
            sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
            return
        fi
        echo "sluice: run as root, or install: apt-get install ${missing[*]}" >&2
        return 1
    fi
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
}

# Installs node and npm when missing, then SLUICE_BENCH_NPM_PACKAGES into $1/node_modules
# unless they are there: the directory bench_redis reads as SLUICE_BENCH_NODE_DIR.
sluice_install_bench_node() {
    local dir=$1
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        sluice_install_deps "${SLUICE_BENCH_NODE_PACKAGES[@]}" || return 1
    fi
    [ -f "$dir/node_modules/rate-limiter-flexible/package.json" ] &&
        [ -f "$dir/node_modules/ioredis/package.json" ] && return 0
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error \
        "${SLUICE_BENCH_NPM_PACKAGES[@]}"
}
