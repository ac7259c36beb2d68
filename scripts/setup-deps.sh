#!/usr/bin/env bash
# Installs the Debian packages the build, tests and benchmarks need, if any is
# missing. `make check` runs this first; a plain `swift build` needs libbsd-dev
# and liburing-dev (the io_uring kernel backend);
# iproute2 (`ip netns`) lets the socket-port test make two hosts when run as root;
# dbus-daemon and libdbus-1-dev give bench-ports its D-Bus row;
# libexpat1-dev is the XML parser of examples/c/threaded_parser.c; libxml2 is
# the one under Foundation's XMLParser (FoundationXML), which the Swift twin
# swiftthreads-threaded-parser uses (Swift's own Linux prerequisites have it);
# gdb prints a hung swift test's threads before it is stopped
# (scripts/swift-test-timed.sh).
set -euo pipefail
pkgs=(libbsd-dev liburing-dev libcmocka-dev pkg-config valgrind libuv1-dev libglib2.0-dev libblocksruntime-dev
      python3-matplotlib iproute2 libexpat1-dev libxml2 dbus-daemon libdbus-1-dev systemtap-sdt-dev strace gdb)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "setup-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}"
