# Sourced by scripts/run-examples.sh (the C examples) and
# scripts/run-swift-tests.sh (the Swift ones): the output checks and the
# daemon driver that the C and Swift versions of an example share, since
# both versions print the same lines under their own program name.
#
# The checks read OUT (the output file of the example being checked) and
# add what is wrong to the array `problems` (fail); the caller empties
# `problems` before an example and reports it after. TIMEOUT (seconds) bounds
# the daemon driver's waits, only so that a hang fails.

fail() { problems+=("$*"); }

# has_line TEXT: some line is exactly TEXT.
has_line() { grep -Fxq -- "$1" "$OUT" || fail "missing line: $1"; }
# has TEXT: some line contains TEXT.
has() { grep -Fq -- "$1" "$OUT" || fail "missing text: $1"; }
# count_lines REGEX N: exactly N lines match the extended REGEX.
count_lines() {
  local n
  n=$(grep -Ec -- "$1" "$OUT")
  [ "$n" -eq "$2" ] || fail "expected $2 lines matching /$1/, found $n"
}
# section FROM TO: the lines strictly between the first line starting with
# FROM and the next line starting with TO.
section() {
  awk -v from="$1" -v to="$2" 'index($0, from) == 1 { on = 1; next } on && index($0, to) == 1 { exit } on' "$OUT"
}

# The threaded parser with a delegate (C: threaded_parser, Swift:
# swiftthreads-threaded-parser): a 500-book catalog parsed from a file and
# from a local HTTP server with the same result, a broken copy reported as a
# failure, every report on the main thread, the main loop's timer ticking
# all through each parse.
# check_parser NAME FAILURE: FAILURE is the extended regex of what follows
# "parserDidFail: " (the XML library's message).
check_parser() {
  local name=$1 failure=$2
  has_line "--- from a file ---"
  has_line "--- from a local HTTP server ---"
  count_lines '^  \[main\] parserDidStart: ' 3
  grep -Eq '^  \[main\] parserDidStart: http://127\.0\.0\.1:[0-9]+/catalog\.xml$' "$OUT" || fail "no parse from the HTTP server"
  count_lines '^  \[main\] parserDidFinish: 500 books, total price 14815\.50, most expensive: Run Loops, volume 217 \(99\.50\)$' 2
  has "  [main] progress [##############################] 100.0%  500 books"
  count_lines "^  \\[main\\] parserDidFail: $failure\$" 1
  # The timer kept ticking between the parser's first and last report.
  count_lines '^  \[main\] the timer ticked [1-9][0-9]* times while the parser worked \([0-9]+ progress reports\): the main loop stayed responsive$' 3
  has_line "file and HTTP gave the same catalog: yes"
  has_line "every delegate call ran on the main thread: yes"
  has_line "the broken document was reported as a failure: yes"
  [ "$(tail -1 "$OUT")" = "$name: OK" ] || fail "last line is not '$name: OK'"
}

# The daemon skeleton (C: daemon_skeleton, Swift: swiftthreads-daemon),
# after drive_daemon: ready, SIGHUP reloaded (workers restarted), STOPSIG
# stopped it cleanly with every job done. With two stop signals sent at
# once (INT+TERM, as when a service manager's SIGTERM follows a Ctrl-C),
# the first one handled stops it and the other must not end it half-way.
# check_daemon NAME STOPSIG
check_daemon() {
  local name=$1 stop=$2
  grep -Eq "^$name: ready \\(pid [0-9]+, fast pace\\): SIGHUP reloads, SIGTERM or SIGINT stops\$" "$OUT" ||
    fail "no ready line"
  has_line "  [main] SIGHUP received"
  has_line "  [main] reload: configuration 2; restarting the workers"
  if [[ $stop == *+* ]]; then
    grep -Eq "^  \[main\] SIG(${stop//+/|}) received" "$OUT" || fail "no SIG${stop//+/ or SIG} received"
  else
    has_line "  [main] SIG$stop received"
  fi
  count_lines '^  \[main\] stopping: no more jobs; stopping the workers$' 1
  # Both workers went through the lifecycle twice (reload, stop), each
  # will-exit handler before its Stop returned.
  count_lines '^  \[worker-[12]\] will-exit handler: the worker thread is finishing$' 4
  count_lines '^  \[main\] worker-[12] stopped$' 4
  count_lines '^  \[main\] worker-[12] started \(configuration 2\)$' 2
  [ "$(grep -E '^  \[(worker-1\] will-exit|main\] worker-1 stopped)' "$OUT" | cut -c4-9 | tr '\n' ' ')" = \
    "worker main]  worker main]  " ] || fail "worker-1's will-exit handler did not run before its Stop returned"
  # Signals only ever reached the main thread.
  count_lines '^  \[worker-[12]\] SIG' 0
  grep -Eq "^$name: stopped cleanly: ([0-9]+) jobs sent, \\1 done, 1 reloads\$" "$OUT" ||
    fail "no clean-stop line with every job done"
}

# A daemon runs until a signal stops it, so it is driven from outside, as
# an operator would: kill -HUP once it is ready, then STOPSIG (TERM or INT)
# once the reload is done, then its exit status is awaited. Each step waits
# for the line that shows the previous one was handled; the waits are
# bounded by TIMEOUT only so that a hang fails.
# drive_daemon OUT STOPSIG PAUSE NAME COMMAND [ARGS...]: runs COMMAND, whose
# ready line starts "NAME: ready", with its output to OUT (and to the
# terminal too if TEE is set), PAUSE seconds between the steps; returns its
# exit status (124 if it had to be killed). STOPSIG may be several signals
# joined by "+" (INT+TERM): they are sent while the process is stopped
# (SIGSTOP, then SIGCONT), so all of them are pending at once.
drive_daemon() {
  local out=$1 stop=$2 pause=$3 name=$4 pid status i
  shift 4
  : >"$out"
  if [ -n "${TEE:-}" ]; then
    "$@" > >(tee -a "$out") 2>&1 </dev/null &
  else
    "$@" >"$out" 2>&1 </dev/null &
  fi
  pid=$!
  wait_for_text() { # TEXT: true once OUT holds it, false if the daemon ended or time ran out
    local j
    for ((j = 0; j < TIMEOUT * 20; j++)); do
      grep -Fq -- "$1" "$out" && return 0
      kill -0 "$pid" 2>/dev/null || return 1
      sleep 0.05
    done
    return 1
  }
  if wait_for_text "$name: ready"; then
    sleep "$pause"; kill -HUP "$pid"
    if wait_for_text "  [main] reload done"; then
      sleep "$pause"
      if [[ $stop == *+* ]]; then
        # Stopped meanwhile, so that every one is pending when it goes on.
        local sig
        kill -STOP "$pid"
        for sig in ${stop//+/ }; do kill "-$sig" "$pid"; done
        kill -CONT "$pid"
      else
        kill "-$stop" "$pid"
      fi
    fi
  fi
  for ((i = 0; i < TIMEOUT * 20; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"; wait "$pid" 2>/dev/null
    return 124
  fi
  wait "$pid"
  status=$?
  sleep 0.1 # tee's last lines
  return $status
}

# The guide's port check-in (Listings 3-12 to 3-15; C: port_checkin, Swift:
# swiftthreads-port-checkin): the check-in, five jobs answered in order,
# the worker's exit and its port invalid afterwards.
check_port_checkin() {
  has_line "  [worker] checking in with the main thread"
  has_line "  [main] check-in received: the worker's port is kept"
  # the results come back in the order the jobs went out
  [ "$(grep -E '^  \[main\] job [0-9] done$' "$OUT" | grep -Eo '[0-9]' | tr '\n' ' ')" = "1 2 3 4 5 " ] ||
    fail "results were not jobs 1..5 in order"
  has_line "  [worker] exit message: leaving the run loop"
  has_line "  [main] worker gone; its port is invalid"
  has_line "port check-in: done (5 results)"
}

# The check-in through message ports (Listings 3-17 to 3-19; C:
# message_ports, Swift: swiftthreads-message-ports), the worker a thread and
# then a second process: three requests answered by the worker that checked
# in, the quit, each worker's end, and NAME's closing line.
# check_message_port_flows NAME
check_message_port_flows() {
  local name=$1 flow
  for flow in "thread" "second process"; do
    local out
    out=$(section "== flow: the worker is a $flow ==" "== ")
    printf '%s\n' "$out" | grep -Eq '^\[main\] checked in: com\.MyApp\.Thread-[0-9]+$' ||
      fail "$flow: no check-in line"
    local worker
    worker=$(printf '%s\n' "$out" | sed -n 's/^\[main\] checked in: //p' | head -1)
    local job
    for job in 1 2 3; do
      printf '%s\n' "$out" | grep -Fxq "[worker] request 200: \"job $job\"" || fail "$flow: the worker did not get job $job"
      printf '%s\n' "$out" | grep -Fxq "[main] reply $job: \"done: job $job (by $worker)\"" ||
        fail "$flow: no reply $job from $worker"
    done
    printf '%s\n' "$out" | grep -Fxq "[worker] quit: leaving the run loop" || fail "$flow: the worker did not quit"
    printf '%s\n' "$out" | grep -Fxq "[main] quit sent: ok" || fail "$flow: the quit message was not sent"
  done
  has_line "[main] worker thread finished"
  has_line "[worker] run loop returned; process exits"
  has_line "[main] worker process exited with status 0"
  [ "$(tail -1 "$OUT")" = "$name: OK" ] || fail "last line is not '$name: OK'"
}
