#!/usr/bin/env bash
# `swift test` with a time limit, so that a hung test fails the run with
# its name and its threads' stacks, instead of holding CI until CI's own
# limit kills everything.
#
#   scripts/swift-test-timed.sh SECONDS LOG [--tee] COMMAND...
#
# Runs COMMAND (the whole `swift test ...` command line) in a session of
# its own, its output in LOG (and on the terminal too with --tee). Past
# SECONDS:
#   - the tests that started but never ended are named (XCTest's
#     "Test Case 'X.y' started" without its passed/failed/skipped line,
#     Swift Testing's "Test name() started." without its
#     passed/failed/skipped line);
#   - every thread's stack of each test process (the .xctest binary) is
#     printed, by gdb (scripts/setup-deps.sh installs it), into LOG.stacks,
#     and its first lines here;
#   - every process of the session is stopped (TERM, then KILL 30 s
#     later; swift test runs its test processes in groups of their own).
# Sanitizer reports in LOG are summed up last (sanitizer_digest).
# Exits with COMMAND's status, 124 on a timeout.
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 SECONDS LOG [--tee] COMMAND..." >&2; exit 2
fi
limit=$1 log=$2; shift 2
case $limit in ''|*[!0-9]*) echo "$0: SECONDS must be a whole number, got '$limit'" >&2; exit 2;; esac
tee=0
if [ "${1:-}" = --tee ]; then tee=1; shift; fi
[ $# -gt 0 ] || { echo "$0: no command given" >&2; exit 2; }
mkdir -p "$(dirname "$log")"
stacks=$log.stacks
marker=$(mktemp)
rm -f "$stacks"

# The sanitizer reports in log $1, each in a few lines, printed last so
# that the end of the run's output (all a CI summary may keep) says where
# they are: per report, its SUMMARY line and the first two frames of each
# access or location it names (not where its threads or mutexes were
# made); the same SUMMARY twice is shown once, with its count. Each report
# stays in full in the log and above.
sanitizer_digest() {
  grep -qE '^(WARNING: ThreadSanitizer|==[0-9]+==ERROR: (Address|Leak)Sanitizer)' "$1" || return 0
  echo
  echo "sanitizer reports of this run ($(grep -cE '^(WARNING: ThreadSanitizer|==[0-9]+==ERROR: (Address|Leak)Sanitizer)' "$1") in all, each in full in $1); where they are:"
  sed 's/\x1b\[[0-9;]*m//g' "$1" | awk '
    /^(WARNING: ThreadSanitizer|==[0-9]+==ERROR: (Address|Leak)Sanitizer)/ { inrep = 1; skip = 0; body = ""; frames = 0; next }
    !inrep { next }
    /^  [A-Z].*(created|acquired) / { skip = 1; next }
    /^  [A-Z][^#]*(of size|is|by thread|Mutex)/ {
      skip = 0
      h = $0; sub(/^ +/, "", h); sub(/ at 0x[0-9a-f]+/, "", h)
      body = body "      " substr(h, 1, 100) "\n"; frames = 0; next }
    /^ +#[0-9]+ / {
      if (!skip && frames++ < 2) { f = $0; sub(/^ +/, "", f); sub(/ \(.*\)$/, "", f)
        n = split(f, w, " "); g = w[1] " " w[2]; loc = w[n]; sub(/.*\//, "", loc)
        body = body "        " substr(g " " loc, 1, 110) "\n" }
      next }
    /^SUMMARY: / {
      inrep = 0; key = $0
      if (!(key in seen)) { order[++k] = key; text[key] = body }
      seen[key]++; next }
    END {
      for (i = 1; i <= k && i <= 12; i++) {
        key = order[i]; printf "  %dx %s\n%s", seen[key], substr(key, 10, 160), text[key] }
      if (k > 12) printf "  ... and %d more kinds\n", k - 12
    }'
}

# The test processes of session $1 and their threads' stacks.
dump_stacks() {
  local p found=0
  for p in $(pgrep -s "$1"); do
    grep -q '\.xctest' "/proc/$p/cmdline" 2>/dev/null || continue
    found=1
    echo "==== process $p: $(tr '\0' ' ' < "/proc/$p/cmdline" | cut -c1-300)"
    if command -v gdb >/dev/null; then
      timeout 120 gdb -nx -batch -p "$p" -ex 'set pagination off' -ex 'thread apply all bt 40' 2>&1 |
        grep -E '^(Thread|#)' | head -3000
    else
      echo "(no gdb: the stacks cannot be printed)"
    fi
  done
  [ $found = 1 ] || echo "(no .xctest process was running)"
}

: > "$log"
setsid "$@" >"$log" 2>&1 </dev/null &
pid=$!
tailpid=
if [ $tee = 1 ]; then tail -n +1 -f --pid="$pid" "$log" & tailpid=$!; fi
# The watchdog: its output goes nowhere, so that nothing it leaves behind
# holds the caller's pipes open; told to go (TERM), it ends its sleep and
# goes at once.
(
  exec >/dev/null 2>&1
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  sleep "$limit" & nap=$!; wait "$nap"
  echo timeout > "$marker"
  dump_stacks "$pid" > "$stacks"
  pkill -TERM -s "$pid"
  sleep 30 & nap=$!; wait "$nap"
  pkill -KILL -s "$pid"
) &
dog=$!
wait "$pid"; rc=$?
kill "$dog" 2>/dev/null; wait "$dog" 2>/dev/null
# Stopped: whatever of its session is left goes too.
[ -s "$marker" ] && pkill -KILL -s "$pid" 2>/dev/null
[ -n "$tailpid" ] && wait "$tailpid" 2>/dev/null

if [ -s "$marker" ]; then
  rm -f "$marker"
  echo "swift test did not end within $limit s and was stopped; tests still running then:"
  sed 's/\x1b\[[0-9;]*m//g' "$log" | awk '
    # XCTest
    match($0, /^Test Case .* started/) {
      name = $0; sub(/^Test Case /, "", name); sub(/ started.*/, "", name)
      open[name] = 1; order[++n] = name; next }
    match($0, /^Test Case .* (passed|failed|skipped)/) {
      name = $0; sub(/^Test Case /, "", name); sub(/ (passed|failed|skipped).*/, "", name)
      delete open[name]; next }
    # Swift Testing
    match($0, /^[^ ]+ Test [^ ].* started\.$/) {
      name = $0; sub(/^[^ ]+ Test /, "", name); sub(/ started\.$/, "", name)
      if (name == "run") next  # the run itself
      open[name] = 1; order[++n] = name; next }
    match($0, /^[^ ]+ Test [^ ].* (passed after|failed after|skipped)/) {
      name = $0; sub(/^[^ ]+ Test /, "", name)
      sub(/ (passed after|failed after|skipped).*/, "", name)
      delete open[name]; next }
    END {
      shown = 0
      for (i = 1; i <= n; i++) if (order[i] in open) { print "     | " order[i]; delete open[order[i]]; shown++ }
      if (!shown) print "     | (none started without ending: the hang is outside a test)"
    }'
  echo "the test process's threads then (all of them in $stacks; the first 400 lines):"
  head -400 "$stacks" | sed 's/^/     | /'
  exit 124
fi
rm -f "$marker"
sanitizer_digest "$log"
exit "$rc"
