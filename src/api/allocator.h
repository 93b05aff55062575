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
#include <cstdint>

#include "core/size_classes.h"
#include "frontend/thread_cache.h"
#include "profile/sampler.h"
#include "profile/stack_capture.h"

namespace strata::detail {

// The functions below take the call site of the entry point the program
// called (malloc, new, ...): where a sampled allocation's stack starts
// (STRATA_CALL_SITE, profile/stack_capture.h). As a default argument it is
// evaluated in the entry point itself: two register moves per call.

void* allocate_large(std::size_t size) noexcept;
void* allocate_aligned(std::size_t alignment, std::size_t size,  // alignment: power of two
                       CallSite site = STRATA_CALL_SITE) noexcept;
void* allocate_zeroed(std::size_t count, std::size_t size, CallSite site = STRATA_CALL_SITE) noexcept;
void* reallocate(void* block, std::size_t size, CallSite site = STRATA_CALL_SITE) noexcept;
std::size_t usable_size(const void* block) noexcept;

// Requests over 1 KiB (rarer, and each costs far more than a call to use)
// take an out-of-line path, so the common case has one size test.
void* allocate_above_1k(std::size_t size) noexcept;

// List offset (frontend/thread_cache.h) for every size up to 1 KiB, indexed
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
        list_offset(size_class_build::kTables.class_of_index[(size + 7) >> 3]));
  return t;
}();

// Sizes below this take the inline path: 1025 normally, 0 in checking mode
// (so that every malloc reaches allocate_above_1k, which checks). A variable
// limit costs the same one compare as a constant one.
extern STRATA_INTERNAL std::size_t g_fast_size_limit;

inline void* allocate_unsampled(std::size_t size) noexcept {
  if (__builtin_expect(size < g_fast_size_limit, 1)) return allocate_at(kSmallOffsets.offset[size]);
  return allocate_above_1k(size);
}

// TEMPORARY heap-profiling integration (issue 12), until the byte countdown
// is folded into the thread cache's list refills (zero instructions on the
// fast path): every allocation counts its bytes down to the next sampling
// point here, inline (3 instructions: the TLS offset, a subtract into
// thread-local memory, a branch). The one that crosses it goes to
// allocate_at_sampling_point, with the program's call site.
inline bool temporary_profile_countdown(std::size_t size) noexcept {
  return __builtin_expect(sampling_countdown_crossed(size), 0);
}
void* allocate_at_sampling_point(std::size_t size, CallSite site) noexcept;

inline void* allocate(std::size_t size) noexcept {
  if (temporary_profile_countdown(size)) return allocate_at_sampling_point(size, STRATA_CALL_SITE);
  return allocate_unsampled(size);
}

inline void release(void* block) noexcept { deallocate(block); }

// The size does not save work here: ownership, not the class, decides the
// path, and ownership needs the span. Sized frees are therefore exactly as
// fast as unsized ones (the design note in docs/design.md explains).
inline void release_sized(void* block, std::size_t /*size*/) noexcept { deallocate(block); }

}  // namespace strata::detail
