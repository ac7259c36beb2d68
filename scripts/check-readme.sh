#!/usr/bin/env bash
# Every ```c and ```swift block of README.md, compiled and run as a reader
# would: C with clang and gcc (-Wall -Werror) against the library in $BUILD,
# Swift with swiftc in Swift 6 mode (-warnings-as-errors) against the
# SwiftThreads and SwiftThreadsFoundation modules of the last
# `swift build` (.build/debug). A block must
# build and exit 0. Prints one "[readme] PASS/FAIL/SKIP" line per block and
# compiler and ends with "N passed, N failed, N skipped".
#
#   BUILD       the Makefile's build folder (libcrunloop.a), default build/clang
#   LIBS        what a program linking libcrunloop.a needs (the Makefile's LIBS)
#   SWIFTPM_BUILD  SwiftPM's debug folder, default .build/debug
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/clang}
LIBS=${LIBS:--lbsd -luring -lpthread -lm}
SWIFTPM_BUILD=${SWIFTPM_BUILD:-.build/debug}
TIMEOUT=${README_TIMEOUT:-60}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Split the blocks into $tmp/NN.c / NN.swift, keeping their README line.
awk -v dir="$tmp" '
  /^```(c|swift)[ \t]*$/ { lang = substr($0, 4); gsub(/[ \t]/, "", lang); n++
                           file = sprintf("%s/%02d.%s", dir, n, lang); line[n] = NR
                           printf "%s %d\n", file, NR >> (dir "/index"); next }
  /^```/ { file = ""; next }
  file != "" { print > file }
' README.md
[ -f "$tmp/index" ] || { echo "[readme] no C or Swift block found"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

passed=0; failed=0; skipped=0
report() { # status label log
  case $1 in
    PASS) passed=$((passed + 1)); echo "[readme] PASS $2" ;;
    SKIP) skipped=$((skipped + 1)); echo "[readme] SKIP $2" ;;
    *) failed=$((failed + 1)); echo "[readme] FAIL $2"; sed 's/^/     | /' "$3" | head -40 ;;
  esac
}
run() { # label log binary
  if timeout "$TIMEOUT" "$3" >>"$2" 2>&1 </dev/null; then report PASS "$1" "$2"
  else echo "(exit status $?)" >>"$2"; report FAIL "$1" "$2"; fi
}

# The SwiftThreads objects and module of the SwiftPM debug build.
swift_objs=()
# The objects SwiftPM linked into the test bundle (its link list; a folder
# may still hold objects of sources since removed), the libraries' only.
link_list=$SWIFTPM_BUILD/CRunLoopPackageTests.product/Objects.LinkFileList
if [ -f "$link_list" ]; then
  while IFS= read -r o; do swift_objs+=("$o"); done < <(tr -d "'\"" < "$link_list" |
    grep -E '/(CRunLoop|CSwiftThreadsShims|SwiftThreads|SwiftThreadsFoundation)\.build/')
fi

while read -r src line; do
  base=${src%.*}; lang=${src##*.}
  if [ "$lang" = c ]; then
    for cc in clang gcc; do
      label="README.md:$line (C, $cc)"; log=$base.$cc.log; : >"$log"
      if ! command -v "$cc" >/dev/null; then report SKIP "$label ($cc not found)" "$log"; continue; fi
      extra=(); [ "$cc" = clang ] && extra=(-fblocks)
      # shellcheck disable=SC2086
      if "$cc" -Wall -Werror "${extra[@]}" -Iinclude -o "$base.$cc" "$src" "$BUILD/libcrunloop.a" $LIBS >>"$log" 2>&1; then
        run "$label" "$log" "$base.$cc"
      else report FAIL "$label" "$log"; fi
    done
  else
    label="README.md:$line (Swift)"; log=$base.log; : >"$log"
    if [ ${#swift_objs[@]} -eq 0 ] || ! command -v swiftc >/dev/null; then
      report SKIP "$label (no SwiftPM build in $SWIFTPM_BUILD; run swift build)" "$log"; continue
    fi
    mkdir -p "$base.d" && cp "$src" "$base.d/main.swift"
    if swiftc -swift-version 6 -warnings-as-errors -I "$SWIFTPM_BUILD/Modules" \
         -Xcc -fmodule-map-file=include/module.modulemap -Xcc -Iinclude \
         -Xcc -fmodule-map-file=Sources/CSwiftThreadsShims/include/module.modulemap \
         -module-cache-path "$tmp/mcache" -o "$base.swiftbin" "$base.d/main.swift" "${swift_objs[@]}" \
         -lbsd -luring -lBlocksRuntime >>"$log" 2>&1; then
      run "$label" "$log" "$base.swiftbin"
    else report FAIL "$label" "$log"; fi
  fi
done < "$tmp/index"

echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
