#!/usr/bin/env bash
# `make install` into a temporary prefix, then, as a user outside the tree:
#   - crunloop.pc names no Swift toolchain path (pkg-config --libs, --static);
#   - Tests/install/pkgconfig_app.c built with gcc and with clang, linked
#     against the shared library and fully static (-static with
#     `pkg-config --static`), and run; the static programs must need no
#     shared library at all;
#   - a clang program using the block API, linked with the installed
#     library and with the Swift toolchain's BlocksRuntime (what a Swift
#     program that also links libcrunloop.so ends up with): every block
#     runtime symbol binds to one library, so no block is copied by one
#     runtime and released by the other.
# One "[install] PASS|FAIL|SKIP" line per check, then "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/clang}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
if ! make -s BUILD="$BUILD" install PREFIX="$prefix" >"$prefix/install.log" 2>&1; then
  echo "[install] FAIL make install"; sed 's/^/     | /' "$prefix/install.log" | tail -20
  echo "0 passed, 1 failed, 0 skipped"; exit 1
fi
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
passed=0; failed=0; skipped=0
pass() { echo "[install] PASS $1"; passed=$((passed+1)); }
fail() { echo "[install] FAIL $1"; [ -f "${2:-}" ] && sed 's/^/     | /' "$2" | head -30; failed=$((failed+1)); }
skip() { echo "[install] SKIP $1"; skipped=$((skipped+1)); }

# Where the Swift toolchain lives (swift on PATH), to make sure it is not named.
swift_bin=$(command -v swift 2>/dev/null || true)
toolchain=""
[ -n "$swift_bin" ] && toolchain=$(dirname "$(dirname "$(readlink -f "$swift_bin")")")
for how in "--cflags --libs" "--static --cflags --libs"; do
  # shellcheck disable=SC2086
  flags=$(pkg-config $how crunloop 2>&1)
  if [ -n "$toolchain" ] && grep -qF "$toolchain" <<<"$flags"; then fail "pkg-config $how crunloop names the toolchain: $flags"
  elif grep -qE 'lib/swift' <<<"$flags"; then fail "pkg-config $how crunloop names a Swift path: $flags"
  else pass "pkg-config $how crunloop: $flags"; fi
done

for cc in gcc clang; do
  for link in shared static; do
    label="$cc, $link"
    command -v "$cc" >/dev/null || { skip "$label ($cc not found)"; continue; }
    out=$prefix/app-$cc-$link; log=$out.log
    if [ $link = shared ]; then
      # shellcheck disable=SC2046
      "$cc" -Wall -Werror Tests/install/pkgconfig_app.c $(pkg-config --cflags --libs crunloop) -o "$out" >"$log" 2>&1
    else
      # shellcheck disable=SC2046
      "$cc" -Wall -Werror -static Tests/install/pkgconfig_app.c $(pkg-config --static --cflags --libs crunloop) -o "$out" >"$log" 2>&1
    fi || { fail "$label: does not build" "$log"; continue; }
    if [ $link = static ] && ! file "$out" | grep -q 'statically linked'; then
      fail "$label: not a static executable ($(file -b "$out"))"; continue
    fi
    if [ $link = shared ] && ldd "$out" | grep -q 'lib/swift'; then
      fail "$label: loads a library of the Swift toolchain: $(ldd "$out" | grep 'lib/swift')"; continue
    fi
    if "$out" >>"$log" 2>&1; then pass "$label: built and ran ($(tail -1 "$log"))"
    else fail "$label: exit status $?" "$log"; fi
  done
done

# One block runtime per program, with two on the link line.
swift_lib=$toolchain/lib/swift/linux
if [ -z "$toolchain" ] || [ ! -f "$swift_lib/libBlocksRuntime.so" ] || ! command -v clang >/dev/null; then
  skip "one block runtime beside the toolchain's (no Swift toolchain or clang)"
elif ! nm -D --defined-only "$prefix/lib/libcrunloop.so" 2>/dev/null | grep -w RLRunLoopPerformBlock >/dev/null; then
  # A library built by gcc has no block APIs (gcc has no blocks): the
  # clang build's run of this script is the one that checks this.
  skip "one block runtime beside the toolchain's (this library was built without blocks, by $(basename "${CC:-cc}"))"
else
  out=$prefix/app-mixed; log=$out.log
  # shellcheck disable=SC2046
  if clang -fblocks -Wall -Werror Tests/install/blocks_app.c $(pkg-config --cflags --libs crunloop) \
       -L"$swift_lib" -Wl,-rpath,"$swift_lib" -Wl,--no-as-needed -l:libBlocksRuntime.so -o "$out" >"$log" 2>&1 &&
     LD_DEBUG=bindings LD_DEBUG_OUTPUT=$prefix/bind "$out" >>"$log" 2>&1; then
    # Which libraries do the block runtime's symbols bind to?
    targets=$(cat "$prefix"/bind.* | grep -E "normal symbol \`(_Block_copy|_Block_release|_Block_object_assign|_Block_object_dispose|_NSConcrete[A-Za-z]*Block)'" |
              sed -E 's/.* to ([^ ]+) \[.*/\1/' | sort -u)
    loaded=$(ldd "$out" | grep -c BlocksRuntime)
    if [ "$(wc -l <<<"$targets")" -eq 1 ] && [ -n "$targets" ] && [ "$loaded" -eq 2 ]; then
      pass "two block runtimes loaded, every block symbol bound to one: $targets"
    else
      echo "runtimes loaded: $loaded; bound to: $targets" >>"$log"; fail "block runtime symbols bound to more than one library" "$log"
    fi
  else
    fail "block program with the toolchain's runtime beside ours" "$log"
  fi
fi
# The echo pair, installed as commands.
server=$prefix/bin/crunloop-echo-server client=$prefix/bin/crunloop-echo-client
log=$prefix/echo.log
if [ ! -x "$server" ] || [ ! -x "$client" ]; then
  fail "crunloop-echo-server and crunloop-echo-client are not installed in $prefix/bin"
else
  "$server" >"$log" 2>&1 &
  pid=$!
  port=""
  for _ in $(seq 1 200); do
    port=$(sed -n '1s/^listening on \([0-9][0-9]*\)$/\1/p' "$log")
    [ -n "$port" ] || ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.05
  done
  if [ -z "$port" ]; then
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    fail "crunloop-echo-server did not print \"listening on PORT\"" "$log"
  else
    seq 1 50000 >"$prefix/echo.in"
    timeout 60 "$client" localhost "$port" <"$prefix/echo.in" >"$prefix/echo.out" 2>>"$log"
    crc=$?
    kill -TERM "$pid"
    src=0; wait "$pid" || src=$?
    if [ $crc -ne 0 ]; then fail "crunloop-echo-client exit status $crc" "$log"
    elif ! cmp -s "$prefix/echo.in" "$prefix/echo.out"; then fail "crunloop-echo-client: the echo differs from the input" "$log"
    elif [ $src -ne 0 ] || ! grep -q '^stopping on SIGTERM: 1 connections served' "$log"; then
      fail "crunloop-echo-server did not stop cleanly on SIGTERM (status $src)" "$log"
    else pass "crunloop-echo-server on port $port echoed $(wc -c <"$prefix/echo.in") bytes from crunloop-echo-client, stopped by SIGTERM"; fi
  fi
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
