#!/usr/bin/env bash
# Runs the built cmocka test programs ($BUILD/tests/test_*), optionally under
# $TEST_RUNNER: one "[c] PASS|FAIL program: N tests" line per program (the
# program's whole output under a FAIL; V=1 prints it always), then
# "N passed, N failed, N skipped" over all the tests.
# Under RL_LOCK_DEBUG=1 a program that prints a lock-order report fails.
set -uo pipefail
BUILD=${BUILD:-build/clang}
runner=${TEST_RUNNER:-}
if [ $# -gt 0 ]; then
  bins=(); for t in "$@"; do bins+=("$BUILD/tests/$t"); done
else
  bins=("$BUILD"/tests/test_*)
fi
# cmocka's summary lines: "[  PASSED  ] 4 test(s)." and "[  FAILED  ] 1
# test(s), listed below:" (likewise SKIPPED): the count is the first number.
sum() { grep -E "^\[  $1 *\] [0-9]+ test" "$2" | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) { s += $i; break }} END{print s+0}'; }
passed=0; failed=0; skipped=0; failed_progs=()
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for b in "${bins[@]}"; do
  name=$(basename "$b")
  [ -x "$b" ] || { echo "[c] FAIL $name: not built ($b)"; failed=$((failed+1)); continue; }
  # shellcheck disable=SC2086
  $runner "$b" >"$out" 2>&1
  rc=$?
  # With RL_LOCK_DEBUG=1 (make check-lockdep) a lock-order report that no
  # test asked for (those go to a handler) fails the program.
  if [ "${RL_LOCK_DEBUG:-0}" != 0 ] && grep -q '^RLLockDebug: possible deadlock' "$out"; then
    echo "$name: the lock-order detector reported an inversion (see above)" >>"$out"
    rc=98
  fi
  p=$(sum PASSED "$out"); f=$(sum FAILED "$out"); s=$(sum SKIPPED "$out")
  passed=$((passed+p)); failed=$((failed+f)); skipped=$((skipped+s))
  [ "${V:-0}" = 1 ] && cat "$out"
  if [ $rc -ne 0 ] || [ "$f" -gt 0 ]; then
    failed_progs+=("$name(rc=$rc)")
    [ "$f" -eq 0 ] && failed=$((failed+1))
    echo "[c] FAIL $name: $p passed, $f failed (exit status $rc)"
    [ "${V:-0}" = 1 ] || sed 's/^/     | /' "$out"
  else
    echo "[c] PASS $name: $p tests$([ "$s" -gt 0 ] && echo ", $s skipped")"
  fi
done
echo "C tests in $BUILD: ${#bins[@]} programs"
[ ${#failed_progs[@]} -gt 0 ] && echo "failing programs: ${failed_progs[*]}"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[ "$failed" -eq 0 ]
