#!/usr/bin/env bash
# `make install` into a temporary prefix, then build a program with
# `pkg-config --cflags --libs crunloop` using gcc and clang, and run it.
set -euo pipefail
BUILD=${BUILD:-build/clang}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
make --no-print-directory -s BUILD="$BUILD" install PREFIX="$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
passed=0; failed=0
for cc in gcc clang; do
  command -v "$cc" >/dev/null || continue
  out="$prefix/app-$cc"
  # shellcheck disable=SC2046
  if "$cc" Tests/install/pkgconfig_app.c $(pkg-config --cflags --libs crunloop) -o "$out" && "$out"; then
    echo "install+pkg-config with $cc: ok"; passed=$((passed+1))
  else
    echo "install+pkg-config with $cc: FAILED"; failed=$((failed+1))
  fi
done
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
