#!/usr/bin/env bash
# Compiles every public header on its own, and the umbrella plus cf_compat.h,
# as C11 and C17 with -pedantic (gcc and clang, clang also with -fblocks) and
# as C++17 inside and outside extern "C" (g++ and clang++), all with
# -Wall -Wextra -Werror. Prints one "[headers] PASS/FAIL" line per compiler
# setting and ends with "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One translation unit per header (each must be self-contained), then one
# with everything, which also uses an enum constant and a function.
for h in include/crunloop/*.h; do
  printf '#include <crunloop/%s>\n' "$(basename "$h")"
done > "$tmp/each.h"
{
  echo '#include <crunloop/crunloop.h>'
  echo '#include <crunloop/cf_compat.h>'
  echo 'int rl_headers_check(void);'
  echo 'int rl_headers_check(void) {'
  echo '    RLRunLoopRunResult r = kRLRunLoopRunFinished;'
  echo '    return (int)r + (RLRunLoopGetCurrent() != NULL);'
  echo '}'
} > "$tmp/all.h"
n=0
for h in include/crunloop/*.h; do
  n=$((n + 1))
  printf '#include <crunloop/%s>\n#include <crunloop/%s>\n' "$(basename "$h")" "$(basename "$h")" > "$tmp/one_$n.c"
done
cp "$tmp/all.h" "$tmp/all.c"
# C++: the headers' own extern "C", and a user's extern "C" around them.
cp "$tmp/all.h" "$tmp/all.cpp"
{ echo 'extern "C" {'; cat "$tmp/all.h"; echo '}'; } > "$tmp/wrapped.cpp"

warn=(-Wall -Wextra -Werror -Iinclude)
passed=0; failed=0; skipped=0
check() { # label compiler flags... -- files...
  local label=$1 cc=$2; shift 2
  local flags=() files=()
  while [ "$1" != -- ]; do flags+=("$1"); shift; done; shift
  files=("$@")
  if ! command -v "$cc" >/dev/null; then
    echo "[headers] SKIP $label ($cc not found)"; skipped=$((skipped + 1)); return
  fi
  local log=$tmp/log ok=1 f
  : > "$log"
  for f in "${files[@]}"; do
    "$cc" "${warn[@]}" "${flags[@]}" -fsyntax-only "$f" >>"$log" 2>&1 || ok=0
  done
  if [ $ok = 1 ]; then
    echo "[headers] PASS $label"; passed=$((passed + 1))
  else
    echo "[headers] FAIL $label"; sed 's/^/     | /' "$log" | head -40; failed=$((failed + 1))
  fi
}
c_files=("$tmp"/one_*.c "$tmp/all.c")
for cc in clang gcc; do
  for std in c11 c17; do
    check "$cc -std=$std -pedantic" "$cc" -std=$std -pedantic -- "${c_files[@]}"
  done
done
check "clang -std=c2x -pedantic" clang -std=c2x -pedantic -- "${c_files[@]}"
check "clang -std=c11 -pedantic -fblocks" clang -std=c11 -pedantic -fblocks -- "${c_files[@]}"
for cxx in g++ clang++; do
  check "$cxx -std=c++17 -pedantic" "$cxx" -std=c++17 -pedantic -x c++ -- "$tmp/all.cpp" "$tmp/wrapped.cpp"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
