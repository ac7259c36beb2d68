#!/usr/bin/env bash
# Runs the C examples (examples/c) built by `make examples`.
#
#   scripts/run-examples.sh [NAME...]         check mode (make check-examples):
#       each example runs fast (RL_EXAMPLE_FAST=1) and its output is checked
#       for the lines it must print; ends with "N passed, N failed".
#   scripts/run-examples.sh --demo [NAME...]  the tour (make demo): each
#       example at a readable pace (RL_EXAMPLE_TOUR=1) under a heading.
#
# "echo" is two programs (echo_server, echo_client) run together by
# run_echo / demo_echo below instead of one binary on its own.
#
# BUILD (environment) is the build directory; binaries are $BUILD/examples/NAME.
# Checks look only at what the programs print, never at how long they took;
# the timeout exists only so that a hang fails instead of blocking.
set -u

BUILD=${BUILD:-build/clang}
BIN=$BUILD/examples
TIMEOUT=${EXAMPLE_TIMEOUT:-120}

# fail, has_line, has, count_lines, section; check_parser, check_daemon and
# drive_daemon, shared with the Swift versions of the examples.
. "$(dirname "$0")/example-checks.sh"

ALL_EXAMPLES=(countdown interleave producer_consumer progress_bar delegate_thread listing_2_3
              worker_start_stop sync_tour cf_listings port_checkin message_ports
              threaded_parser daemon_skeleton loop_health echo)

declare -A TITLES=(
  [countdown]="a repeating run-loop timer counting 10 -> 1 (0.2 s ticks in this tour; 1 s when run alone)"
  [interleave]="two threads printing at once: no sleep, sleep, @synchronized"
  [producer_consumer]="ThreadSafeQueue over a condition lock: producers and consumers"
  [progress_bar]="a worker posts progress to the main run loop, which draws the bar"
  [delegate_thread]="a background job reports to its delegate on the delegate's own thread"
  [listing_2_3]="Listing 2-3: a long job checking an exit flag set by an input source"
  [worker_start_stop]="a worker thread: start returns when ready, stop returns when gone"
  [sync_tour]="atomics, locks, conditions, read-write and distributed locks, lock-order detector"
  [cf_listings]="the Run Loops chapter's CF listings, through cf_compat.h"
  [message_ports]="Listings 3-17 to 3-19: CFMessagePort check-in, worker as a thread and as a process"
  [port_checkin]="Listings 3-12 to 3-15: a worker checks in through ports, then takes jobs"
  [threaded_parser]="expat parses on a background thread and reports to its delegate on the main thread"
  [daemon_skeleton]="SIGHUP reloads, SIGTERM stops: signals on the main loop, workers stopped cleanly"
  [loop_health]="a slow callout reported as it returns, then the loop's statistics"
  [echo]="a TCP echo server (RLSocket) and the tutorial's echo client (RLStream), stopped by SIGINT"
)

# ---- the echo pair: a server in the background, clients against it ----

ECHO_PID=""
ECHO_PORT=""
# echo_start LOG [ARGS...]: starts the server, waits for "listening on PORT".
echo_start() {
  local log=$1; shift
  "$BIN/echo_server" "$@" >"$log" 2>&1 &
  ECHO_PID=$!
  local i
  for i in $(seq 1 200); do
    ECHO_PORT=$(sed -n '1s/^listening on \([0-9][0-9]*\)$/\1/p' "$log")
    [ -n "$ECHO_PORT" ] && return 0
    kill -0 "$ECHO_PID" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
# echo_stop SIGNAL: stops the server with SIGNAL, waits; returns its status.
echo_stop() {
  [ -n "$ECHO_PID" ] || return 1
  kill -"$1" "$ECHO_PID" 2>/dev/null
  local rc=0
  wait "$ECHO_PID" || rc=$?
  ECHO_PID=""
  return $rc
}

demo_echo() {
  local log
  log=$(mktemp)
  if ! echo_start "$log" -v; then echo "(the echo server did not start)"; cat "$log"; rm -f "$log"; return 1; fi
  echo "\$ echo_server -v &"
  echo "listening on $ECHO_PORT"
  echo "\$ (a line every 0.3 s) | echo_client -v localhost $ECHO_PORT"
  local status=0
  (for line in "Hello, run loop" "every line goes out when the write stream can take it" \
               "and comes back through HasBytesAvailable" "stdin is a run-loop source too"; do
     echo "$line"; sleep 0.3
   done) | timeout "$TIMEOUT" "$BIN/echo_client" -v localhost "$ECHO_PORT" || status=1
  echo "\$ seq 1 100000 | echo_client localhost $ECHO_PORT | tail -2     # 588,895 bytes"
  seq 1 100000 | timeout "$TIMEOUT" "$BIN/echo_client" localhost "$ECHO_PORT" | tail -2
  echo "\$ kill -INT %1     # the server's log:"
  echo_stop INT || status=1
  sed 's/^/  [server] /' "$log"
  rm -f "$log"
  return $status
}

demo=0
if [ "${1:-}" = "--demo" ]; then demo=1; shift; fi
if [ $# -gt 0 ]; then names=("$@"); else names=("${ALL_EXAMPLES[@]}"); fi

# ---- the tour ----
if [ $demo = 1 ]; then
  trap '[ -n "$ECHO_PID" ] && kill "$ECHO_PID" 2>/dev/null' EXIT
  status=0
  for name in "${names[@]}"; do
    echo
    echo "==== $name — ${TITLES[$name]:-} ===="
    if declare -F "demo_$name" >/dev/null; then
      "demo_$name" || { echo "($name exited with an error)"; status=1; }
      continue
    fi
    if [ "$name" = daemon_skeleton ]; then
      echo "(the tour sends it SIGHUP, then SIGTERM, from outside)"
      tour_out=$(mktemp)
      RL_EXAMPLE_TOUR=1 TEE=1 drive_daemon "$tour_out" TERM 1 daemon_skeleton "$BIN/daemon_skeleton"
      rc=$?
      rm -f "$tour_out"
      [ $rc -eq 0 ] || { echo "($name exited with status $rc)"; status=1; }
      continue
    fi
    if ! RL_EXAMPLE_TOUR=1 timeout "$TIMEOUT" "$BIN/$name"; then
      echo "($name exited with an error)"
      status=1
    fi
  done
  exit $status
fi

# ---- checks ----
OUT=""        # the output file of the example being checked
problems=()   # what went wrong with it

check_loop_health() {
  has "crunloop: slow callout: timer parse_big_file held the run loop"
  has "in mode kRLRunLoopDefaultMode (threshold 20.000 ms): <RLRunLoopTimer"
  count_lines '^crunloop: slow callout' 1
  grep -Eq '^ticks 10, commands taken in ([1-9]|1[0-9]|20) performs$' "$OUT" || fail "not 10 ticks and 1-20 performs"
  has "the main loop's statistics:"
  grep -Eq '^  timer +[0-9]+ +timer +11$' "$OUT" || fail "not 11 timer callouts (10 ticks, 1 slow)"
  has_line "every callout timed: yes"
  has_line "loop_health: done"
}

check_countdown() {
  has_line "timer scheduled; running the main run loop"
  # 10 ticks, counting down, and the "scheduled" line came before the first.
  [ "$(grep -E '^  [0-9]+$' "$OUT" | tr -d ' ' | tr '\n' ' ')" = "10 9 8 7 6 5 4 3 2 1 " ] ||
    fail "ticks were not 10 9 8 ... 1"
  [ "$(grep -n -m1 'timer scheduled' "$OUT" | cut -d: -f1)" -lt "$(grep -n -m1 -E '^  10$' "$OUT" | cut -d: -f1)" ] ||
    fail "scheduling the timer did not return before the first tick"
  has_line "timer invalidated after 10 ticks"
  has_line "run loop returned: finished (no timer or source left in the default mode)"
  has_line "countdown: done"
}

check_interleave() {
  local round
  for round in 1 2 3; do
    has "--- round $round:"
  done
  has_line "--- end ---"
  # Each round: five whole main-thread lines (one printf each).
  for round in 1 2 3; do
    local n
    n=$(section "--- round $round:" "---" | grep -Ec 'Main thread x = [0-4]$')
    [ "$n" -eq 5 ] || fail "round $round: expected 5 'Main thread x = N' lines, found $n"
  done
  # Round 3 (synchronized): only whole lines, five of each kind.
  local sync
  sync=$(section "--- round 3:" "--- end ---")
  [ "$(printf '%s\n' "$sync" | grep -Evc '^(Main thread x = [0-4]|\[My\])$')" -eq 0 ] ||
    fail "round 3 has a broken line: $(printf '%s\n' "$sync" | grep -Ev '^(Main thread x = [0-4]|\[My\])$' | head -1)"
  [ "$(printf '%s\n' "$sync" | grep -Fxc '[My]')" -eq 5 ] || fail "round 3: expected 5 '[My]' lines"
  # Rounds 1 and 2 print the same characters, in some order: 5 of each.
  for round in 1 2; do
    local chars
    chars=$(section "--- round $round:" "---" | sed 's/Main thread x = [0-4]//g' | tr -d '\n')
    [ "$(printf '%s' "$chars" | tr -cd 'M' | wc -c)" -eq 5 ] && [ "$(printf '%s' "$chars" | tr -cd '[' | wc -c)" -eq 5 ] ||
      fail "round $round: the second thread's characters are incomplete"
  done
}

check_producer_consumer() {
  # Part 1: one consumer, so it gets 0..4 in order.
  [ "$(grep -E '^dequeue -[0-9]+$' "$OUT" | tr '\n' ' ')" = "dequeue -0 dequeue -1 dequeue -2 dequeue -3 dequeue -4 " ] ||
    fail "part 1: dequeued values were not 0..4 in order"
  count_lines '^enqueue \+[0-4]$' 5
  has_line "produced 6000 items, sum 18003000"
  has_line "consumed 6000 items, sum 18003000"
  has_line "every consumer saw each producer's items in order: yes"
  has_line "totals match: yes"
  count_lines '^consumer [0-9] \((dequeue|tryDequeue)\): [0-9]+ items' 3
}

check_progress_bar() {
  # Not a terminal here: one line per step, plus the empty bar first.
  count_lines '^  \[[#.]{40}\] +[0-9]+\.[0-9]% \(progress [0-9.]+\)$' 41
  has "[########################################] 100.0% (progress 1.000)"
  has_line "worker finished; stopping the main run loop"
  has_line "done: 40 updates, all on the main thread: yes"
  # The steps arrived in order (FIFO perform requests).
  grep -Eo 'progress [0-9.]+' "$OUT" | sort -c -t' ' -k2,2n 2>/dev/null || fail "progress went backwards"
}

check_delegate_thread() {
  has_line "  [main] parseDidComplete: 72 words; most frequent: \"a\" x6, \"the\" x6, \"run\" x4"
  has_line "  [main] delivered on the thread that started the job: yes"
  has_line "  [ui-2] parseDidComplete: 72 words; most frequent: \"a\" x6, \"the\" x6, \"run\" x4"
  has_line "  [ui-2] delivered on the thread that started the job: yes"
  count_lines '^  \[parser\] parsing in the background$' 2
  has_line "delegate_thread: both results came back to the thread that asked"
}

check_listing_2_3() {
  has_line "  [main] the worker has done 5 chunks; signalling its input source"
  has_line "  [worker] input source fired: setting ThreadShouldExitNow in the thread dictionary"
  has "  [worker] exit flag seen after chunk "
  has_line "  [worker] input source cancelled (removed from the run loop)"
  has_line "listing_2_3: the job stopped early on request"
}

check_worker_start_stop() {
  count_lines '^  \[main\] start returned; worker running: yes, its thread executing: yes$' 2
  count_lines '^  \[worker\] job [123]$' 6
  count_lines '^  \[main\] sync job returned 5050; it ran on the worker: yes$' 2
  has "it woke up 0 times (no polling)"
  count_lines '^  \[worker\] will-exit handler' 2
  count_lines '^  \[main\] stop returned; the will-exit handler had run: yes; the thread is finished: yes; worker running: no$' 2
  # The handler's line comes before "stop returned" in each round.
  [ "$(grep -E '^  \[(worker\] will-exit|main\] stop returned)' "$OUT" | cut -c1-10 | tr '\n' ' ')" = \
    "  [worker]   [main] s   [worker]   [main] s " ] || fail "a will-exit handler ran after stop returned"
  has_line "worker_start_stop: all promises kept"
}

check_sync_tour() {
  has_line "  TestAndSet(0) on 0    -> 128"
  has_line "  TestAndSet(7) on 0    -> 1"
  has_line "  TestAndSet(15) on 0   -> 256"
  has_line "  CompareAndSwap32(256, 512)  -> swapped, value 512"
  has_line "  CompareAndSwap32(256, 1024) -> not swapped, value 512"
  has_line "  [waiter] woke with ready_to_go = true; doing the work"
  has_line "  inversions reported: 1"
  has "  detector: possible deadlock: this thread holds B and takes A"
  count_lines '^  \[FAILED\]' 0
  count_lines '^  \[ok\]' 19
  has_line "sync_tour: OK"
}

check_message_ports() { check_message_port_flows message_ports; }

check_threaded_parser() { check_parser threaded_parser 'mismatched tag at line [0-9]+'; }

# Drives the daemon as a test: stopped once by SIGTERM, once by SIGINT, once
# by both at once; each run must exit with status 0.
run_daemon_skeleton() {
  local sig rc
  for sig in TERM INT INT+TERM; do
    OUT=$tmp/daemon_skeleton.$sig.out
    RL_EXAMPLE_FAST=1 drive_daemon "$OUT" "$sig" 0 daemon_skeleton "$BIN/daemon_skeleton"
    rc=$?
    if [ $rc -eq 124 ]; then fail "SIG$sig run: timed out after ${TIMEOUT} s"
    elif [ $rc -ne 0 ]; then fail "SIG$sig run: exit status $rc"; fi
    check_daemon daemon_skeleton "$sig"
  done
}

# The echo pair, run together: the server on any free port, the client
# with piped, file and empty input (its output must be exactly its input),
# a refused connection, then SIGINT. Writes what it saw to $OUT, then
# checks it (check_echo).
run_echo() {
  local dir log
  dir=$(mktemp -d); log=$dir/server.log
  {
    if ! echo_start "$log" -v; then
      echo "server did not start"; cat "$log"
    fi
    echo "server: listening on $ECHO_PORT"
    printf 'hello\nworld\n' | timeout "$TIMEOUT" "$BIN/echo_client" localhost "$ECHO_PORT" >"$dir/small" 2>&1
    echo "client (pipe, 2 lines): status $?, output $(tr '\n' '|' <"$dir/small")"
    seq 1 200000 >"$dir/big.in"
    timeout "$TIMEOUT" "$BIN/echo_client" 127.0.0.1 "$ECHO_PORT" <"$dir/big.in" >"$dir/big.out" 2>&1
    echo "client (file, $(wc -c <"$dir/big.in") bytes): status $?, $(cmp -s "$dir/big.in" "$dir/big.out" && echo same || echo DIFFERENT) output"
    seq 1 200000 | timeout "$TIMEOUT" "$BIN/echo_client" localhost "$ECHO_PORT" >"$dir/big.pipe" 2>&1
    echo "client (pipe, $(wc -c <"$dir/big.in") bytes): status $?, $(cmp -s "$dir/big.in" "$dir/big.pipe" && echo same || echo DIFFERENT) output"
    timeout "$TIMEOUT" "$BIN/echo_client" localhost "$ECHO_PORT" </dev/null >"$dir/empty" 2>&1
    echo "client (empty input): status $?, $(wc -c <"$dir/empty") bytes out"
    # A client exits once all its echoes are back, maybe before the server
    # has seen its end (the empty one at once): SIGINT waits until the
    # server has logged the fourth end, or 10 s, so that it finds every
    # connection closed by its client.
    for _ in $(seq 1 100); do
      [ "$(grep -c 'closed: the client finished' "$log")" -ge 4 ] && break
      sleep 0.1
    done
    echo_stop INT
    echo "server: exit status $?"
    sed 's/^/server log: /' "$log"
    # Nothing listens on the port any more.
    echo x | timeout "$TIMEOUT" "$BIN/echo_client" 127.0.0.1 "$ECHO_PORT" >"$dir/refused" 2>&1
    echo "client (server gone): status $?: $(cat "$dir/refused")"
    # --stats: the loop's statistics on SIGUSR1, and again at the end.
    if echo_start "$dir/stats.log" --stats; then
      printf 'one\ntwo\n' | timeout "$TIMEOUT" "$BIN/echo_client" localhost "$ECHO_PORT" >/dev/null 2>&1
      kill -USR1 "$ECHO_PID"
      for _ in $(seq 1 100); do grep -q "statistics:" "$dir/stats.log" && break; sleep 0.1; done
      echo_stop INT
      echo "server --stats: exit status $?"
      sed 's/^/stats log: /' "$dir/stats.log"
    else
      echo "server --stats did not start"
    fi
  } >"$OUT" 2>&1
  rm -rf "$dir"
  check_echo
}

check_echo() {
  has_line "client (pipe, 2 lines): status 0, output hello|world|"
  has_line "client (file, 1288895 bytes): status 0, same output"
  has_line "client (pipe, 1288895 bytes): status 0, same output"
  has_line "client (empty input): status 0, 0 bytes out"
  has_line "server: exit status 0"
  # A client exits once all its echoes are back, maybe before the server
  # has seen its end: the next one may find it still open.
  count_lines '^server log: connection [1-4] from 127\.0\.0\.1:[0-9]+ \([12] open\)$' 4
  count_lines '^server log: connection [1-4] from 127\.0\.0\.1:[0-9]+ closed: the client finished' 4
  count_lines '^server log: stopping on SIGINT: 4 connections served \(at most [12] at once\), 2577802 bytes echoed, [0-9]+ pauses for back-pressure$' 1
  has "client (server gone): status 1: echo_client: cannot connect to 127.0.0.1 port"
  has_line "server --stats: exit status 0"
  # Once on SIGUSR1, once at the end; the accept and the data were callouts.
  count_lines "^stats log: the server's loop's statistics:$" 2
  count_lines '^stats log:   callout duration ' 2
  grep -Eq '^stats log:   passes [1-9][0-9]* +sleeps [1-9]' "$OUT" || fail "--stats: no passes or sleeps counted"
}

check_cf_listings() {
  [ "$(tail -1 "$OUT")" = "cf_listings: OK" ] || fail "last line is not 'cf_listings: OK'"
}

passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -n "$ECHO_PID" ] && kill "$ECHO_PID" 2>/dev/null' EXIT

# The programs an entry runs: itself, or the pair for "echo".
programs() { if [ "$1" = echo ]; then echo "echo_server echo_client"; else echo "$1"; fi; }

for name in "${names[@]}"; do
  OUT=$tmp/$name.out
  problems=()
  missing=""
  for prog in $(programs "$name"); do [ -x "$BIN/$prog" ] || missing="$missing $BIN/$prog"; done
  if [ -n "$missing" ]; then
    fail "not built:$missing"
  elif declare -F "run_$name" >/dev/null; then
    "run_$name" # runs and checks it in its own way
  else
    RL_EXAMPLE_FAST=1 timeout "$TIMEOUT" "$BIN/$name" >"$OUT" 2>&1 </dev/null
    rc=$?
    if [ $rc -eq 124 ]; then fail "timed out after ${TIMEOUT} s"
    elif [ $rc -ne 0 ]; then fail "exit status $rc"; fi
    if declare -F "check_$name" >/dev/null; then "check_$name"; fi
  fi
  if [ ${#problems[@]} -eq 0 ]; then
    echo "[examples] PASS $name"
    passed=$((passed + 1))
  else
    echo "[examples] FAIL $name"
    printf '     %s\n' "${problems[@]}"
    if [ -f "$OUT" ]; then
      echo "     --- output ---"
      sed 's/^/     | /' "$OUT" | head -80
    fi
    failed=$((failed + 1))
  fi
done

echo "$passed passed, $failed failed, 0 skipped"
[ $failed -eq 0 ]
