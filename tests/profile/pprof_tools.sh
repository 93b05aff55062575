#!/usr/bin/env bash
# google-pprof (Debian package google-perftools) and `go tool pprof` (Debian
# package golang-go) read a strata heap profile and name the functions that
# hold and allocate the memory. Profile of profile_program's "leak" mode (the
# worked example of docs/profiling.md), strata preloaded.
# A missing tool skips the test (exit 77) naming the package; CI installs both
# (scripts/setup.sh). Usage: pprof_tools.sh <profile_program_plain> <libstrata.so>
set -euo pipefail
program="$(realpath "$1")"; library="$(realpath "$2")"
work="$(mktemp -d "${TMPDIR:-/tmp}/strata-pprof.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export HOME="${HOME:-$work}"  # go wants a home for its settings

fail() { echo "FAIL: $*" >&2; exit 1; }

STRATA_PROFILE=1 STRATA_PROFILE_PATH="$work/leak" LD_PRELOAD="$library" "$program" leak >/dev/null 2>"$work/run.err" ||
  fail "the program failed: $(cat "$work/run.err")"
profile="$(ls "$work"/leak.*.heap)"
echo "profile: $(head -1 "$profile")"

# The first function of a --text / -top listing: the one with the most flat space.
first_function() { grep -E -m1 "$1" "$2" | awk '{print $NF}'; }

tools=0
if command -v google-pprof >/dev/null; then
  tools=$((tools + 1))
  google-pprof --text --inuse_space "$program" "$profile" >"$work/inuse.txt" 2>"$work/gp.err" ||
    fail "google-pprof: $(cat "$work/gp.err")"
  google-pprof --text --alloc_space "$program" "$profile" >"$work/alloc.txt" 2>>"$work/gp.err" ||
    fail "google-pprof: $(cat "$work/gp.err")"
  cat "$work/inuse.txt"
  top="$(first_function '^ +[0-9.]+ +[0-9.]+%' "$work/inuse.txt")"
  [ "$top" = leaky_cache_insert ] || fail "google-pprof --inuse_space: top function is '$top', not leaky_cache_insert"
  grep -q ' handle_request$' "$work/inuse.txt" || fail "google-pprof: the caller handle_request is missing"
  grep -q ' parse_request$' "$work/alloc.txt" || fail "google-pprof --alloc_space: parse_request is missing"
  if grep -q ' parse_request$' "$work/inuse.txt"; then
    grep ' parse_request$' "$work/inuse.txt" | awk '$1 != "0.0" {exit 1}' || fail "google-pprof: parse_request holds in-use space"
  fi
  echo "google-pprof: leaky_cache_insert holds the in-use space; parse_request only allocated"
else
  echo "SKIP google-pprof: not installed (Debian package google-perftools)"
fi

if command -v go >/dev/null; then
  tools=$((tools + 1))
  go tool pprof -top -sample_index=inuse_space "$program" "$profile" >"$work/go_inuse.txt" 2>"$work/go.err" ||
    fail "go tool pprof: $(cat "$work/go.err")"
  go tool pprof -top -sample_index=alloc_space "$program" "$profile" >"$work/go_alloc.txt" 2>>"$work/go.err" ||
    fail "go tool pprof: $(cat "$work/go.err")"
  cat "$work/go_inuse.txt"
  top="$(first_function '^ +[0-9.]+[kMG]?B +[0-9.]+%' "$work/go_inuse.txt")"
  [ "$top" = leaky_cache_insert ] || fail "go tool pprof inuse_space: top function is '$top', not leaky_cache_insert"
  grep -q ' handle_request$' "$work/go_inuse.txt" || fail "go tool pprof: the caller handle_request is missing"
  grep -q ' parse_request$' "$work/go_alloc.txt" || fail "go tool pprof alloc_space: parse_request is missing"
  echo "go tool pprof: leaky_cache_insert holds the in-use space; parse_request only allocated"
else
  echo "SKIP go tool pprof: not installed (Debian package golang-go)"
fi

if [ "$tools" -eq 0 ]; then
  echo "SKIP: neither google-pprof nor go is installed (scripts/setup.sh installs both)"
  exit 77
fi
echo "PASS: $tools pprof tool(s) read the profile"
