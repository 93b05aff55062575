#!/usr/bin/env bash
# Builds strata and runs every test: the release build (unit, API,
# override, stress, real programs, fuzz, benchmark smoke), then the pools and
# the engine under AddressSanitizer+UndefinedBehaviorSanitizer and under
# ThreadSanitizer. Usage: scripts/test.sh [--quick]   (--quick: release only)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${STRATA_JOBS:-$(nproc)}"
quick=0
[ "${1:-}" = "--quick" ] && quick=1

total_run=0
run_build() {  # name, extra cmake args...
  local name="$1"; shift
  local dir="$repo/build-$name"
  echo "=== $name: configure and build ($dir)"
  cmake -S "$repo" -B "$dir" -G Ninja -DSTRATA_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  echo "=== $name: test"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 600) | tee "$dir/ctest.log"
  local n
  n=$(grep -o 'tests failed out of [0-9]*' "$dir/ctest.log" | grep -o '[0-9]*$' || echo 0)
  total_run=$((total_run + n))
}

run_build release -DCMAKE_BUILD_TYPE=Release
if [ "$quick" -eq 0 ]; then
  run_build asan -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DSTRATA_SANITIZE=address,undefined"
  run_build tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE=thread
fi
echo "=== all test builds passed"
echo "strata: $total_run passed, 0 failed"
