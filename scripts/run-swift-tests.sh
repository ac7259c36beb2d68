#!/usr/bin/env bash
# The Swift side of `make check` and `make demo`, built quietly.
#
#   scripts/run-swift-tests.sh          swift build --build-tests, then swift test
#       (stopped after SWIFT_TEST_TIMEOUT seconds, 600 by default, with the
#       names of the tests still running: scripts/swift-test-timed.sh):
#       one "[swift] PASS/FAIL suite NAME" line per suite (the whole output of
#       a failing run), ends with "N passed, N failed, N skipped" over the tests
#   scripts/run-swift-tests.sh --demo   the Swift examples, checked:
#       swiftthreads-demo in its fast mode must exit 0 and end with its closing
#       line; swiftthreads-echo-client with two lines on its standard input
#       must echo both and exit 0; swiftthreads-threaded-parser (fast) must
#       print what examples/c's threaded_parser prints, and report a missing
#       file and a URL off this machine as failures; swiftthreads-daemon
#       (fast) is driven with kill as daemon_skeleton is (SIGHUP, then SIGTERM;
#       again with SIGINT; again with both at once) and checked the same way
#       (scripts/example-checks.sh); swiftthreads-port-checkin and
#       swiftthreads-message-ports (fast) must print what their C twins
#       (port_checkin, message_ports) print; swiftthreads-async-echo (fast)
#       must echo its clients and show its writer held back;
#       swiftthreads-main-queue
#       (Tests/SwiftMainQueue) must pass every check and end with its OK line;
#       "[swift-demo] PASS ..." for each, then "N passed, N failed, 0 skipped"
#   scripts/run-swift-tests.sh --tour   swiftthreads-demo's tour (RL_EXAMPLE_TOUR=1): what Swift adds,
#       then the echo client over the Foundation-shaped streams, the threaded
#       parser, the daemon (sent SIGHUP, then SIGTERM), the port check-in,
#       the message ports and the async echo server
#
# SWIFT_ARGS: extra SwiftPM arguments (the Makefile's PLAIN=1 build folder).
# V=1 prints SwiftPM's own output as it goes.
set -uo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
read -r -a args <<< "${SWIFT_ARGS:-}"
mode=${1:-test}
# SwiftPM takes CC/CFLAGS from the environment: a gcc from `make CC=gcc`
# must not reach it.
swiftpm() { env -u CC -u CFLAGS -u CPPFLAGS -u LDFLAGS -u MAKEFLAGS -u MFLAGS "$SWIFT" "$@"; }
logdir=.build/logs
mkdir -p "$logdir"
TIMEOUT=${EXAMPLE_TIMEOUT:-120}
# The checks and the daemon driver shared with the C examples.
. scripts/example-checks.sh

# build WHAT LOG ARGS...: a quiet SwiftPM build that says what it does.
build() {
  local what=$1 log=$2; shift 2
  printf '  %-8s %s\n' SWIFT "building $what (swift build $*; V=1 shows its output) ..."
  if [ "${V:-0}" = 1 ]; then swiftpm build "$@" "${args[@]}" 2>&1 | tee "$log"; return "${PIPESTATUS[0]}"; fi
  if ! swiftpm build "$@" "${args[@]}" >"$log" 2>&1; then
    echo "swift build failed:"; grep -E 'error:' "$log" | head -30; tail -5 "$log"; return 1
  fi
}

# The Swift examples with a C twin's protocol, and the async echo server.
declare -A swift_titles=(
  [port-checkin]="Listings 3-12 to 3-15: a worker thread checks in through RLPorts, then takes jobs"
  [message-ports]="Listings 3-17 to 3-19: RLMessagePort check-in, the worker a thread, then a second process"
  [async-echo]="RLAsyncServer: four clients echoed at once, a late reader's writes held back by the watermarks"
)

# swiftthreads-async-echo (fast): every client's lines echoed whole, the
# late reader held back and then served whole, five connections served.
check_async_echo() {
  has_line "swiftthreads-async-echo: listening on 127.0.0.1, a free port (fast pace)"
  count_lines '^  \[client [1-4]\] 3 lines sent, echoed back whole: yes$' 4
  has_line "  [late client] not reading: its writes were held back by the watermarks: yes"
  has_line "  [late client] reading: all 16 MiB came back whole: yes"
  has_line "  [server] served 5 connections"
  [ "$(tail -1 "$OUT")" = "swiftthreads-async-echo: OK" ] || fail "last line is not 'swiftthreads-async-echo: OK'"
}

# The echo client's input in the tour and the check: two lines, then the end.
echo_lines=$'hello, run loop\nechoed by an RLSocket server in the same process'

case $mode in
--tour)
  build "the Swift demo" "$logdir/demo-build.log" --product swiftthreads-demo || exit 1
  build "the Swift echo client" "$logdir/echo-build.log" --product swiftthreads-echo-client || exit 1
  echo
  echo "==== Swift: swiftthreads-demo (what the Swift layer adds) ===="
  RL_EXAMPLE_TOUR=1 env -u MAKEFLAGS "$SWIFT" run -q --skip-build "${args[@]}" swiftthreads-demo || exit 1
  build "the Swift threaded parser" "$logdir/parser-build.log" --product swiftthreads-threaded-parser || exit 1
  build "the Swift daemon" "$logdir/daemon-build.log" --product swiftthreads-daemon || exit 1
  bin=$(swiftpm build --show-bin-path "${args[@]}")
  status=0
  echo
  echo "==== Swift: swiftthreads-echo-client (the Cocoa echo client over RLInputStream/RLOutputStream) ===="
  printf '%s\n' "$echo_lines" | timeout "$TIMEOUT" "$bin/swiftthreads-echo-client" || status=1
  echo
  echo "==== Swift: swiftthreads-threaded-parser (XMLParser on an RLThread, its delegate told on the main thread) ===="
  RL_EXAMPLE_TOUR=1 timeout "$TIMEOUT" "$bin/swiftthreads-threaded-parser" || status=1
  echo
  echo "==== Swift: swiftthreads-daemon (signals on the main loop, RLWorkerThread workers restarted and stopped) ===="
  echo "(the tour sends it SIGHUP, then SIGTERM, from outside)"
  tour_out=$(mktemp)
  RL_EXAMPLE_TOUR=1 TEE=1 drive_daemon "$tour_out" TERM 1 swiftthreads-daemon "$bin/swiftthreads-daemon" || status=1
  rm -f "$tour_out"
  for example in port-checkin message-ports async-echo; do
    build "swiftthreads-$example" "$logdir/$example-build.log" --product "swiftthreads-$example" || { status=1; continue; }
    echo
    echo "==== Swift: swiftthreads-$example (${swift_titles[$example]}) ===="
    RL_EXAMPLE_TOUR=1 timeout "$TIMEOUT" "$bin/swiftthreads-$example" </dev/null || status=1
  done
  exit $status
  ;;
--demo)
  passed=0 failed=0
  build "the Swift demo" "$logdir/demo-build.log" --product swiftthreads-demo || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
  # The built programs are run as they are, not through `swift run`, which
  # would take the make command line's CC (gcc in `make CC=gcc check`)
  # and the package's locks into a check of the program.
  bin=$(swiftpm build --show-bin-path "${args[@]}")
  out=$logdir/swiftthreads-demo.out
  if RL_EXAMPLE_FAST=1 timeout 300 "$bin/swiftthreads-demo" >"$out" 2>&1 </dev/null; then
    echo "[swift-demo] PASS swiftthreads-demo (fast mode)"; passed=$((passed + 1))
  else
    rc=$?
    echo "[swift-demo] FAIL swiftthreads-demo (fast mode): exit status $rc$([ $rc -eq 124 ] && echo ', timed out after 300 s')"
    sed 's/^/     | /' "$out" | tail -60; failed=$((failed + 1))
  fi
  out=$logdir/swiftthreads-echo-client.out
  if build "the Swift echo client" "$logdir/echo-build.log" --product swiftthreads-echo-client &&
     printf '%s\n' "$echo_lines" | timeout 120 "$bin/swiftthreads-echo-client" >"$out" 2>&1 &&
     grep -qx 'echo: hello, run loop' "$out" &&
     grep -qx 'echo: echoed by an RLSocket server in the same process' "$out" &&
     [ "$(tail -1 "$out")" = bye ]; then
    echo "[swift-demo] PASS swiftthreads-echo-client (two lines echoed, clean exit)"; passed=$((passed + 1))
  else
    echo "[swift-demo] FAIL swiftthreads-echo-client (two lines echoed, clean exit)"; sed 's/^/     | /' "$out" 2>/dev/null | tail -30
    failed=$((failed + 1))
  fi
  # report WHAT: PASS or FAIL (with the problems and the output OUT) by
  # what the checks put in `problems`.
  report() {
    if [ ${#problems[@]} -eq 0 ]; then
      echo "[swift-demo] PASS $1"; passed=$((passed + 1))
    else
      echo "[swift-demo] FAIL $1"; printf '     %s\n' "${problems[@]}"
      [ -f "$OUT" ] && sed 's/^/     | /' "$OUT" | head -80
      failed=$((failed + 1))
    fi
  }
  # The threaded parser prints what the C one prints, but for the XML
  # library's message: libxml2's code for a tag name mismatch (76).
  OUT=$logdir/swiftthreads-threaded-parser.out
  problems=()
  if build "the Swift threaded parser" "$logdir/parser-build.log" --product swiftthreads-threaded-parser; then
    RL_EXAMPLE_FAST=1 timeout "$TIMEOUT" "$bin/swiftthreads-threaded-parser" >"$OUT" 2>&1 </dev/null
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    check_parser swiftthreads-threaded-parser 'not well-formed \(XMLParser error 76\) at line [0-9]+'
    has_line "the HTTP server answered 1 request"
    # One document named on the command line: failures are reported to
    # the delegate (exit status 1); a URL off this machine is refused
    # before any connection is made.
    for source in /nonexistent/catalog.xml http://example.com:80/catalog.xml; do
      RL_EXAMPLE_FAST=1 timeout "$TIMEOUT" "$bin/swiftthreads-threaded-parser" "$source" >>"$OUT" 2>&1 </dev/null
      rc=$?
      [ $rc -eq 1 ] || fail "$source: exit status $rc, not 1"
    done
    has_line "  [main] parserDidFail: cannot open /nonexistent/catalog.xml: No such file or directory (errno 2)"
    has_line "  [main] parserDidFail: only servers on this machine are fetched, not example.com"
  else
    fail "build failed"
  fi
  report "swiftthreads-threaded-parser (file, local HTTP and broken documents; reports on the main thread)"
  # The daemon, stopped once by SIGTERM, once by SIGINT, once by both at once.
  for sig in TERM INT INT+TERM; do
    OUT=$logdir/swiftthreads-daemon.$sig.out
    problems=()
    if build "the Swift daemon" "$logdir/daemon-build.log" --product swiftthreads-daemon; then
      RL_EXAMPLE_FAST=1 drive_daemon "$OUT" "$sig" 0 swiftthreads-daemon "$bin/swiftthreads-daemon"
      rc=$?
      if [ $rc -eq 124 ]; then fail "timed out after $TIMEOUT s"
      elif [ $rc -ne 0 ]; then fail "exit status $rc"; fi
      check_daemon swiftthreads-daemon "$sig"
    else
      fail "build failed"
    fi
    report "swiftthreads-daemon (SIGHUP reloads, SIG$sig stops cleanly)"
  done
  # The guide's check-in protocols, checked as their C twins are
  # (scripts/example-checks.sh), and the async echo server.
  for example in port-checkin message-ports async-echo; do
    OUT=$logdir/swiftthreads-$example.out
    problems=()
    if build "swiftthreads-$example" "$logdir/$example-build.log" --product "swiftthreads-$example"; then
      RL_EXAMPLE_FAST=1 timeout "$TIMEOUT" "$bin/swiftthreads-$example" >"$OUT" 2>&1 </dev/null
      rc=$?
      [ $rc -eq 0 ] || fail "exit status $rc"
      case $example in
      port-checkin) check_port_checkin ;;
      message-ports) check_message_port_flows swiftthreads-message-ports ;;
      async-echo) check_async_echo ;;
      esac
    else
      fail "build failed"
    fi
    report "swiftthreads-$example (${swift_titles[$example]})"
  done
  # The main dispatch queue served by RLRunLoop.main (Tests/SwiftMainQueue):
  # its main thread runs the loop, which swift test's suites cannot.
  OUT=$logdir/swiftthreads-main-queue.out
  problems=()
  if build "the main-queue check" "$logdir/main-queue-build.log" --product swiftthreads-main-queue; then
    timeout "$TIMEOUT" "$bin/swiftthreads-main-queue" >"$OUT" 2>&1 </dev/null
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    count_lines '^FAIL: ' 0
    [ "$(tail -1 "$OUT")" = "swiftthreads-main-queue: OK" ] || fail "last line is not 'swiftthreads-main-queue: OK'"
  else
    fail "build failed"
  fi
  report "swiftthreads-main-queue (DispatchQueue.main, Task { @MainActor }, MainActor.run on RLRunLoop.main)"
  echo "$passed passed, $failed failed, 0 skipped"
  [ "$failed" -eq 0 ]; exit $?
  ;;
esac

build "SwiftThreads and its tests" "$logdir/test-build.log" --build-tests || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
printf '  %-8s %s\n' SWIFT "swift test ..."
log=$logdir/test.log
# A hung test stops the run after SWIFT_TEST_TIMEOUT seconds (a whole run
# takes about 25 s here) and is named, instead of holding CI to its limit.
tee=(); [ "${V:-0}" = 1 ] && tee=(--tee)
scripts/swift-test-timed.sh "${SWIFT_TEST_TIMEOUT:-600}" "$log" "${tee[@]}" \
  env -u CC -u CFLAGS -u CPPFLAGS -u LDFLAGS -u MAKEFLAGS -u MFLAGS "$SWIFT" test --skip-build "${args[@]}"
rc=$?
# Swift Testing prints a line per test ("✔ Test name() passed after…",
# "✘ Test name() failed…", "➜ Test name() skipped") and per suite; XCTest
# "Test Case '…' passed|failed|skipped". Symbols vary: match the words.
plain=$(sed 's/\x1b\[[0-9;]*m//g' "$log")
count() { printf '%s\n' "$plain" | grep -Ec "$1"; }
passed=$(( $(count '^[^ ]+ Test [^ ].* passed after') + $(count "^Test Case '.*' passed") ))
failed=$(( $(count '^[^ ]+ Test [^ ].* failed after') + $(count "^Test Case '.*' failed") ))
skipped=$(( $(count '^[^ ]+ Test [^ ].* skipped') + $(count "^Test Case '.*' skipped") ))
printf '%s\n' "$plain" | sed -nE 's/^[^ ]+ Suite ([^ ]+) passed after.*/[swift] PASS suite \1/p; s/^[^ ]+ Suite ([^ ]+) failed after.*/[swift] FAIL suite \1/p'
if [ "$rc" -ne 0 ]; then
  echo "swift test exited with status $rc; its failures:"
  printf '%s\n' "$plain" | grep -E 'failed|error|Expectation|recorded an issue|Fatal|crash' | grep -v '^[^ ]+ Suite' | head -60 | sed 's/^/     | /'
  [ "$failed" -eq 0 ] && failed=1
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
