#!/bin/sh
# bench-echo-instr.sh BINARY — the user-space instructions an echo server
# spends per 64-byte round trip, ours against libuv, counted by callgrind
# (bench/bench_echo_instr.c says what BINARY does). Each peer runs twice,
# with N1 and N2 round trips; the server thread's count (the first thread
# the process starts) is divided by the difference, so start-up and
# shutdown cancel out. `make bench-echo-instr` runs it.
set -eu
bin=$1
N1=${BEI_N1:-1000}
N2=${BEI_N2:-3000}
if ! command -v valgrind >/dev/null 2>&1; then
    echo "bench-echo-instr: valgrind is missing (scripts/setup-deps.sh installs it)" >&2
    exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The server thread's instructions for `peer` doing n round trips.
count() {
    out="$dir/cg.$1.$2"
    if ! valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out" "$bin" "$1" "$2" \
        >"$dir/log" 2>&1; then
        cat "$dir/log" >&2
        echo "bench-echo-instr: $1 failed under valgrind" >&2
        exit 1
    fi
    f="$out-02"
    if [ ! -f "$f" ]; then
        echo "bench-echo-instr: no server thread in callgrind's output for $1 ($(ls "$dir"))" >&2
        exit 1
    fi
    awk '/^(summary|totals):/ { print $2; exit }' "$f"
}

per_trip() {
    a=$(count "$1" "$N1")
    b=$(count "$1" "$N2")
    echo $(( (b - a) / (N2 - N1) ))
}

ours=$(per_trip ours)
uv=$(per_trip libuv)
printf '\nUser-space instructions per 64-byte echo round trip, server thread (callgrind, %s and %s round trips)\n\n' "$N1" "$N2"
printf '%-12s | %8s\n' "peer" "instr."
printf '%-12s-+-%8s\n' "------------" "--------"
printf '%-12s | %8s\n' "ours" "$ours" "libuv" "$uv"
awk -v o="$ours" -v u="$uv" 'BEGIN { printf "\nours/libuv: %.2fx (below 1: ours does less). The kernel, where most of a round trip goes, is not counted.\n", o / u }'
