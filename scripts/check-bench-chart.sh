#!/usr/bin/env bash
# scripts/bench-chart.py on made-up results, the cases a real run meets:
# a group with two files, peers that differ row by row, a peer without
# results, a bench that left no results, a file that is not a results file,
# an empty one. Each must end in a chart or a clear message, never a crash.
# One "[chart] PASS|FAIL" line per case, then "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
py=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import matplotlib' 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
  echo "[chart] SKIP no python3 with matplotlib (scripts/setup-deps.sh installs python3-matplotlib)"
  echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
res=$tmp/results; out=$tmp/charts
mkdir -p "$res"
H=group,row,peer,ratio,ratio_min,ratio_max,ours,peer_value,unit
printf '%s\n' "$H" '"alpha","op one, with a comma","P",0.5,0.4,0.6,1,2,"ns"' \
  '"alpha","op two","P",2,1.5,2.5,2,1,"ns"' '"alpha","op two","Q",,,,2,,"ns"' >"$res/alpha.csv"
printf '%s\n' "$H" '"alpha","op three","Q",0.9,0.8,1.1,1,1,"us"' >"$res/alpha-more.csv"
printf '%s\n' "$H" '"beta","x","pthreads",0.7,0.7,0.7,1,1,"ns"' '"beta","y","C11 atomics",1.1,1,1.2,1,1,"ns"' >"$res/beta.csv"
printf '%s\n' "$H" '"gamma","z","R",,,,1,,"us"' >"$res/gamma.csv"
printf '%s\n' "a,b" "1,2" >"$res/junk.csv"
printf '%s\n' "$H" >"$res/empty.csv"
log=$tmp/log
"$py" scripts/bench-chart.py "$out" "$res" --expect alpha,beta,delta >"$log" 2>&1
rc=$?
passed=0; failed=0
check() { # NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "[chart] PASS $name"; passed=$((passed+1))
  else echo "[chart] FAIL $name"; sed 's/^/     | /' "$log"; failed=$((failed+1)); fi
}
has() { grep -qF -- "$1" "$log"; }
check "exits 0 whatever the results" test "$rc" -eq 0
check "one chart per group, from every file of the group" \
  test -s "$out/alpha.svg" -a -s "$out/alpha.png" -a -s "$out/beta.png"
check "a group with no usable ratio gets a message, not a chart" \
  eval 'has "gamma: nothing to draw" && [ ! -e "$out/gamma.png" ]'
check "a peer without results in a row is named" has "alpha: peer 'Q' has no result in 1 of 2 rows: op two"
check "peers that differ row by row are not reported missing" eval '! grep -q "beta:" "$log"'
check "a bench that left no results is named with its make target" has "no results for 'delta' yet: run \`make bench-delta\`"
check "a file that is not a results file is skipped with a message" has "junk.csv: not a results file"
check "an empty results file is reported" has "empty.csv: no results in it"
echo "$passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
