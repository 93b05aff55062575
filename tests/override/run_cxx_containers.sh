#!/usr/bin/env bash
# A C++ program built against the system allocator, using the standard
# containers from several threads; run unchanged with strata preloaded.
# $2: the program (tests/programs/containers.cpp, built by CMake).
source "$(dirname "$0")/preload_common.sh"
PROGRAM="${1:?usage: run_cxx_containers.sh libstrata.so containers-program}"

"$PROGRAM" >"$WORK/plain.txt"
run_preloaded_with_proof "$PROGRAM" >"$WORK/strata.txt"
check_preload_proof "containers program"
grep -q "symbol \`_Znwm'" "$WORK"/ld.* || fail "operator new did not bind to libstrata.so"
same_output "containers program" "$WORK/plain.txt" "$WORK/strata.txt"
echo "PASS"
