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

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#define STRATA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRATA_ASAN 1
#endif
#endif
#ifndef STRATA_ASAN
#define STRATA_ASAN 0
#endif
#if STRATA_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace strata::detail {

// Under AddressSanitizer, free slots of an object_pool are poisoned (all but
// their link), so a use after destroy() is reported like a heap
// use-after-free. Without ASan these do nothing.
inline void poison_free_slot(void* slot, std::size_t bytes) noexcept {
#if STRATA_ASAN
  if (bytes > sizeof(void*))
    ASAN_POISON_MEMORY_REGION(static_cast<char*>(slot) + sizeof(void*), bytes - sizeof(void*));
#else
  (void)slot;
  (void)bytes;
#endif
}
inline void unpoison_slot(void* slot, std::size_t bytes) noexcept {
#if STRATA_ASAN
  ASAN_UNPOISON_MEMORY_REGION(slot, bytes);
#else
  (void)slot;
  (void)bytes;
#endif
}

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
