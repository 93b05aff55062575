#!/usr/bin/env bash
# The installed package works for a consumer: `cmake --install` into a
# temporary prefix, then build and run a tiny project (tests/programs/consumer)
# once through find_package(strata) and once through pkg-config.
# $1: the strata build directory, $2: the C compiler to use.
set -euo pipefail
BUILD_DIR="$(realpath "${1:?usage: run_consumer_project.sh build-dir [cc]}")"
CC_BIN="${2:-cc}"
CONSUMER="$(realpath "$(dirname "$0")/../programs/consumer")"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/strata-consumer.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v pkg-config >/dev/null || fail "pkg-config is not installed: install the Debian package 'pkg-config'"

PREFIX="$WORK/prefix"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" >"$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log" >&2; fail "cmake --install failed"; }
echo "installed into $PREFIX:"
find "$PREFIX" \( -type f -o -type l \) 2>/dev/null | sed "s|^$PREFIX/|  |" | sort
INSTALLED_LIB="$(find "$PREFIX" -name 'libstrata.so' 2>/dev/null | head -1)"
[[ -n "$INSTALLED_LIB" ]] || fail "cmake --install put no libstrata.so under $PREFIX"
LIBDIR="$(dirname "$INSTALLED_LIB")"

# 1. CMake package.
cmake -S "$CONSUMER" -B "$WORK/cmake-build" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_C_COMPILER="$CC_BIN" \
  >"$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log" >&2; fail "find_package(strata) project did not configure"; }
cmake --build "$WORK/cmake-build" >"$WORK/build.log" 2>&1 ||
  { cat "$WORK/build.log" >&2; fail "find_package(strata) project did not build"; }
LD_LIBRARY_PATH="$LIBDIR" "$WORK/cmake-build/consumer" || fail "find_package(strata) consumer failed ($?)"

# 2. pkg-config.
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
pkg-config --exists strata || fail "pkg-config does not find strata in $PKG_CONFIG_PATH"
# shellcheck disable=SC2046
"$CC_BIN" -o "$WORK/consumer-pc" "$CONSUMER/consumer.c" $(pkg-config --cflags --libs strata) -ldl ||
  fail "building with pkg-config flags failed"
LD_LIBRARY_PATH="$LIBDIR" "$WORK/consumer-pc" || fail "pkg-config consumer failed ($?)"
echo "PASS"
