// Who owns a small span, as the page map tells the free fast path.
//
// A span's owner is a ThreadCache (only that thread touches the span's
// lists and counts) or nobody (the central cache of its class, under its
// lock). The owner is written in two places: the span, and the owner tag of
// every page map entry of its pages, which is the owner's address, or 0.
// The free fast path compares the tag with its own cache: equal means "mine,
// set its bit"; anything else (another owner, no owner, a large or free span, a
// pointer strata never returned) takes the slow path.
//
// Every change to or from thread T's ownership is written by T itself (it
// creates, adopts or gives up the span), so T never reads a stale tag that
// names T (docs/design.md, invariant 4).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/page_map.h"
#include "core/size_classes.h"
#include "core/span.h"

namespace strata::detail {

inline std::uintptr_t owner_tag_for(const ThreadCache* owner) noexcept {
  return reinterpret_cast<std::uintptr_t>(owner);
}

// An owner may tag the pages of one class's spans with its address plus
// the class instead (caches are 4096-aligned, classes below 64): its own
// frees of those blocks then miss the fast path's compare and go to the
// class's list of recent blocks (frontend/recent_blocks.h). Every other
// reader wants the owner alone.
inline constexpr std::uintptr_t kTagClassBits = 63;
static_assert(kNumClasses - 1 <= kTagClassBits, "a class fits the tag's low bits");
inline std::uintptr_t owner_of_tag(std::uintptr_t tag) noexcept { return tag & ~kTagClassBits; }
inline std::uintptr_t listing_tag_for(const ThreadCache* owner, std::size_t cls) noexcept {
  return reinterpret_cast<std::uintptr_t>(owner) + cls;
}

// Makes `owner` (nullptr: the central cache) the owner of a small span.
// A thread's span gets its pages' class words first (core/page_map.h: what
// other threads' frees read once they see the tag); unowned spans need none,
// so a program whose threads stay young never writes that part of a leaf.
inline void set_owner(Span* span, ThreadCache* owner) noexcept {
  span->owner.store(owner, std::memory_order_release);
  if (owner != nullptr) g_page_map.set_page_classes(span->first_page, span->page_count, span->size_class);
  g_page_map.set_owner_tag(span->first_page, span->page_count, owner_tag_for(owner));
}

// A page's class and its offset in its span share one 32-bit word.
static_assert([] {
  for (std::size_t cls = 1; cls < kNumClasses; ++cls)
    if ((std::uint64_t{class_info(cls).span_pages} << kPageShift) > 0xffffffff) return false;
  return kNumClasses <= kPageSize;
}(), "a page's class and offset in its span fit the page map's word");

}  // namespace strata::detail
