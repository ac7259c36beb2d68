#!/usr/bin/env bash
# `make check`: runs each part (a make target) in turn, even after one fails,
# showing its output as it goes (saved in build/check/PART.log), then a
# table of the parts and one last line of totals:
#   N passed, M failed, K skipped
# A part's counts come from the "N passed, M failed[, K skipped]" line it
# ends with; a part that prints none counts as one check (passed when it
# exits 0).
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=build/check
mkdir -p "$logdir"

declare -A LABELS=(
  [check-c]="C tests (cmocka)"
  [check-diff]="CF differential"
  [check-examples]="C examples"
  [check-exports]="exported symbols"
  [check-cf-surface]="CF surface"
  [check-install]="install + pkg-config"
  [check-headers]="headers (C/C++)"
  [check-tree]="help + comments"
  [check-naming]="naming rule"
  [test-naming]="naming tools"
  [check-fuzz]="fuzz (short)"
  [check-fuzz-diff]="CF differential fuzz"
  [check-swift]="swift test"
  [check-swift-demo]="Swift examples"
  [check-readme]="README blocks"
  [check-docs]="DocC (no warnings)"
  [check-bench-chart]="bench charts"
)

rows=(); tp=0; tf=0; ts=0
for part in "$@"; do
  label=${LABELS[$part]:-$part}
  log=$logdir/$part.log
  echo
  echo "== $label (make $part)"
  start=$(date +%s)
  make "$part" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  secs=$(( $(date +%s) - start ))
  line=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -1)
  if [ -n "$line" ]; then
    p=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")
    s=$(sed -nE 's/.*, ([0-9]+) skipped.*/\1/p' <<<"$line"); s=${s:-0}
    # A failing exit with no failure counted (a crash, a build error) is one.
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  elif [ "$rc" -eq 0 ]; then p=1; f=0; s=0
  else p=0; f=1; s=0
  fi
  tp=$((tp + p)); tf=$((tf + f)); ts=$((ts + s))
  status=ok; [ "$f" -gt 0 ] && status=FAILED
  rows+=("$(printf '%-22s %7d %7d %8d %6ss  %s' "$label" "$p" "$f" "$s" "$secs" "$status")")
done

echo
printf '%-22s %7s %7s %8s %7s\n' part passed failed skipped time
printf '%s\n' "${rows[@]}"
echo "(logs in $logdir/)"
echo "$tp passed, $tf failed, $ts skipped"
[ "$tf" -eq 0 ]
