#!/usr/bin/env bash
# check-probes.sh LIB — the loop's USDT probes (Sources/CRunLoop/loop/rl_probes.h)
# are all in LIB's ELF notes, under provider "crunloop", with a semaphore
# for each. (Built with <sys/sdt.h> from Debian's systemtap-sdt-dev, which
# scripts/setup-deps.sh installs.)
set -euo pipefail
lib=${1:?usage: check-probes.sh LIB}
want=(pass_start pass_end sleep_start sleep_end callout_start callout_end wakeup timer_fire)
notes=$(readelf -n "$lib")
fail=0
for p in "${want[@]}"; do
  block=$(printf '%s\n' "$notes" | awk -v p="$p" '$1=="Provider:"{prov=$2} $1=="Name:"{name=$2} $1=="Location:" && prov=="crunloop" && name==p {print; found=1} END{exit !found}') || {
    echo "[probes] FAIL crunloop:$p is not in $lib's .note.stapsdt"; fail=1; continue; }
  if ! printf '%s\n' "$block" | grep -q 'Semaphore: 0x0*[1-9a-f]'; then
    echo "[probes] FAIL crunloop:$p has no semaphore"; fail=1
  fi
done
extra=$(printf '%s\n' "$notes" | awk '$1=="Provider:"{prov=$2} $1=="Name:" && prov=="crunloop"{print $2}' | sort -u | grep -vxF -f <(printf '%s\n' "${want[@]}") || true)
if [ -n "$extra" ]; then
  echo "[probes] FAIL probes not listed here (add them to this script and docs/runloop.md): $extra"; fail=1
fi
[ $fail -eq 0 ] && echo "[probes] PASS ${#want[@]} USDT probes (crunloop:*) with semaphores in $lib"
if [ $fail -eq 0 ]; then echo "1 passed, 0 failed, 0 skipped"; else echo "0 passed, 1 failed, 0 skipped"; fi
exit $fail
