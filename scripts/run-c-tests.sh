#!/usr/bin/env bash
# Runs the built cmocka test programs ($BUILD/tests/test_*), optionally under
# $TEST_RUNNER, and ends with one "N passed, N failed" line over all of them.
# Under RL_LOCK_DEBUG=1 a program that prints a lock-order report fails.
set -uo pipefail
BUILD=${BUILD:-build/clang}
runner=${TEST_RUNNER:-}
if [ $# -gt 0 ]; then
  bins=(); for t in "$@"; do bins+=("$BUILD/tests/$t"); done
else
  bins=("$BUILD"/tests/test_*)
fi
passed=0; failed=0; failed_progs=()
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "missing test program $b"; failed=$((failed+1)); continue; }
  name=$(basename "$b")
  out=$(mktemp)
  # shellcheck disable=SC2086
  $runner "$b" >"$out" 2>&1
  rc=$?
  cat "$out"
  # With RL_LOCK_DEBUG=1 (make check-lockdep) a lock-order report that no
  # test asked for (those go to a handler) fails the program.
  if [ "${RL_LOCK_DEBUG:-0}" != 0 ] && grep -q '^RLLockDebug: possible deadlock' "$out"; then
    echo "$name: the lock-order detector reported an inversion (above)"
    rc=98
  fi
  p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$out" | awk '{s+=$4} END{print s+0}')
  f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$out" | awk '{s+=$4} END{print s+0}')
  rm -f "$out"
  passed=$((passed+p)); failed=$((failed+f))
  if [ $rc -ne 0 ]; then
    failed_progs+=("$name(rc=$rc)")
    [ "$f" -eq 0 ] && failed=$((failed+1))
  fi
done
echo "C tests in $BUILD: ${#bins[@]} programs"
[ ${#failed_progs[@]} -gt 0 ] && echo "failing programs: ${failed_progs[*]}"
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
