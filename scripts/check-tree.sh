#!/usr/bin/env bash
# Checks on the tree itself, for whoever reads it next:
#   - `make help` has a line for every target a person can run (every
#     .PHONY target of the Makefile and mk/*.mk, but FORCE);
#   - no comment or document points at a tracker's issue number ("issue 3",
#     "issue #4"): the text says what the code does instead;
#   - no file holds a merge's conflict markers (a hand merge left half done).
# One "[tree] PASS|FAIL" line per check, then "N passed, N failed, 0 skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0; failed=0
help=$(make -s help 2>/dev/null | awk 'NF && $1 !~ /^make$/ {print $1}' | sort -u)
# .PHONY lines and their continuation lines.
phony=$(awk '/^\.PHONY:/ { on = 1; sub(/^\.PHONY:/, "") } on { c = sub(/\\$/, ""); print; on = c }' Makefile mk/*.mk |
        tr ' \t' '\n\n' | grep -v '^$' | grep -vx FORCE | sort -u)
missing=$(comm -23 <(printf '%s\n' "$phony") <(printf '%s\n' "$help"))
if [ -z "$missing" ]; then
  echo "[tree] PASS make help lists every target ($(wc -l <<<"$phony") targets)"; passed=$((passed+1))
else
  echo "[tree] FAIL make help misses: $(echo $missing)"; failed=$((failed+1))
fi
# Files in git and new ones not ignored (not SwiftPM's checkouts of others' code).
refs=$(git grep --untracked -nIiE '\bissues? ?#?[0-9]+\b|\bissue'"'"'s\b' -- Sources include Tests bench scripts mk examples docs \
         Makefile Package.swift README.md 2>/dev/null | grep -v '^scripts/check-tree.sh:' || true)
if [ -z "$refs" ]; then
  echo "[tree] PASS no comment refers to an issue number"; passed=$((passed+1))
else
  echo "[tree] FAIL comments refer to issue numbers (say what the code does instead):"
  sed 's/^/     | /' <<<"$refs"; failed=$((failed+1))
fi
marks=$(git grep --untracked -nIE '^(<<<<<<< |>>>>>>> [^ ]|=======$)' -- . ':!*.json' 2>/dev/null |
        grep -v '^scripts/check-tree.sh:' || true)
if [ -z "$marks" ]; then
  echo "[tree] PASS no merge-conflict markers"; passed=$((passed+1))
else
  echo "[tree] FAIL merge-conflict markers left in:"
  sed 's/^/     | /' <<<"$marks"; failed=$((failed+1))
fi
echo "$passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
