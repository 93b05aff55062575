# Shared helpers for the real-program tests: run a program with and without
# libstrata.so preloaded, prove that the preload took effect, compare outputs.
# Sourced by the run_*.sh scripts; $1 of each script is the path of libstrata.so.
set -euo pipefail

STRATA_LIB="$(realpath "${1:?usage: $0 /path/to/libstrata.so [...]}")"
shift
WORK="$(mktemp -d "${TMPDIR:-/tmp}/strata-override.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A missing tool is a failure with the package to install, never a silent skip.
require_command() {
  local command_name="$1" debian_package="$2"
  command -v "$command_name" >/dev/null 2>&1 ||
    fail "'$command_name' is not installed: install the Debian package '$debian_package' (scripts/setup.sh)"
}

# Runs "$@" with strata preloaded and the dynamic linker logging its symbol
# bindings (resolved eagerly, so every malloc user is listed), then checks that
# malloc, free and operator new bound to libstrata.so and never to libc.
# Output of the program goes to stdout as usual; the log to $WORK/ld.*.
run_preloaded_with_proof() {
  rm -f "$WORK"/ld.*
  LD_PRELOAD="$STRATA_LIB" LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$WORK/ld" "$@"
}

check_preload_proof() {
  local what="$1"
  local logs=("$WORK"/ld.*)
  [[ -e "${logs[0]}" ]] || fail "$what: the dynamic linker wrote no binding log"
  local lib_name
  lib_name="$(basename "$STRATA_LIB" | sed 's/\.so.*//')"
  local symbol
  for symbol in malloc free calloc realloc; do
    grep -q "to [^ ]*${lib_name}\.so[^ ]* \[0\]: normal symbol \`${symbol}'" "${logs[@]}" ||
      fail "$what: no binding of '$symbol' to libstrata.so: the preload did not take effect"
    if grep -q "to [^ ]*libc\.so[^ ]* \[0\]: normal symbol \`${symbol}'" "${logs[@]}"; then
      grep -m3 "to [^ ]*libc\.so[^ ]* \[0\]: normal symbol \`${symbol}'" "${logs[@]}" >&2
      fail "$what: '$symbol' still binds to glibc somewhere"
    fi
  done
  local bound
  bound="$(cat "${logs[@]}" | grep -c "to [^ ]*${lib_name}\.so[^ ]* \[0\]: normal symbol" || true)"
  echo "proof: $what: $bound symbol bindings resolved to $(basename "$STRATA_LIB"), none of malloc/free/calloc/realloc to glibc"
}

# Compares two files; on a difference shows the start of the diff.
same_output() {
  local what="$1" expected="$2" actual="$3"
  if ! cmp -s "$expected" "$actual"; then
    diff "$expected" "$actual" | head -20 >&2 || true
    fail "$what: output with strata differs from output without it"
  fi
  echo "same output: $what ($(wc -c <"$expected") bytes)"
}
