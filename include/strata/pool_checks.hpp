// strata/pool_checks.hpp — the pools' checking mode.
//
// Compile with -DSTRATA_POOL_CHECKS=1 (the tests do) to make the pools catch
// double frees, pointers that belong to another pool and objects still live
// when a pool is destroyed. A caught error prints one line to stderr naming
// the pool, the pointer and the error, then aborts. With the switch off
// (the default) the checks compile to nothing.
#ifndef STRATA_POOL_CHECKS_HPP
#define STRATA_POOL_CHECKS_HPP

#ifndef STRATA_POOL_CHECKS
#define STRATA_POOL_CHECKS 0
#endif

#include <cstdio>
#include <cstdlib>

namespace strata::detail {

inline constexpr bool pool_checks_enabled = STRATA_POOL_CHECKS != 0;

[[noreturn]] [[gnu::cold]] [[gnu::noinline]] inline void pool_check_failed(
    const char* pool_kind, const void* pool, const char* what, const void* pointer) noexcept {
  // stdio, not iostreams: this may run during static destruction.
  std::fprintf(stderr, "strata: %s %p: %s (pointer %p)\n", pool_kind, pool, what, pointer);
  std::fflush(stderr);
  std::abort();
}

}  // namespace strata::detail

#endif
