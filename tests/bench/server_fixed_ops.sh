#!/usr/bin/env bash
# server_larson --ops N: every thread stops after N operations (not after a
# time), with glibc and with strata preloaded, on 1 and 4 threads (4 on the
# CI's 2 cores: oversubscribed). Each run must end on its own and report a
# positive rate; a thread that never stops, or a main thread that waits for
# the clock instead of the workers, fails through the test's timeout.
set -euo pipefail
server=$1
strata=$2
for threads in 1 4; do
  for preload in "" "$strata"; do
    out=$(env ${preload:+LD_PRELOAD=$preload} "$server" --threads "$threads" --ops 20000 --seconds 600000)
    rate=$(printf '%s\n' "$out" | sed -n 's/.*"metric":"mallocs_per_sec","value":\([0-9.e+-]*\).*/\1/p')
    if [ -z "$rate" ] || ! awk -v r="$rate" 'BEGIN { exit !(r > 0) }'; then
      echo "server_larson --threads $threads --ops 20000 (${preload:-glibc}): no positive rate in: $out" >&2
      exit 1
    fi
    echo "threads $threads, ${preload:-glibc}: $rate M mallocs/s"
  done
done
