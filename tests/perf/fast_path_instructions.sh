#!/usr/bin/env bash
# Guard for the fast-path code-generation work (owner tags, offset tables,
# the page map's layout): counts instructions per malloc(32)+free pair with
# callgrind inside strata's malloc and free (LD_PRELOADed as users run it;
# the caller's PLT jump, one per call, comes on top), failing above the budget.
# Instruction counts do not depend on machine load.
# Usage: fast_path_instructions.sh <pair_loop> <libstrata.so> <budget>
set -euo pipefail
program="$1"; library="$2"; budget="$3"
command -v valgrind >/dev/null || { echo "valgrind is missing (apt-get install valgrind)"; exit 1; }

count() {  # iterations pattern -> instructions executed inside malloc and free
  local out; out=$(mktemp)
  LD_PRELOAD="$library" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    --toggle-collect=malloc --toggle-collect=free "$program" "$1" "$2" 2>"$out" || true
  grep -o 'refs: *[0-9,]*' "$out" | tr -d ', ' | cut -d: -f2
  rm -f "$out"
}

per_pair() {  # pattern pairs_per_iteration; two run lengths cancel start-up work
  local a b
  a=$(count 2000 "$1"); b=$(count 4000 "$1")
  echo $(( (b - a) / (2000 * $2) ))
}

once=$(per_pair 0 1)
batch=$(per_pair 1 100)
echo "instructions inside malloc+free per malloc(32)+free pair (slow paths amortized in):"
echo "  $once when each block is freed at once, $batch when 100 are allocated then freed; budget $budget"
[ "$once" -le "$budget" ] && [ "$batch" -le "$budget" ]
