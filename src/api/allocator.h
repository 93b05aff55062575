// The allocator's entry points, shared by the C API (strata_*) and the
// malloc/new overrides. The small-block paths read top to bottom:
//
//   allocate(size):  size <= 256 KiB ? pop the thread's list for the class
//                                     : a span from the page heap
//   release(block):  page map -> span; ours? push on the thread's list
//                                      : deallocate_slow (remote, large, bad)
//
// Everything else (large, aligned, calloc, realloc) lives in
// allocator_slow.cpp. Failures return nullptr with errno = ENOMEM.
#pragma once

#include <cstddef>

#include "core/size_classes.h"
#include "frontend/thread_cache.h"

namespace strata::detail {

void* allocate_large(std::size_t size) noexcept;
void* allocate_aligned(std::size_t alignment, std::size_t size) noexcept;  // alignment: power of two
void* allocate_zeroed(std::size_t count, std::size_t size) noexcept;
void* reallocate(void* block, std::size_t size) noexcept;
std::size_t usable_size(const void* block) noexcept;

inline void* allocate(std::size_t size) noexcept {
  if (__builtin_expect(size <= kMaxSmallSize, 1)) return allocate_small(size_to_class(size));
  return allocate_large(size);
}

inline void release(void* block) noexcept { deallocate(block); }

// The size does not save work here: ownership, not the class, decides the
// path, and ownership needs the span. Sized frees are therefore exactly as
// fast as unsized ones (the design note in docs/design.md explains).
inline void release_sized(void* block, std::size_t /*size*/) noexcept { deallocate(block); }

}  // namespace strata::detail
