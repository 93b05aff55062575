// Who owns a small span, as the page map tells the free fast path.
//
// A span's owner is a ThreadCache (only that thread touches the span's
// lists and counts) or nobody (the central cache of its class, under its
// lock). The owner is written in two places: the span, and the owner tag of
// every page map entry of its pages, which is the owner's address, or 0.
// The free fast path compares the tag with its own cache: equal means "mine,
// push it"; anything else (another owner, no owner, a large or free span, a
// pointer strata never returned) takes the slow path.
//
// Every change to or from thread T's ownership is written by T itself (it
// creates, adopts or gives up the span), so T never reads a stale tag that
// names T (docs/design.md, invariant 4).
#pragma once

#include <cstdint>

#include "core/page_map.h"
#include "core/span.h"

namespace strata::detail {

inline std::uintptr_t owner_tag_for(const ThreadCache* owner) noexcept {
  return reinterpret_cast<std::uintptr_t>(owner);
}

// Makes `owner` (nullptr: the central cache) the owner of a small span.
inline void set_owner(Span* span, ThreadCache* owner) noexcept {
  span->owner.store(owner, std::memory_order_release);
  g_page_map.set_owner_tag(span->first_page, span->page_count, owner_tag_for(owner));
}

}  // namespace strata::detail
