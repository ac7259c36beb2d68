#!/usr/bin/env bash
# The library's exported symbols must be exactly the documented API:
#   1. what `nm -D` finds in libcrunloop.so,
#   2. what the public headers declare with RL_EXPORT, and
#   3. the list kept in scripts/exported-symbols.txt
# must be the same set. A new export is then a deliberate change: add the
# declaration and the line in the list together. UPDATE=1 rewrites the list
# from the library (check the diff before committing it).
set -euo pipefail
cd "$(dirname "$0")/.."
lib=${1:-build/clang/libcrunloop.so}
list=scripts/exported-symbols.txt
[ -f "$lib" ] || { echo "check-exports: $lib not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The linker's own markers are not ours, nor are symbols of local binding
# (nm's lower-case types): TLS descriptors put a local, hidden
# _TLS_MODULE_BASE_ in the dynamic symbol table, which no one can bind to.
nm -D --defined-only "$lib" | awk '$2 ~ /^[A-Z]$/ {print $3}' | grep -vxE '__bss_start|_edata|_end' | sort -u > "$tmp/lib"
# Each RL_EXPORT declaration names one function (the identifier before its
# first parenthesis) or one object (the identifier before its semicolon).
perl -0777 -ne '
    s{/\*.*?\*/}{}gs;
    s{^\s*#\s*define\b.*$}{}mg;
    while (/RL_EXPORT\b([^;{]*?)(?:\(|;)/gs) {
        my $decl = $1;
        $decl =~ s/\s+$//;
        print "$1\n" if $decl =~ /(\w+)$/;
    }' include/crunloop/*.h | sort -u > "$tmp/hdr"

if [ "${UPDATE:-0}" = 1 ]; then
    cp "$tmp/lib" "$list"
    echo "check-exports: wrote $(wc -l < "$list") symbols to $list"
fi

fail=0
report() { # what, file only in a, name a, name b
    local d
    d=$(comm -23 "$2" "$3")
    if [ -n "$d" ]; then
        echo "check-exports: $1:"
        printf '    %s\n' $d
        fail=1
    fi
}
report "exported by the library but not declared RL_EXPORT in include/" "$tmp/lib" "$tmp/hdr"
report "declared RL_EXPORT but not exported by the library" "$tmp/hdr" "$tmp/lib"
report "exported but missing from $list (a new export: add it there)" "$tmp/lib" "$list"
report "listed in $list but no longer exported (a removed export: drop it there)" "$list" "$tmp/lib"
if [ $fail = 0 ]; then
    echo "check-exports: $(wc -l < "$tmp/lib") exported symbols = the documented API = $list"
fi
exit $fail
