#!/usr/bin/env bash
# Start-up cost (issue 11): libstrata.so brings no C++ runtime into a
# process, yet a C++ module that a C program dlopen()s with RTLD_LOCAL (as
# Python loads extension modules) still gets std::bad_alloc and its
# new_handler from operator new; and a trivial C program's peak RSS stays
# near glibc's. $1: libstrata.so, $2: cxx_module_host, $3: the C++ module.
source "$(dirname "$0")/preload_common.sh"
HOST="$(realpath "${1:?usage: run_start_up.sh libstrata.so cxx_module_host module.so}")"
MODULE="$(realpath "${2:?usage: run_start_up.sh libstrata.so cxx_module_host module.so}")"
require_command readelf binutils

# 1. Dependencies: libc (and the dynamic linker) only.
needed="$(readelf -d "$STRATA_LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')"
echo "libstrata.so needs: $needed"
for library in $needed; do
  case "$library" in
    libc.so.*|ld-linux*) ;;
    *) fail "libstrata.so depends on $library (only libc is expected: see 'Start-up cost' in docs/design.md)" ;;
  esac
done

# 2. operator new in a C++ module loaded into a C program.
LD_PRELOAD="$STRATA_LIB" "$HOST" "$MODULE" >"$WORK/module.txt" ||
  { cat "$WORK/module.txt"; fail "the C++ module's operator new checks failed under strata"; }
grep -q "module checks passed" "$WORK/module.txt" || fail "the module did not report its checks"
run_preloaded_with_proof "$HOST" "$MODULE" >/dev/null
check_preload_proof "C program with a dlopen()ed C++ module"

# 3. Peak RSS of a trivial C program: median of 7, strata within 768 KiB of
# glibc (0.3 MB apart on the development machine; a C++ runtime pulled back in
# would add about 1.5 MB).
median() { sort -n | sed -n 4p; }
glibc="$(for i in 1 2 3 4 5 6 7; do "$HOST" trivial; done | median)"
strata="$(for i in 1 2 3 4 5 6 7; do LD_PRELOAD="$STRATA_LIB" "$HOST" trivial; done | median)"
echo "trivial C program, peak RSS (VmHWM, median of 7): glibc $glibc KiB, strata $strata KiB"
(( strata <= glibc + 768 )) || fail "strata's start-up floor is $((strata - glibc)) KiB above glibc's"
echo "PASS"
