#!/usr/bin/env bash
# Runs a test program under valgrind memcheck; any error reported fails the
# test. strata's blocks are not valgrind's heap, so this checks every access
# the program and the allocator make to memory (unmapped, uninitialised),
# not leaks. A missing valgrind fails with the package to install.
set -euo pipefail
command -v valgrind >/dev/null 2>&1 ||
  { echo "FAIL: valgrind is not installed: install the Debian package 'valgrind' (scripts/setup.sh)" >&2; exit 1; }
exec valgrind --quiet --error-exitcode=99 --track-origins=yes "$@"
