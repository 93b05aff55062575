#!/usr/bin/env bash
# server_larson --ops N: every thread stops after N operations (not after a
# time), with glibc and with strata preloaded, on 1 and 4 threads (4 on the
# CI's 2 cores: oversubscribed). Each run must end on its own and report a
# rate over 0.01 M mallocs/s (20,000 operations in under 2 s per thread; a
# run timed from before its threads started to after they finished cannot
# be slower); a thread that never stops, or a main thread that waits for the
# clock instead of the workers, fails through the test's timeout.
set -euo pipefail
server=$1
strata=$2
for threads in 1 4; do
  for preload in "" "$strata"; do
    out=$(env ${preload:+LD_PRELOAD=$preload} "$server" --threads "$threads" --ops 20000 --seconds 600000)
    rate=$(printf '%s\n' "$out" | sed -n 's/.*"metric":"mallocs_per_sec","value":\([0-9.e+-]*\).*/\1/p')
    if [ -z "$rate" ] || ! awk -v r="$rate" 'BEGIN { exit !(r > 0.01) }'; then
      echo "server_larson --threads $threads --ops 20000 (${preload:-glibc}): no rate over 0.01 M/s in: $out" >&2
      exit 1
    fi
    echo "threads $threads, ${preload:-glibc}: $rate M mallocs/s"
  done
done
