#!/bin/bash
# bench-alternate.sh ROUNDS NAME=BINARY... — runs each bench binary in turn,
# ROUNDS times (A B A B ...: every build sees the same neighbours on a shared
# machine), with the caller's environment (BRL_ONLY=perform, ...), and prints
# per row the median of each build and its ratio to the first build.
# Used by `make bench-plain` (fast vs plain build) and to compare a branch
# with main (build main in a second folder, pass both binaries).
set -eu
rounds=$1
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; r++)); do
    for spec in "$@"; do
        name=${spec%%=*}
        "${spec#*=}" 2>/dev/null | awk -F'|' -v n="$name" \
            '$2 ~ /^ *[0-9.]+ *$/ { gsub(/ +$/, "", $1); gsub(/ /, "", $2); print $1 "\t" n "\t" $2 }' >>"$out"
    done
done
names=$(for spec in "$@"; do printf '%s ' "${spec%%=*}"; done)
awk -F'\t' -v names="$names" '
function median(s,    a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ if (!($1 in seen)) { seen[$1] = 1; rows[++nrows] = $1 } v[$1, $2] = v[$1, $2] " " $3 }
END {
    nn = split(names, nm, " ")
    printf "%-44s", "row (median of '"$rounds"' alternating runs)"
    for (k = 1; k <= nn; k++) printf " | %10s", nm[k]
    for (k = 2; k <= nn; k++) printf " | %6s/%s", nm[k], nm[1]
    printf "\n"
    for (i = 1; i <= nrows; i++) {
        printf "%-44s", rows[i]
        for (k = 1; k <= nn; k++) { m[k] = median(v[rows[i], nm[k]]); printf " | %10.3g", m[k] }
        for (k = 2; k <= nn; k++) printf " | %8.2fx", (m[1] > 0 ? m[k] / m[1] : 0)
        printf "\n"
    }
}' "$out"
