#!/usr/bin/env bash
# Installs what building, testing and benchmarking strata needs on a fresh
# Debian 12 machine (run as root, or with sudo available). Idempotent: a
# package already present is not fetched again.
set -euo pipefail

packages=(
  # build
  cmake ninja-build g++ clang libclang-rt-14-dev pkg-config
  # tests
  libgtest-dev valgrind python3 libpython3.11-testsuite sqlite3 xz-utils zstd
  # heap profiles read by both pprof tools (tests/profile/pprof_tools.sh),
  # call graphs drawn by graphviz (docs/profiling.md)
  google-perftools golang-go graphviz
  # benchmark peers and charts
  libtcmalloc-minimal4 libjemalloc2 libmimalloc2.0 python3-matplotlib
  # peak RSS as `/usr/bin/time -f %M` reports it (the start-up floor table)
  time
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
