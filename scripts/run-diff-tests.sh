#!/usr/bin/env bash
# Differential tests: every Tests/diff/scenarios/*.c is built twice — against
# the real CoreFoundation of the Swift toolchain (-DDIFF_CF) and against
# CRunLoop through <crunloop/cf_compat.h> — both programs run, and their
# traces must match line for line. CoreFoundation's trace is the expected one.
#
#   scripts/run-diff-tests.sh [name ...]   only these scenarios (file stems)
#   DIFF_ONLY=cf  scripts/run-diff-tests.sh   print CF's traces, no comparison
#   DIFF_REPEAT=5 scripts/run-diff-tests.sh   run CF 5 times, flag unstable traces
#   DIFF_SAN=asan|tsan scripts/run-diff-tests.sh   our side (library and
#       scenario) built with ASan+UBSan or TSan in build/diff-asan|-tsan; any
#       sanitizer report lands in the trace and fails the scenario
#
# Prints one PASS/FAIL line per scenario (a unified diff, CF vs ours, under a
# FAIL; XFAIL for the scenarios in Tests/diff/known-differences.txt) and ends
# with "N passed, N failed". BUILD defaults to build/diff; the
# library is built there first with `make BUILD=$BUILD lib`.
set -uo pipefail
cd "$(dirname "$0")/.."
DIFF_SAN=${DIFF_SAN:-}
case "$DIFF_SAN" in
  "") san_flags=(); san_libs=(); BUILD=${BUILD:-build/diff} ;;
  asan) san_flags=(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
        san_libs=(); BUILD=${BUILD:-build/diff-asan${PLAIN:+-plain}} ;;
  # The toolchain's TSan runtime carries libdispatch interceptors: link it.
  tsan) san_flags=(-fsanitize=thread); san_libs=(-ldispatch); BUILD=${BUILD:-build/diff-tsan${PLAIN:+-plain}} ;;
  *) echo "run-diff-tests: DIFF_SAN must be asan or tsan"; exit 2 ;;
esac
DIFF_ONLY=${DIFF_ONLY:-}
DIFF_REPEAT=${DIFF_REPEAT:-1}
RUN_TIMEOUT=${RUN_TIMEOUT:-60}

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
  echo "run-diff-tests: CoreFoundation not found under $swift_prefix (no oracle); skipping"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
fi

if [ $# -gt 0 ]; then
  scenarios=(); for s in "$@"; do scenarios+=("Tests/diff/scenarios/${s%.c}.c"); done
else
  scenarios=(Tests/diff/scenarios/*.c)
fi

mkdir -p "$BUILD/diff-bin" "$BUILD/diff-traces"
lib_ok=1
if [ "$DIFF_ONLY" != cf ]; then
  # Our own clang build, whatever CC/SAN/OPT an outer make passed down.
  lib_args=(BUILD="$BUILD" CC="$CLANG" VARIANT= PLAIN="${PLAIN:-}")
  if [ -n "$DIFF_SAN" ]; then lib_args+=(OPT=-O1 "SAN=${san_flags[*]}"); else lib_args+=(OPT=-O2 SAN=); fi
  if ! MAKEFLAGS= MFLAGS= make --no-print-directory -s "${lib_args[@]}" lib >"$BUILD/diff-traces/lib-build.log" 2>&1; then
    echo "run-diff-tests: building the library failed (see $BUILD/diff-traces/lib-build.log)"
    tail -5 "$BUILD/diff-traces/lib-build.log"
    lib_ok=0
  fi
fi

common=(-std=gnu11 -fblocks -O1 -g -Wall -Wno-unused-parameter -Wno-unused-function -ITests/diff/support -D_GNU_SOURCE)
# The shared support file is compiled once per side.
support_cf=$BUILD/diff-bin/diff.cf.o; support_rl=$BUILD/diff-bin/diff.rl.o
"$CLANG" "${common[@]}" -DDIFF_CF -I"$cf_include" -c -o "$support_cf" Tests/diff/support/diff.c || exit 2
build_cf() { # src out
  "$CLANG" "${common[@]}" -DDIFF_CF -I"$cf_include" -o "$2" "$1" "$support_cf" \
    -L"$swift_lib" -Wl,-rpath,"$swift_lib" -lFoundation -ldispatch -lBlocksRuntime -lpthread -lm
}
build_rl() { # src out
  # The scenarios of the main dispatch queue use libdispatch (CF's side has
  # it through Foundation); the others do not, and do not link it.
  local dispatch=()
  grep -q '<dispatch/dispatch.h>' "$1" && dispatch=(-idirafter "$cf_include" -ldispatch)
  "$CLANG" "${common[@]}" "${san_flags[@]}" -Iinclude -o "$2" "$1" "$support_rl" \
    "$BUILD/libcrunloop.a" -lbsd -luring -lpthread -lm -L"$swift_lib" -Wl,-rpath,"$swift_lib" -lBlocksRuntime "${dispatch[@]}" "${san_libs[@]}"
}
if [ "$DIFF_ONLY" != cf ]; then
  "$CLANG" "${common[@]}" "${san_flags[@]}" -Iinclude -c -o "$support_rl" Tests/diff/support/diff.c || exit 2
fi
run_one() { # bin out
  timeout -k 5 "$RUN_TIMEOUT" "$1" >"$2" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && echo "exit status $rc" >>"$2"
  return 0
}

# Scenarios allowed to differ (see the file's header): XFAIL, not FAIL.
known=" $(grep -v '^#' Tests/diff/known-differences.txt 2>/dev/null | awk 'NF{print $1}' | tr '\n' ' ') "

passed=0; failed=0; xfailed=0; failed_names=()
for src in "${scenarios[@]}"; do
  name=$(basename "$src" .c)
  cfbin=$BUILD/diff-bin/$name.cf; rlbin=$BUILD/diff-bin/$name.rl
  cfout=$BUILD/diff-traces/$name.cf.txt; rlout=$BUILD/diff-traces/$name.rl.txt
  if [ ! -f "$src" ]; then
    echo "[diff] FAIL $name: no such scenario $src"; failed=$((failed+1)); failed_names+=("$name"); continue
  fi
  if ! build_cf "$src" "$cfbin" >"$cfout" 2>&1; then
    echo "[diff] FAIL $name: does not build against CoreFoundation"; sed 's/^/    /' "$cfout" | head -20
    failed=$((failed+1)); failed_names+=("$name"); continue
  fi
  run_one "$cfbin" "$cfout"
  unstable=0
  for ((i = 2; i <= DIFF_REPEAT; i++)); do
    run_one "$cfbin" "$cfout.again"
    if ! cmp -s "$cfout" "$cfout.again"; then
      unstable=1; echo "[diff] UNSTABLE $name: CoreFoundation's own trace changed on run $i"
      diff -u "$cfout" "$cfout.again" | sed 's/^/    /' | head -40
      break
    fi
  done
  rm -f "$cfout.again"
  if [ "$DIFF_ONLY" = cf ]; then
    echo "== $name (CoreFoundation)"; cat "$cfout"
    [ $unstable -eq 1 ] && { failed=$((failed+1)); failed_names+=("$name"); } || passed=$((passed+1))
    continue
  fi
  if [ $lib_ok -eq 0 ]; then
    echo "[diff] FAIL $name: library did not build"; failed=$((failed+1)); failed_names+=("$name"); continue
  fi
  if ! build_rl "$src" "$rlbin" >"$rlout" 2>&1; then
    echo "[diff] FAIL $name: does not build against CRunLoop"
    grep -E 'error|undefined reference' "$rlout" | sed 's/^/    /' | sort -u | head -15
    failed=$((failed+1)); failed_names+=("$name"); continue
  fi
  run_one "$rlbin" "$rlout"
  if [ $unstable -eq 0 ] && cmp -s "$cfout" "$rlout"; then
    if [[ $known == *" $name "* ]]; then echo "[diff] XPASS $name (listed in known-differences.txt)"; else echo "[diff] PASS $name"; fi
    passed=$((passed+1))
  elif [ $unstable -eq 0 ] && [[ $known == *" $name "* ]]; then
    echo "[diff] XFAIL $name (known difference)"
    diff -u --label "CoreFoundation" --label "CRunLoop" "$cfout" "$rlout" | sed 's/^/    /'
    xfailed=$((xfailed+1))
  else
    echo "[diff] FAIL $name"
    diff -u --label "CoreFoundation" --label "CRunLoop" "$cfout" "$rlout" | sed 's/^/    /'
    failed=$((failed+1)); failed_names+=("$name")
  fi
done
[ ${#failed_names[@]} -gt 0 ] && echo "failing scenarios: ${failed_names[*]}"
[ $xfailed -gt 0 ] && echo "${xfailed} known difference(s), see Tests/diff/known-differences.txt"
echo "${passed} passed, ${failed} failed, ${xfailed} skipped (known differences)"
[ "$failed" -eq 0 ]
