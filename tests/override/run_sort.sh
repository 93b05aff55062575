#!/usr/bin/env bash
# sort on a large generated file (a few hundred thousand lines, ~30 MB), with
# a small buffer and two threads so that it merges temporary runs.
source "$(dirname "$0")/preload_common.sh"
LINE_COUNT="${1:-400000}"
require_command sort coreutils
require_command awk mawk

awk -v n="$LINE_COUNT" 'BEGIN {
  x = 12345
  for (i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648
    printf "%d\t%s-%d\t%x\n", x % 1000003, substr("abcdefghijklmnopqrstuvwxyz", x % 26 + 1, x % 13 + 1), i, x
  }
}' >"$WORK/input.txt"

for order in "-k1,1n -k2" "-k2 -r" "-k3"; do
  # shellcheck disable=SC2086
  sort $order -S 4M --parallel=2 -T "$WORK" "$WORK/input.txt" >"$WORK/plain.txt"
  # shellcheck disable=SC2086
  run_preloaded_with_proof sort $order -S 4M --parallel=2 -T "$WORK" "$WORK/input.txt" >"$WORK/strata.txt"
  check_preload_proof "sort $order"
  same_output "sort $order of $LINE_COUNT lines" "$WORK/plain.txt" "$WORK/strata.txt"
done
echo "PASS"
