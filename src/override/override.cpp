// The malloc family and every C++ operator new/delete, replaced by strata.
// In libstrata.so these symbols interpose the C library's for the whole
// process (LD_PRELOAD or a link dependency); in libstrata.a this one object
// file is pulled in whole, so a program never mixes two allocators' halves.
//
// Nothing here needs the C++ runtime at link time (no guard variables, no
// throw expression): operator new's failure path finds the runtime through
// override/cxx_runtime.h, so libstrata.so depends on libc alone.
#include <cerrno>
#include <cstddef>
#include <new>
#include <unistd.h>

#include "api/allocator.h"
#include "override/cxx_runtime.h"

// noexcept functions here get unwind tables that name the C++ personality
// routine; weak, as in cxx_runtime.cpp, so that it adds no dependency (only
// an exception thrown through them would ever reach it, and none is without
// a C++ runtime in the process).
asm(".weak __gxx_personality_v0");

// Each entry point starts a cache line: the fast paths (malloc's 14
// instructions, free's 23) then sit in the fewest fetch blocks whatever
// code comes before them, so their speed no longer moves with unrelated
// changes elsewhere in the library (measured, 9-15 interleaved runs:
// fastpath_pair 6.19 -> 5.87, seed 002 6.89 -> 6.71, new/delete 7.21 ->
// 6.96 ns per pair; about 1.4 KiB of padding).
#define STRATA_EXPORT extern "C" __attribute__((visibility("default"), aligned(64)))
#define STRATA_EXPORT_CXX __attribute__((visibility("default"), aligned(64)))

using namespace strata::detail;

namespace {

bool is_power_of_two(std::size_t x) noexcept { return x != 0 && (x & (x - 1)) == 0; }

// Only valloc and pvalloc ask; sysconf reads a value the dynamic linker
// stored, so no cached copy (whose function-local static would need a guard
// from the C++ runtime).
std::size_t os_page_size() noexcept { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

// operator new's failure protocol: call the new_handler until it gives up
// (returns a block, throws, or is removed), then throw std::bad_alloc.
__attribute__((noinline, cold)) void* new_failed(std::size_t size, std::size_t alignment) {
  for (;;) {
    NewHandler handler = cxx_new_handler();
    if (handler == nullptr) cxx_throw_bad_alloc();
    handler();
    void* block = alignment == 0 ? allocate(size) : allocate_aligned(alignment, size);
    if (block != nullptr) return block;
  }
}

// The nothrow operators: the same, but a handler that throws (or none at
// all) means null.
__attribute__((noinline, cold)) void* new_nothrow_failed(std::size_t size,
                                                         std::size_t alignment) noexcept {
  for (;;) {
    NewHandler handler = cxx_new_handler();
    if (handler == nullptr || !cxx_call_new_handler_catching(handler)) return nullptr;
    void* block = alignment == 0 ? allocate(size) : allocate_aligned(alignment, size);
    if (block != nullptr) return block;
  }
}

// The slow halves of operator new, reached by a tail jump from the operator
// (so their return address is the program's call site: heap profiling takes
// it here, and the operator's inline path spends nothing on it). An empty
// allocation word jumps to the first pair with its size and offset, as
// malloc's does to its own slow entry (the current span's next word first);
// sizes past the fast path take the second.
__attribute__((noinline)) void* new_from_word(std::size_t size, std::uintptr_t offset) {
  void* block = allocate_slow_taking_word(class_of_offset(offset), size, STRATA_CALL_SITE, 0);
  if (__builtin_expect(block != nullptr, 1)) return block;
  return new_failed(size, 0);
}

__attribute__((noinline)) void* new_nothrow_from_word(std::size_t size, std::uintptr_t offset) noexcept {
  void* block = allocate_slow_taking_word(class_of_offset(offset), size, STRATA_CALL_SITE, 0);
  if (__builtin_expect(block != nullptr, 1)) return block;
  return new_nothrow_failed(size, 0);
}

__attribute__((noinline)) void* new_from_entry(std::size_t size) {
  void* block = allocate_from(size, STRATA_CALL_SITE);
  if (__builtin_expect(block != nullptr, 1)) return block;
  return new_failed(size, 0);
}

__attribute__((noinline)) void* new_nothrow_from_entry(std::size_t size) noexcept {
  void* block = allocate_from(size, STRATA_CALL_SITE);
  if (__builtin_expect(block != nullptr, 1)) return block;
  return new_nothrow_failed(size, 0);
}

inline void* new_impl(std::size_t size) {
  if (__builtin_expect(size < racy_load(g_hot.fast_size_limit), 1))
    return allocate_at<new_from_word>(size, kSmallOffsets.offset[size]);
  return new_from_entry(size);
}

inline void* new_nothrow_impl(std::size_t size) noexcept {
  if (__builtin_expect(size < racy_load(g_hot.fast_size_limit), 1))
    return allocate_at<new_nothrow_from_word>(size, kSmallOffsets.offset[size]);
  return new_nothrow_from_entry(size);
}

// The aligned forms are out of line, so that the operators themselves stay
// small enough to leave %rbp alone: the heap profiler reads the program's
// frame pointer there (STRATA_CALL_SITE).
__attribute__((noinline)) void* new_aligned_impl(std::size_t size, std::align_val_t alignment, CallSite site) {
  auto a = static_cast<std::size_t>(alignment);
  void* block = is_power_of_two(a) ? allocate_aligned(a, size, site) : nullptr;
  if (block != nullptr) return block;
  if (!is_power_of_two(a)) cxx_throw_bad_alloc();
  return new_failed(size, a);
}

__attribute__((noinline)) void* new_aligned_nothrow_impl(std::size_t size, std::align_val_t alignment,
                                                         CallSite site) noexcept {
  auto a = static_cast<std::size_t>(alignment);
  if (!is_power_of_two(a)) return nullptr;
  void* block = allocate_aligned(a, size, site);
  if (block != nullptr) return block;
  return new_nothrow_failed(size, a);
}

}  // namespace

// --- C --------------------------------------------------------------------

STRATA_EXPORT void* malloc(std::size_t size) { return allocate(size); }

STRATA_EXPORT void free(void* block) { release(block); }

STRATA_EXPORT void* calloc(std::size_t count, std::size_t size) {
  return allocate_zeroed(count, size);
}

STRATA_EXPORT void* realloc(void* block, std::size_t size) { return reallocate(block, size); }

STRATA_EXPORT void* reallocarray(void* block, std::size_t count, std::size_t size) {
  std::size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return reallocate(block, total);
}

STRATA_EXPORT void* aligned_alloc(std::size_t alignment, std::size_t size) {
  if (!is_power_of_two(alignment)) {
    errno = EINVAL;
    return nullptr;
  }
  return allocate_aligned(alignment, size);
}

STRATA_EXPORT void* memalign(std::size_t alignment, std::size_t size) {
  if (!is_power_of_two(alignment)) {
    errno = EINVAL;
    return nullptr;
  }
  return allocate_aligned(alignment, size);
}

namespace {
// Out of line, so that posix_memalign itself stays small enough to leave
// %rbp alone: the heap profiler reads the program's frame pointer there.
__attribute__((noinline)) int posix_memalign_at(void** result, std::size_t alignment, std::size_t size,
                                                CallSite site) {
  if (!is_power_of_two(alignment) || alignment % sizeof(void*) != 0) return EINVAL;
  int saved_errno = errno;  // POSIX: report through the return value only
  void* block = allocate_aligned(alignment, size, site);
  errno = saved_errno;
  if (block == nullptr) return ENOMEM;
  *result = block;
  return 0;
}
}  // namespace

STRATA_EXPORT int posix_memalign(void** result, std::size_t alignment, std::size_t size) {
  return posix_memalign_at(result, alignment, size, STRATA_CALL_SITE);
}

STRATA_EXPORT void* valloc(std::size_t size) { return allocate_aligned(os_page_size(), size); }

STRATA_EXPORT void* pvalloc(std::size_t size) {
  std::size_t page = os_page_size();
  std::size_t rounded = (size + page - 1) & ~(page - 1);
  if (rounded < size) {
    errno = ENOMEM;
    return nullptr;
  }
  return allocate_aligned(page, rounded == 0 ? page : rounded);
}

STRATA_EXPORT std::size_t malloc_usable_size(void* block) { return usable_size(block); }

// C23
STRATA_EXPORT void free_sized(void* block, std::size_t size) { release_sized(block, size); }

STRATA_EXPORT void free_aligned_sized(void* block, std::size_t /*alignment*/, std::size_t size) {
  release_sized(block, size);
}

// --- C++ ------------------------------------------------------------------

STRATA_EXPORT_CXX void* operator new(std::size_t size) { return new_impl(size); }
STRATA_EXPORT_CXX void* operator new[](std::size_t size) { return new_impl(size); }
STRATA_EXPORT_CXX void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return new_nothrow_impl(size);
}
STRATA_EXPORT_CXX void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return new_nothrow_impl(size);
}
STRATA_EXPORT_CXX void* operator new(std::size_t size, std::align_val_t alignment) {
  return new_aligned_impl(size, alignment, STRATA_CALL_SITE);
}
STRATA_EXPORT_CXX void* operator new[](std::size_t size, std::align_val_t alignment) {
  return new_aligned_impl(size, alignment, STRATA_CALL_SITE);
}
STRATA_EXPORT_CXX void* operator new(std::size_t size, std::align_val_t alignment,
                                     const std::nothrow_t&) noexcept {
  return new_aligned_nothrow_impl(size, alignment, STRATA_CALL_SITE);
}
STRATA_EXPORT_CXX void* operator new[](std::size_t size, std::align_val_t alignment,
                                       const std::nothrow_t&) noexcept {
  return new_aligned_nothrow_impl(size, alignment, STRATA_CALL_SITE);
}

STRATA_EXPORT_CXX void operator delete(void* block) noexcept { release(block); }
STRATA_EXPORT_CXX void operator delete[](void* block) noexcept { release(block); }
STRATA_EXPORT_CXX void operator delete(void* block, const std::nothrow_t&) noexcept {
  release(block);
}
STRATA_EXPORT_CXX void operator delete[](void* block, const std::nothrow_t&) noexcept {
  release(block);
}
STRATA_EXPORT_CXX void operator delete(void* block, std::size_t size) noexcept {
  release_sized(block, size);
}
STRATA_EXPORT_CXX void operator delete[](void* block, std::size_t size) noexcept {
  release_sized(block, size);
}
STRATA_EXPORT_CXX void operator delete(void* block, std::align_val_t) noexcept { release(block); }
STRATA_EXPORT_CXX void operator delete[](void* block, std::align_val_t) noexcept {
  release(block);
}
STRATA_EXPORT_CXX void operator delete(void* block, std::size_t size, std::align_val_t) noexcept {
  release_sized(block, size);
}
STRATA_EXPORT_CXX void operator delete[](void* block, std::size_t size, std::align_val_t) noexcept {
  release_sized(block, size);
}
STRATA_EXPORT_CXX void operator delete(void* block, std::align_val_t, const std::nothrow_t&) noexcept {
  release(block);
}
STRATA_EXPORT_CXX void operator delete[](void* block, std::align_val_t,
                                         const std::nothrow_t&) noexcept {
  release(block);
}
