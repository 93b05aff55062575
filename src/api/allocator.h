// The allocator's entry points, shared by the C API (strata_*) and the
// malloc/new overrides. The small-block paths read top to bottom:
//
//   allocate(size):  size <= 1 KiB ? the lowest bit of the thread's
//                                    allocation word for the class
//                                  : allocate_general (classes up to
//                                    32 KiB, then a span from the page heap)
//   release(block):  page map -> ours? set the block's bit in its span
//                                    : deallocate_slow (remote, large, bad)
//
// Everything else (large, aligned, calloc, realloc) lives in
// allocator_slow.cpp. Failures return nullptr with errno = ENOMEM.
//
// Heap profiling costs the fast paths nothing: allocations are counted and
// sampled on slow paths only (profile/profile.h). The functions that may
// sample take the call site of the entry point the program called (malloc,
// new, ...), where the sampled stack starts (STRATA_CALL_SITE,
// profile/stack_capture.h): as a default argument it is evaluated in the
// entry point itself, two register moves per call of those slow entries.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/size_classes.h"
#include "frontend/thread_cache.h"
#include "profile/stack_capture.h"

namespace strata::detail {

void* allocate_large(std::size_t size, CallSite site, bool zeroed = false) noexcept;
void* allocate_aligned(std::size_t alignment, std::size_t size,  // alignment: power of two
                       CallSite site = STRATA_CALL_SITE) noexcept;
void* allocate_zeroed(std::size_t count, std::size_t size, CallSite site = STRATA_CALL_SITE) noexcept;
void* reallocate(void* block, std::size_t size, CallSite site = STRATA_CALL_SITE) noexcept;
std::size_t usable_size(const void* block) noexcept;

// Requests over 1 KiB (rarer, and each costs far more than a call to use)
// take an out-of-line path, so the common case has one size test; so does
// every request before the process is set up, and in checking mode.
void* allocate_general(std::size_t size, CallSite site) noexcept;
// The same, reached by a tail jump from malloc (takes the call site itself;
// see allocate_slow_from_entry).
void* allocate_general_from_entry(std::size_t size) noexcept;

// Word offset (frontend/thread_cache.h) for every size up to 1 KiB, indexed
// by the size itself: 2 KiB of table buys two instructions off every malloc
// (no rounding shift) and the fast path gets an address offset, not a class
// to scale.
struct SmallOffsetTable {
  std::uint16_t offset[1025];
};
inline constexpr SmallOffsetTable kSmallOffsets = [] {
  SmallOffsetTable t{};
  for (std::size_t size = 0; size <= 1024; ++size)
    t.offset[size] = static_cast<std::uint16_t>(
        word_offset(size_class_build::kTables.class_of_index[(size + 7) >> 3]));
  return t;
}();

// malloc: the call site is only taken on the paths that leave the inline one.
inline void* allocate(std::size_t size) noexcept {
  if (__builtin_expect(size < racy_load(g_hot.fast_size_limit), 1)) return allocate_at(size, kSmallOffsets.offset[size]);
  return allocate_general_from_entry(size);
}

// The same for the slow entries, which already hold the program's call site.
inline void* allocate_from(std::size_t size, CallSite site) noexcept {
  if (__builtin_expect(size < racy_load(g_hot.fast_size_limit), 1)) return allocate_at(size, kSmallOffsets.offset[size], site);
  return allocate_general(size, site);
}

inline void release(void* block) noexcept { deallocate(block); }

// The size does not save work here: ownership, not the class, decides the
// path, and ownership needs the span. Sized frees are therefore exactly as
// fast as unsized ones (the design note in docs/design.md explains).
inline void release_sized(void* block, std::size_t /*size*/) noexcept { deallocate(block); }

}  // namespace strata::detail
