#!/usr/bin/env bash
# The DocC documentation of SwiftThreads (Sources/SwiftThreads/SwiftThreads.docc
# and the doc comments) builds with no warning: a broken symbol link, an
# ambiguous overload, an undocumented parameter fails the check.
#   swift package generate-documentation --target SwiftThreads --warnings-as-errors
# through swift-docc-plugin (a dependency of the package used only for this).
# The archive goes to .build/plugins/Swift-DocC/outputs/SwiftThreads.doccarchive.
# Prints "[docs] PASS|FAIL ..." and "N passed, N failed, 0 skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
logdir=.build/logs
mkdir -p "$logdir"
log=$logdir/docs.log
printf '  %-8s %s\n' DOCC "building the SwiftThreads documentation (swift package generate-documentation; V=1 shows its output) ..."
cmd=(env -u CC -u CFLAGS -u CPPFLAGS -u LDFLAGS -u MAKEFLAGS -u MFLAGS "$SWIFT" package generate-documentation
     --target SwiftThreads --warnings-as-errors)
if [ "${V:-0}" = 1 ]; then "${cmd[@]}" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
else "${cmd[@]}" >"$log" 2>&1; rc=$?; fi
warnings=$(grep -cE '^(warning|error): ' "$log")
articles=$(ls Sources/SwiftThreads/SwiftThreads.docc/*.md | wc -l)
if [ "$rc" -eq 0 ] && [ "$warnings" -eq 0 ]; then
  echo "[docs] PASS SwiftThreads documentation: $articles articles and the doc comments, no warnings"
  echo "1 passed, 0 failed, 0 skipped"
  exit 0
fi
echo "[docs] FAIL SwiftThreads documentation: $warnings warning(s)/error(s) (exit status $rc; full log: $log):"
# Each diagnostic with the source lines DocC shows under it.
grep -E -A8 '^(warning|error): ' "$log" | head -120 | sed 's/^/     | /'
echo "0 passed, 1 failed, 0 skipped"
exit 1
