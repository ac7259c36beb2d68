#!/bin/sh
# bench-echo-instr.sh BINARY — the user-space instructions an echo server
# spends, ours against libuv, counted by callgrind (bench/bench_echo_instr.c
# says what BINARY does): per 64-byte round trip, and per MB echoed over 16
# connections. Each peer runs twice per row, with two amounts of work; the
# server thread's count (the first thread the process starts) is divided
# by the difference, so start-up and shutdown cancel out. Ours runs on the
# epoll backend (RL_BACKEND=epoll): valgrind 3.19 holds its thread lock
# through io_uring_enter (it does not know that the call blocks), so a
# loop asleep on io_uring stops the client thread, and the run hangs.
# `make bench-echo-instr` runs it.
set -eu
bin=$1
N1=${BEI_N1:-1000}
N2=${BEI_N2:-3000}
MB1=${BEI_MB1:-10}
MB2=${BEI_MB2:-30}
if ! command -v valgrind >/dev/null 2>&1; then
    echo "bench-echo-instr: valgrind is missing (scripts/setup-deps.sh installs it)" >&2
    exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The server thread's instructions for `peer` doing `kind` (rt, tp16) n times.
count() {
    out="$dir/cg.$1.$2.$3"
    if ! RL_BACKEND=epoll valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out" "$bin" "$1" "$2" "$3" \
        >"$dir/log" 2>&1; then
        cat "$dir/log" >&2
        echo "bench-echo-instr: $1 $2 failed under valgrind" >&2
        exit 1
    fi
    f="$out-02"
    if [ ! -f "$f" ]; then
        echo "bench-echo-instr: no server thread in callgrind's output for $1 ($(ls "$dir"))" >&2
        exit 1
    fi
    awk '/^(summary|totals):/ { print $2; exit }' "$f"
}

# Instructions per unit of `kind` for `peer`, from runs of a and b units.
per_unit() {
    x=$(count "$1" "$2" "$3")
    y=$(count "$1" "$2" "$4")
    echo $(( (y - x) / ($4 - $3) ))
}

rt_ours=$(per_unit ours rt "$N1" "$N2")
rt_uv=$(per_unit libuv rt "$N1" "$N2")
tp_ours=$(per_unit ours tp16 "$MB1" "$MB2")
tp_uv=$(per_unit libuv tp16 "$MB1" "$MB2")
printf '\nUser-space instructions of the echo server thread (callgrind; %s and %s round trips, %s and %s MB)\n\n' \
    "$N1" "$N2" "$MB1" "$MB2"
row() { awk -v l="$1" -v o="$2" -v u="$3" 'BEGIN { printf "%-40s | %9d | %9d | %9.2fx\n", l, o, u, o / u }'; }
printf '%-40s | %9s | %9s | %10s\n' "work" "ours" "libuv" "ours/libuv"
printf '%-40s-+-%9s-+-%9s-+-%10s\n' "----------------------------------------" "---------" "---------" "----------"
row "per 64-byte round trip, 1 connection" "$rt_ours" "$rt_uv"
row "per MB, 16 connections, 4 KB writes" "$tp_ours" "$tp_uv"
printf '\nBelow 1: ours does less. The kernel, where most of the time goes, is not counted. The round trip\ncount is the same on every run; the per-MB one moves by about a tenth (how the threads interleave\nunder valgrind decides how much each read finds).\n'
