#!/usr/bin/env bash
# The CF surface: every function and exported constant that the Swift
# toolchain's CFRunLoop.h, CFSocket.h, CFStream.h and CFMessagePort.h
# declare on Linux must be mapped by include/crunloop/cf_compat.h, and what
# it maps to must be exported by the library, unless
# scripts/cf-surface-exclusions.txt lists the name with a reason.
#
#   1. The four headers are preprocessed (clang -fblocks -E, as Swift's
#      importer sees them); the declarations in their own lines give the
#      names: `extern T CFName(...)` and `extern const T kCFName`.
#   2. A probe that includes cf_compat.h (clang -fblocks) shows what each
#      name becomes: an object-like macro's expansion, a function-like
#      macro, or a declaration (a static inline in cf_compat.h). A name
#      none of these declares is not mapped.
#   3. Each RL name a CF name expands to (or that a function-like macro
#      calls) must be exported by the library (nm -D), so that a program
#      using the mapping links; a macro may also call a static inline of
#      the public headers.
# An excluded name that is mapped after all, or no longer declared, fails
# too (a stale exclusion). Lines are prefixed "[cf-surface]"; the last
# line counts names: passed (mapped and exported), failed, skipped
# (excluded).
#
# Usage: scripts/check-cf-surface.sh LIBCRUNLOOP.so
set -uo pipefail
cd "$(dirname "$0")/.."
lib=${1:-build/clang-exports/libcrunloop.so}
excl=scripts/cf-surface-exclusions.txt
me='[cf-surface]'
CLANG=${CLANG:-clang}
say() { printf '%s %s\n' "$me" "$*"; }
die() { say "$*"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

[ -f "$lib" ] || die "$lib not built"
swift_bin=$(command -v swift) || die "no swift in PATH: the toolchain's CoreFoundation headers are the reference"
cfroot=$(dirname "$(dirname "$swift_bin")")/lib/swift
[ -f "$cfroot/CoreFoundation/CFRunLoop.h" ] || die "no CoreFoundation headers under $cfroot/CoreFoundation"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- 1. the CF names ----
headers="CFRunLoop CFSocket CFStream CFMessagePort"
for h in $headers; do echo "#include <CoreFoundation/$h.h>"; done > "$tmp/cf.c"
"$CLANG" -fblocks -E -I"$cfroot" "$tmp/cf.c" -o "$tmp/cf.i" 2> "$tmp/cf.err" ||
    die "cannot preprocess the CF headers: $(head -3 "$tmp/cf.err")"
# Only the lines that come from the four headers themselves (by the line
# markers), with brace bodies (structs, enums) removed, split at ';'.
awk -v want="$(echo $headers | tr ' ' '|')" '
    /^# [0-9]+ "/ { f = $3; gsub(/"/, "", f); n = split(f, p, "/"); base = p[n]; sub(/\.h$/, "", base);
                    keep = (("|" want "|") ~ ("\\|" base "\\|")); next }
    keep' "$tmp/cf.i" |
    perl -0777 -ne '
        1 while s/\{[^{}]*\}//gs;
        for my $d (split /;/) {
            $d =~ s/\s+/ /g;
            next if $d =~ /^\s*typedef\b/;
            if ($d =~ /^\s*extern\b[^(]*?\b(CF\w+)\s*\(/) { print "$1\n"; next }
            if ($d =~ /^\s*extern\s+const\b[^(]*?\b(kCF\w+)\s*$/) { print "$1\n" }
        }' | sort -u > "$tmp/names"
total=$(wc -l < "$tmp/names")
[ "$total" -gt 100 ] || die "only $total names found in the CF headers: the extraction is broken"

# ---- exclusions: NAME reason ----
bad_excl=$(awk '!/^[[:space:]]*(#|$)/ && NF < 2 { print $1 }' "$excl")
awk '!/^[[:space:]]*(#|$)/ { print $1 }' "$excl" | sort -u > "$tmp/excluded"

# ---- 2. what cf_compat.h makes of each name ----
{
    echo '#include <crunloop/cf_compat.h>'
    while read -r n; do
        printf 'cfprobe_%s %s\n#ifdef %s\ncfprobe_macro_%s\n#endif\n' "$n" "$n" "$n" "$n"
    done < "$tmp/names"
} > "$tmp/probe.c"
"$CLANG" -fblocks -E -P -Iinclude "$tmp/probe.c" -o "$tmp/probe.i" 2> "$tmp/probe.err" ||
    die "cannot preprocess cf_compat.h: $(head -3 "$tmp/probe.err")"
# name -> expansion (one line each; an expansion may span tokens)
perl -ne 'print "$1\t$2\n" if /^cfprobe_(\w+) (.*?)\s*$/' "$tmp/probe.i" > "$tmp/expansions"
perl -ne 'print "$1\n" if /^cfprobe_macro_(\w+)\s*$/' "$tmp/probe.i" | sort -u > "$tmp/macros"
# Names left as they are and not macros must be declared by cf_compat.h:
# compile a use of each and read which ones clang does not know.
awk -F'\t' '$1 == $2 { print $1 }' "$tmp/expansions" | sort | comm -23 - "$tmp/macros" > "$tmp/plain"
{
    echo '#include <crunloop/cf_compat.h>'
    echo 'void cfprobe(void);'
    echo 'void cfprobe(void) {'
    sed 's/.*/    (void)\&&;/' "$tmp/plain"
    echo '}'
} > "$tmp/use.c"
"$CLANG" -fblocks -fsyntax-only -ferror-limit=0 -Iinclude "$tmp/use.c" 2> "$tmp/use.err"
perl -ne "print \"\$1\\n\" if /undeclared (?:identifier|function) '(\\w+)'/" "$tmp/use.err" | sort -u > "$tmp/unmapped"

# ---- 3. exported RL names ----
nm -D --defined-only "$lib" | awk '$2 ~ /^[A-Z]$/ { print $3 }' | sort -u > "$tmp/exports"
# A function-like macro's RL names (CFRunLoopPerformBlock's) must be
# exported too, or be static inline functions of the public headers.
"$CLANG" -fblocks -dM -E -Iinclude -x c - <<<'#include <crunloop/cf_compat.h>' > "$tmp/defines" 2>/dev/null
perl -ne 'print "$1\t$2\n" if /^#define (\w+)\([^)]*\) (.*)$/' "$tmp/defines" > "$tmp/fnmacros"
cat include/crunloop/*.h | perl -0777 -ne 'print "$1\n" while /static\s+inline\b[^;{]*?\b(RL\w+)\s*\(/g' |
    sort -u > "$tmp/inlines"

passed=0; failed=0; skipped=0
while read -r n; do
    exp=$(awk -F'\t' -v n="$n" '$1 == n { print $2; exit }' "$tmp/expansions")
    is_excluded=0; grep -qxF "$n" "$tmp/excluded" && is_excluded=1
    mapped=1; grep -qxF "$n" "$tmp/unmapped" && mapped=0
    if [ $is_excluded = 1 ]; then
        if [ $mapped = 1 ]; then
            say "FAIL $n is mapped (to ${exp:-a macro}) but listed in $excl: drop its line"
            failed=$((failed + 1))
        else
            skipped=$((skipped + 1))
        fi
        continue
    fi
    if [ $mapped = 0 ]; then
        say "FAIL $n: not mapped by include/crunloop/cf_compat.h (map it, or list it in $excl with the reason)"
        failed=$((failed + 1))
        continue
    fi
    # Every RL identifier of the expansion must be exported; those in a
    # function-like macro's body may also be static inlines of the headers.
    missing=""
    if grep -qxF "$n" "$tmp/macros" && [ "$exp" = "$n" ]; then
        body=$(awk -F'\t' -v n="$n" '$1 == n { print $2; exit }' "$tmp/fnmacros")
        for id in $(grep -oE '\bk?RL[A-Za-z0-9_]+\b' <<<"$body" | sort -u); do
            grep -qxF "$id" "$tmp/exports" || grep -qxF "$id" "$tmp/inlines" || missing="$missing $id"
        done
    fi
    for id in $(grep -oE '\bk?RL[A-Za-z0-9_]+\b' <<<"$exp"); do
        grep -qxF "$id" "$tmp/exports" || missing="$missing $id"
    done
    if [ -n "$missing" ]; then
        say "FAIL $n maps to$missing, which $lib does not export"
        failed=$((failed + 1))
        continue
    fi
    passed=$((passed + 1))
done < "$tmp/names"

# Stale or malformed exclusions.
for n in $bad_excl; do
    say "FAIL $excl: $n has no reason"
    failed=$((failed + 1))
done
for n in $(comm -13 "$tmp/names" "$tmp/excluded"); do
    say "FAIL $excl lists $n, which the CF headers do not declare: drop its line"
    failed=$((failed + 1))
done
pending=$(grep -c 'pending: provided by' "$excl" || true)

[ "$failed" -eq 0 ] && verdict=PASS || verdict=FAIL
say "$verdict $total names in the toolchain's $(echo $headers | sed 's/ /.h, /g').h: $passed mapped and exported," \
    "$skipped excluded ($pending of them pending another branch; see $excl)"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
