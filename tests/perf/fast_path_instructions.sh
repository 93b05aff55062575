#!/usr/bin/env bash
# Guard for the fast-path code-generation work (owner tags, offset tables,
# the page map's layout): counts instructions per malloc(32)+free pair with
# callgrind inside strata's malloc and free (LD_PRELOADed as users run it;
# the caller's PLT jump, one per call, comes on top), failing above the budget.
# With a fourth argument `new`, the same for operator new(32) and sized
# operator delete (what `new T` and `delete p` call; pair_loop_new): the
# operators have malloc's and free's paths and must cost what they cost.
# Instruction counts do not depend on machine load.
#
# It counts with heap profiling at its default interval and with profiling
# off: the two must agree within one instruction per pair (the profiler
# counts nothing on the fast paths; a sample taken at random during the
# counted window costs about a thousand instructions, well under one per
# pair over 40,000 pairs).
# Usage: fast_path_instructions.sh <pair_loop> <libstrata.so> <budget> [new]
set -euo pipefail
program="$1"; library="$2"; budget="$3"; entries="${4:-malloc}"
if [ "$entries" = new ]; then
  functions=("--toggle-collect=operator new(unsigned long)" "--toggle-collect=operator delete(void*, unsigned long)")
  what="operator new(32)+sized operator delete pair"
else
  functions=(--toggle-collect=malloc --toggle-collect=free)
  what="malloc(32)+free pair"
fi
command -v valgrind >/dev/null || { echo "valgrind is missing (apt-get install valgrind)"; exit 1; }

count() {  # iterations pattern -> instructions executed inside the two entry points
  local out; out=$(mktemp)
  # Without $sample the library's own default interval (src/platform/options.h).
  local interval=(-u STRATA_PROFILE_SAMPLE)
  [ -n "${sample:-}" ] && interval=("STRATA_PROFILE_SAMPLE=$sample")
  env "${interval[@]}" LD_PRELOAD="$library" valgrind --tool=callgrind \
    --callgrind-out-file=/dev/null "${functions[@]}" "$program" "$1" "$2" 2>"$out" || true
  grep -o 'refs: *[0-9,]*' "$out" | tr -d ', ' | cut -d: -f2
  rm -f "$out"
}

per_pair() {  # pattern pairs_per_iteration -> tenths of an instruction per pair
  local a b
  a=$(count 20000 "$1"); b=$(count 40000 "$1")
  echo $(( (b - a) * 10 / (20000 * $2) ))
}

tenths() { echo "$(( $1 / 10 )).$(( $1 % 10 ))"; }

once=$(per_pair 0 1)
batch=$(per_pair 1 100)
sample=0
once_off=$(per_pair 0 1)
batch_off=$(per_pair 1 100)
echo "instructions inside the two entry points per $what (slow paths amortized in):"
echo "  $(tenths "$once") when each block is freed at once, $(tenths "$batch") when 100 are allocated then freed; budget $budget"
echo "  with heap profiling off (STRATA_PROFILE_SAMPLE=0): $(tenths "$once_off") and $(tenths "$batch_off")"
within() { local d=$(( $1 - $2 )); [ "${d#-}" -lt 10 ]; }
[ "$once" -le $(( budget * 10 )) ] && [ "$batch" -le $(( budget * 10 )) ] &&
  within "$once" "$once_off" && within "$batch" "$batch_off"
