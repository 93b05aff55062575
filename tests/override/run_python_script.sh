#!/usr/bin/env bash
# python3 running an allocation-heavy script (tests/programs/alloc_heavy.py)
# with and without strata; the script also reports whether libstrata.so is
# mapped into its own process.
source "$(dirname "$0")/preload_common.sh"
SCRIPT="$(dirname "$0")/../programs/alloc_heavy.py"
require_command python3 python3

python3 "$SCRIPT" >"$WORK/plain.txt"
run_preloaded_with_proof python3 "$SCRIPT" --expect-strata >"$WORK/strata.txt"
check_preload_proof "python3 alloc_heavy.py"
same_output "python3 alloc_heavy.py" "$WORK/plain.txt" "$WORK/strata.txt"
echo "PASS"
