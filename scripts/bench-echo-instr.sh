#!/bin/sh
# bench-echo-instr.sh BINARY — the user-space instructions an echo server
# spends (counted by callgrind) and the system calls it makes (counted by
# strace), per peer (bench/bench_echo_instr.c says what BINARY does): per
# 64-byte round trip, and per MB echoed over 16 connections. Each peer runs
# twice per row, with two amounts of work; the server thread's count (the
# threads but the process's first) is divided by the difference, so
# start-up and shutdown cancel out.
# Peers: ours (RLSocket, Data callbacks), ours-read (RLSocket, Read
# callbacks, recv in the callback), ours-ur and read-ur (the same two on the
# io_uring backend), epoll (by hand, edge-triggered), libuv.
# Per round trip over 16 connections (one message in flight on each, as
# bench_echo's rt16 row) too: instructions (callgrind, single steps) and
# system calls; and the system calls over 256 (strace only): BEI_MANY=0
# leaves them out.
# BEI_PEERS="ours ours-read" picks some; BEI_TP=0 leaves out the per-MB row;
# BEI_SYSCALLS=0 leaves out strace; BEI_STEP=0 leaves out the single-step
# count. `make bench-echo-instr` runs it.
# Ours runs on the epoll backend (RL_BACKEND=epoll) under callgrind:
# valgrind 3.19 holds its thread lock through io_uring_enter (it does not
# know that the call blocks), so a loop asleep on io_uring stops the client
# thread, and ours-ur and read-ur get no callgrind count. This machine's
# virtual CPU has no instruction counter for perf either, so every peer is
# also counted by single-stepping its server thread under ptrace
# (bench_echo_instr's BEI_STEP=1: user-space instructions, a system call
# one step, a string instruction one per repetition; about 1.1x callgrind's
# count, BEI_S1 and BEI_S2 round trips, slow: ~40 us a step here): that
# column compares the backends. So that every column of a row counts the
# same server, ours and ours-read are counted on epoll throughout (on the
# default backend ours's loop would move to io_uring at its first Data
# callout, under strace and the single steps but not under callgrind);
# ours-ur and read-ur set io_uring for their own loops.
set -eu
export RL_BACKEND=epoll
bin=$1
N1=${BEI_N1:-1000}
N2=${BEI_N2:-3000}
MB1=${BEI_MB1:-10}
MB2=${BEI_MB2:-30}
PEERS=${BEI_PEERS:-ours ours-read ours-ur read-ur epoll libuv}
STEP=${BEI_STEP:-1}
S1=${BEI_S1:-100}
S2=${BEI_S2:-300}
TP=${BEI_TP:-1}
MANY=${BEI_MANY:-1}
SYSCALLS=${BEI_SYSCALLS:-1}
if ! command -v valgrind >/dev/null 2>&1; then
    echo "bench-echo-instr: valgrind is missing (scripts/setup-deps.sh installs it)" >&2
    exit 1
fi
if [ "$SYSCALLS" = 1 ] && ! command -v strace >/dev/null 2>&1; then
    echo "bench-echo-instr: strace is missing (scripts/setup-deps.sh installs it); BEI_SYSCALLS=0 skips it" >&2
    exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The server thread's instructions for `peer` doing `kind` n times, by
# single steps.
steps() {
    if ! BEI_STEP=1 "$bin" "$1" "$2" "$3" >"$dir/steplog" 2>&1; then
        cat "$dir/steplog" >&2
        echo "bench-echo-instr: $1 $2 failed when stepped" >&2
        exit 1
    fi
    awk '/^server_instructions / { print $2 }' "$dir/steplog"
}

# The server thread's instructions for `peer` doing `kind` (rt, rt16, tp16) n times.
count() {
    out="$dir/cg.$1.$2.$3"
    if ! valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out" "$bin" "$1" "$2" "$3" \
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

# The system calls of every thread but the first (the client) for `peer`
# doing `kind` n times; their names and counts go to $dir/names.$1.$2.$3.
syscalls() {
    pre="$dir/st.$1.$2.$3"
    if ! strace -ff -o "$pre" "$bin" "$1" "$2" "$3" >"$dir/log" 2>&1; then
        cat "$dir/log" >&2
        echo "bench-echo-instr: $1 $2 failed under strace" >&2
        exit 1
    fi
    first=$(ls "$pre".* | sed 's/.*\.//' | sort -n | head -1)
    for f in "$pre".*; do
        [ "$f" = "$pre.$first" ] || cat "$f"
    done | awk -F'(' '/^[a-z_0-9]+\(/ { n[$1]++; t++ } END { for (k in n) print k, n[k] > "/dev/stderr"; print t + 0 }' \
        2>"$dir/names.$1.$2.$3"
}

# Per unit of `kind` for `peer`, from runs of a and b units, by `how`
# (count or syscalls).
per_unit() {
    x=$($1 "$2" "$3" "$4")
    y=$($1 "$2" "$3" "$5")
    awk -v x="$x" -v y="$y" -v a="$4" -v b="$5" 'BEGIN { printf "%.1f", (y - x) / (b - a) }'
}

# Which system calls make up the difference, per unit: "name count ...".
names_per_unit() {
    awk -v a="$3" -v b="$4" 'FNR == NR { x[$1] = $2; next } { y[$1] = $2 }
        END { for (k in y) { d = (y[k] - x[k]) / (b - a); if (d >= 0.05) printf "%s %.2f  ", k, d } }' \
        "$dir/names.$1.$2.$3" "$dir/names.$1.$2.$4"
}

printf '\nThe echo server thread per unit of work (callgrind: user-space instructions; strace: system calls)\n'
printf '%s and %s round trips, %s and %s MB\n\n' "$N1" "$N2" "$MB1" "$MB2"
printf '%-10s | %12s | %12s | %12s | %12s | %12s | %12s | %12s | %12s | %12s\n' "peer" "instr/rt" "steps/rt" "syscalls/rt" "instr/MB" "syscalls/MB" "instr/rt16" "steps/rt16" "sysc/rt16" "sysc/rt256"
printf '%-10s-+-%12s-+-%12s-+-%12s-+-%12s-+-%12s-+-%12s-+-%12s-+-%12s-+-%12s\n' "----------" "------------" "------------" "------------" "------------" "------------" "------------" "------------" "------------" "------------"
details=""
for p in $PEERS; do
    cg=1
    case $p in *-ur) cg=0 ;; esac # valgrind cannot (above)
    irt=-
    [ $cg = 1 ] && irt=$(per_unit count "$p" rt "$N1" "$N2")
    str=-
    [ "$STEP" = 1 ] && str=$(per_unit steps "$p" rt "$S1" "$S2")
    srt=-
    itp=-
    stp=-
    if [ "$SYSCALLS" = 1 ]; then
        srt=$(per_unit syscalls "$p" rt "$N1" "$N2")
        details="$details$(printf '%-10s rt: %s' "$p" "$(names_per_unit "$p" rt "$N1" "$N2")")
"
    fi
    if [ "$TP" = 1 ]; then
        [ $cg = 1 ] && itp=$(per_unit count "$p" tp16 "$MB1" "$MB2")
        [ "$SYSCALLS" = 1 ] && stp=$(per_unit syscalls "$p" tp16 "$MB1" "$MB2")
    fi
    i16=-
    st16=-
    s16=-
    s256=-
    if [ "$MANY" = 1 ]; then
        [ $cg = 1 ] && i16=$(per_unit count "$p" rt16 "$N1" "$N2")
        [ "$STEP" = 1 ] && st16=$(per_unit steps "$p" rt16 "$S1" "$S2")
    fi
    if [ "$SYSCALLS" = 1 ] && [ "$MANY" = 1 ]; then
        s16=$(per_unit syscalls "$p" rt16 "$N1" "$N2")
        details="$details$(printf '%-10s rt16: %s' "$p" "$(names_per_unit "$p" rt16 "$N1" "$N2")")
"
        s256=$(per_unit syscalls "$p" rt256 "$N1" "$N2")
        details="$details$(printf '%-10s rt256: %s' "$p" "$(names_per_unit "$p" rt256 "$N1" "$N2")")
"
    fi
    printf '%-10s | %12s | %12s | %12s | %12s | %12s | %12s | %12s | %12s | %12s\n' "$p" "$irt" "$str" "$srt" "$itp" "$stp" "$i16" "$st16" "$s16" "$s256"
done
if [ -n "$details" ]; then
    printf '\nSystem calls per round trip, by name:\n%s' "$details"
fi
printf '\nThe kernel, where most of the time goes, is not in the instruction counts. The round trip counts\nare the same on every run; the per-MB ones move by about a tenth (how the threads interleave under\nvalgrind or strace decides how much each read finds).\n'
