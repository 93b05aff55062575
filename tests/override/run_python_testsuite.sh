#!/usr/bin/env bash
# CPython's own regression tests for its core containers and text types,
# with strata preloaded; every test must pass, as it does without strata.
source "$(dirname "$0")/preload_common.sh"
require_command python3 python3
# Modules that exercise the object allocator hard and run in a few seconds;
# add test.test_set test.test_bytes test.test_json test.test_weakref for a longer run.
MODULES=(test.test_list test.test_dict test.test_tuple test.test_deque test.test_string
         test.test_heapq test.test_bisect test.test_ordered_dict test.test_array test.test_struct)
if [[ -n "${STRATA_PYTHON_TEST_MODULES:-}" ]]; then read -r -a MODULES <<<"$STRATA_PYTHON_TEST_MODULES"; fi
python3 -c "import test.test_list, test.support" 2>/dev/null ||
  fail "python3 has no test suite (import test.test_list failed): install the Debian package 'libpython3-testsuite' (libpython3.11-testsuite)"

python3 -m unittest -q "${MODULES[@]}" >"$WORK/plain.log" 2>&1 ||
  { tail -30 "$WORK/plain.log" >&2; fail "the python test modules fail even without strata"; }
if ! run_preloaded_with_proof python3 -m unittest -q "${MODULES[@]}" >"$WORK/strata.log" 2>&1; then
  tail -40 "$WORK/strata.log" >&2
  fail "python test modules fail with strata preloaded"
fi
check_preload_proof "python3 -m unittest"
grep -E "^Ran [0-9]+ tests" "$WORK/strata.log"
tail -1 "$WORK/strata.log"
echo "PASS"
