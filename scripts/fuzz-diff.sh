#!/usr/bin/env bash
# Randomized differential test: seeded programs of run-loop operations
# (Tests/diff/fuzz/) run against the real CoreFoundation of the Swift
# toolchain and against CRunLoop; their traces must match.
#
#   scripts/fuzz-diff.sh [N [SEED]]        N sequences (default 300) from SEED
#                                          (default 1); prints one MISMATCH line
#                                          per differing seed, ends "N sequences,
#                                          M mismatches"; exit 1 on a mismatch
#   scripts/fuzz-diff.sh show WHAT         the program, both traces and their diff
#   scripts/fuzz-diff.sh shrink WHAT [OUT] drop operations while the traces still
#                                          differ; prints (and writes OUT) the result
#   scripts/fuzz-diff.sh scenario WHAT OUT.c [explanation]
#                                          write WHAT as a differential scenario
#                                          (for Tests/diff/scenarios or pending)
#
# WHAT is a seed, a program file (one operation a line, as `show` prints
# it) or a scenario .c written by `scenario`.
# Environment: FUZZ_JOBS parallel batches (default 2), FUZZ_BATCH seeds per
# process (default 200), FUZZ_KNOWN=1 lets the generator use the operations
# of known open bugs (Tests/diff/fuzz/fuzz_interp.c), FUZZ_MATCH=text makes
# `shrink` keep only programs whose diff contains that text, BUILD (default
# build/fuzz-diff).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/fuzz-diff}
JOBS=${FUZZ_JOBS:-2}
BATCH=${FUZZ_BATCH:-200}

swift_bin=$(command -v swift 2>/dev/null || true)
if [ -n "$swift_bin" ]; then
  swift_prefix=$(dirname "$(dirname "$(readlink -f "$swift_bin")")")
else
  swift_prefix=/opt/swift/usr
fi
swift_lib=$swift_prefix/lib/swift/linux
cf_include=$swift_prefix/lib/swift
CLANG=${CLANG:-$swift_prefix/bin/clang}
[ -x "$CLANG" ] || CLANG=clang
if [ ! -f "$cf_include/CoreFoundation/CFRunLoop.h" ] || [ ! -f "$swift_lib/libFoundation.so" ]; then
  echo "fuzz-diff: CoreFoundation not found under $swift_prefix (no oracle); skipping"
  exit 0
fi

mkdir -p "$BUILD/fuzz-work"
work=$BUILD/fuzz-work
CF=$BUILD/fuzz.cf
RL=$BUILD/fuzz.rl

build() {
  if ! MAKEFLAGS= MFLAGS= make --no-print-directory -s BUILD="$BUILD" CC="$CLANG" VARIANT= OPT=-O2 SAN= lib \
      >"$work/lib-build.log" 2>&1; then
    echo "fuzz-diff: building the library failed (see $work/lib-build.log)"; tail -5 "$work/lib-build.log"; exit 2
  fi
  local common=(-std=gnu11 -fblocks -O1 -g -Wall -Wno-unused-parameter -Wno-unused-function -D_GNU_SOURCE)
  local src=Tests/diff/fuzz/fuzz_main.c deps=(Tests/diff/fuzz/fuzz_main.c Tests/diff/fuzz/fuzz_interp.c)
  if [ ! -x "$CF" ] || [ -n "$(find "${deps[@]}" -newer "$CF")" ]; then
    "$CLANG" "${common[@]}" -DDIFF_CF -I"$cf_include" -o "$CF" "$src" \
      -L"$swift_lib" -Wl,-rpath,"$swift_lib" -lFoundation -lBlocksRuntime -lpthread -lm || exit 2
  fi
  if [ ! -x "$RL" ] || [ -n "$(find "${deps[@]}" "$BUILD/libcrunloop.a" -newer "$RL")" ]; then
    "$CLANG" "${common[@]}" -Iinclude -o "$RL" "$src" "$BUILD/libcrunloop.a" -lbsd -luring -lpthread -lm \
      -L"$swift_lib" -Wl,-rpath,"$swift_lib" -lBlocksRuntime || exit 2
  fi
}

# Compares two batch outputs seed by seed; prints one line per differing
# seed with the first differing line of each side.
compare_batches() { # cf.txt rl.txt
  awk '
    FNR == 1 { f++ }
    /^== seed / { seed = $3; if (f == 1) order[++n] = seed; seen[f, seed] = 1; next }
    { L[f, seed, ++cnt[f, seed]] = $0 }
    END {
      for (i = 1; i <= n; i++) {
        s = order[i]
        if (!seen[2, s]) { printf "MISMATCH seed %s: missing from CRunLoop output\n", s; continue }
        m = cnt[1, s] > cnt[2, s] ? cnt[1, s] : cnt[2, s]
        for (k = 1; k <= m; k++) {
          a = (k <= cnt[1, s]) ? L[1, s, k] : "(end)"; b = (k <= cnt[2, s]) ? L[2, s, k] : "(end)"
          if (a != b) { printf "MISMATCH seed %s line %d: CF \"%s\" vs CRunLoop \"%s\"\n", s, k, a, b; break }
        }
      }
    }' "$1" "$2"
}

# Runs seeds [start, start+count) in one process per side; a crash or hang
# is reported for the seed it happened in, and the batch goes on after it.
run_batch() { # start count out
  local start=$1 count=$2 out=$3 end=$(($1 + $2))
  : >"$out"
  while [ "$start" -lt "$end" ]; do
    local n=$((end - start)) cfo="$out.cf" rlo="$out.rl"
    # stderr apart: CF logs misuse there with a time stamp.
    timeout -k 5 $((n * 25 + 60)) "$CF" seeds "$start" "$n" >"$cfo" 2>"$cfo.err"; local cfrc=$?
    timeout -k 5 $((n * 25 + 60)) "$RL" seeds "$start" "$n" >"$rlo" 2>"$rlo.err"; local rlrc=$?
    local last=$end
    if [ $cfrc -ne 0 ] || [ $rlrc -ne 0 ]; then
      local lcf lrl
      lcf=$(awk '/^== seed /{s=$3} END{print s}' "$cfo"); lrl=$(awk '/^== seed /{s=$3} END{print s}' "$rlo")
      [ $cfrc -ne 0 ] && last=$lcf
      [ $rlrc -ne 0 ] && { [ $cfrc -eq 0 ] || [ "$lrl" -lt "$last" ]; } && last=$lrl
      local side="CRunLoop" rc=$rlrc tailf=$rlo
      [ $cfrc -ne 0 ] && [ "$last" = "$lcf" ] && { side="CoreFoundation"; rc=$cfrc; tailf=$cfo; }
      echo "MISMATCH seed $last: $side exited with status $rc ($(tail -1 "$tailf"))" >>"$out"
      # Compare only the seeds both finished.
      awk -v L="$last" '/^== seed /{skip = ($3 >= L)} !skip' "$cfo" >"$cfo.part"
      awk -v L="$last" '/^== seed /{skip = ($3 >= L)} !skip' "$rlo" >"$rlo.part"
      mv "$cfo.part" "$cfo"; mv "$rlo.part" "$rlo"
    fi
    compare_batches "$cfo" "$rlo" >>"$out"
    rm -f "$cfo" "$rlo" "$cfo.err" "$rlo.err"
    start=$((last + 1))
  done
}

# The program text of WHAT (seed, program file or scenario .c) on stdout.
program_of() {
  if [[ $1 =~ ^[0-9]+$ ]]; then
    "$CF" print "$1"
  elif [[ $1 == *.c ]]; then
    sed -n 's/^ *"\(.*\)\\n"$/\1/p' "$1"
  else
    cat "$1"
  fi
}

# Runs a program file on both sides: $work/one.cf, $work/one.rl; true if
# the traces differ.
differs() { # program-file
  timeout -k 5 90 "$CF" file "$1" >"$work/one.cf" 2>"$work/one.cf.err" || echo "exit status $?" >>"$work/one.cf"
  timeout -k 5 90 "$RL" file "$1" >"$work/one.rl" 2>"$work/one.rl.err" || echo "exit status $?" >>"$work/one.rl"
  if cmp -s "$work/one.cf" "$work/one.rl"; then return 1; fi
  [ -z "${FUZZ_MATCH:-}" ] || diff "$work/one.cf" "$work/one.rl" | grep -qF -- "$FUZZ_MATCH"
}

cmd=${1:-}
build
case "$cmd" in
show)
  program_of "$2" >"$work/show.prog"
  echo "== program"; cat "$work/show.prog"
  differs "$work/show.prog"; rc=$?
  echo "== CoreFoundation"; cat "$work/one.cf"
  if [ $rc -eq 0 ]; then
    echo "== diff (CoreFoundation vs CRunLoop)"
    diff -u --label CoreFoundation --label CRunLoop "$work/one.cf" "$work/one.rl"
    exit 1
  fi
  echo "== CRunLoop: same trace"
  ;;
shrink)
  program_of "$2" >"$work/shrink.prog"
  if ! differs "$work/shrink.prog"; then echo "fuzz-diff: $2 does not differ; nothing to shrink"; exit 1; fi
  mapfile -t lines <"$work/shrink.prog"
  chunk=$(( (${#lines[@]} + 1) / 2 ))
  while [ "$chunk" -ge 1 ]; do
    changed=0; i=0
    while [ "$i" -lt "${#lines[@]}" ]; do
      try=("${lines[@]:0:i}" "${lines[@]:i+chunk}")
      printf '%s\n' "${try[@]}" >"$work/try.prog"
      if [ ${#try[@]} -gt 0 ] && differs "$work/try.prog"; then
        lines=("${try[@]}"); changed=1
      else
        i=$((i + chunk))
      fi
    done
    if [ $changed -eq 0 ]; then chunk=$((chunk / 2)); fi
  done
  printf '%s\n' "${lines[@]}" >"$work/shrink.prog"
  [ -n "${3:-}" ] && cp "$work/shrink.prog" "$3"
  echo "== minimized program (${#lines[@]} lines)"; cat "$work/shrink.prog"
  differs "$work/shrink.prog"
  echo "== diff (CoreFoundation vs CRunLoop)"
  diff -u --label CoreFoundation --label CRunLoop "$work/one.cf" "$work/one.rl"
  ;;
scenario)
  out=${3:?usage: fuzz-diff.sh scenario WHAT OUT.c [explanation]}
  origin=""; [[ $2 =~ ^[0-9]+$ ]] && origin=" (seed $2${FUZZ_KNOWN:+, FUZZ_KNOWN=1})"
  program_of "$2" >"$work/scen.prog"
  {
    echo "/* ${4:-A program of the randomized differential test.}"
    echo " * A program of scripts/fuzz-diff.sh$origin, run through"
    echo " * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:"
    echo " * \`scripts/fuzz-diff.sh show $out\`. */"
    echo '#include "../fuzz/fuzz_interp.c"'
    echo
    echo "static const char program[] ="
    sed 's/^/    "/; s/$/\\n"/' "$work/scen.prog"
    echo "    ;"
    echo
    echo "void scenario(void) { fz_run_text(program); }"
  } >"$out"
  echo "wrote $out"
  ;;
""|[0-9]*)
  N=${1:-300}; SEED=${2:-1}
  t0=$(date +%s)
  rm -f "$work"/batch.*
  pids=(); b=0
  for ((s = SEED; s < SEED + N; s += BATCH)); do
    c=$BATCH; [ $((s + c)) -gt $((SEED + N)) ] && c=$((SEED + N - s))
    run_batch "$s" "$c" "$(printf '%s/batch.%012d' "$work" "$s")" &
    pids+=($!); b=$((b + 1))
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  done
  wait
  cat "$work"/batch.* 2>/dev/null | tee "$work/mismatches.txt"
  m=$(wc -l <"$work/mismatches.txt")
  echo "fuzz-diff: $N sequences from seed $SEED, $m mismatches ($(($(date +%s) - t0)) s)"
  [ "$m" -eq 0 ] || { echo "reproduce: scripts/fuzz-diff.sh show SEED; minimize: scripts/fuzz-diff.sh shrink SEED"; exit 1; }
  ;;
*)
  sed -n '2,25p' "$0"; exit 2 ;;
esac
