// A span: a run of contiguous pages, the unit the page heap hands out.
//
// A span is in one of four states:
//   kDetached  being split or merged by the page heap (never seen unlocked);
//   kFree   in the page heap's free structures;
//   kSmall  cut into blocks of one size class;
//   kLarge  one block (a request over kMaxSmallSize, or an over-aligned one).
//
// A small span has exactly one owner at a time (the `owner` field):
//   a ThreadCache  - only that thread touches the span's free list and counts;
//   nullptr        - the central cache of its class owns it; its fields are
//                    touched only under that class's lock.
// Other threads that free a block of the span never touch the span: they send
// the block to the owner (frontend/remote_free.h).
//
// Counting invariant of a small span (the one the tests check):
//   allocated + (blocks on free_list) + (blocks not yet carved) == capacity
// where `allocated` counts blocks handed out of the span: in use by the
// program, cached in the owner's thread cache, or travelling to the owner.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/constants.h"

namespace strata::detail {

class ThreadCache;
struct Sample;

enum class SpanState : std::uint8_t { kDetached, kFree, kSmall, kLarge };

struct Span {
  // --- read on the free fast path: keep first, in one cache line ---------
  std::atomic<ThreadCache*> owner{nullptr};
  std::uint8_t size_class = 0;     // 0 for free and large spans
  SpanState state = SpanState::kDetached;  // kFree exactly while filed
  bool pages_zero = false;         // all pages known to read as zero
  bool fully_mapped = false;       // every page (not just the ends) maps here
  std::uint32_t allocated = 0;     // blocks out of the span (see invariant)

  // --- owner-only fields -------------------------------------------------
  std::uint32_t capacity = 0;      // blocks per span (small)
  void* free_list = nullptr;       // returned blocks, encoded links
  std::uintptr_t carve_next = 0;   // first never-used block (lazy carving)
  std::uintptr_t carve_end = 0;    // end of the last whole block

  PageId first_page = 0;
  std::size_t page_count = 0;

  // --- list links: page heap bucket, central partial list, owner's partial list
  Span* next = nullptr;
  Span* prev = nullptr;
  bool in_list = false;

  // --- page heap ordered set of large free spans (treap) ------------------
  Span* left = nullptr;
  Span* right = nullptr;
  std::uint32_t priority = 0;
  bool in_treap = false;           // filed in the treap (else in a length list)

  // --- page heap decay: when the span became free, whether its pages were
  //     given back to the OS, and its place in the queue of committed free spans
  std::uint64_t free_since = 0;
  bool decommitted = false;
  bool in_decay_queue = false;
  Span* decay_next = nullptr;
  Span* decay_prev = nullptr;

  // --- heap profiling: the record of a sampled block (a kLarge span of one
  //     block, profile/sampled_block.h), nullptr otherwise
  Sample* sample = nullptr;

  void* start() const noexcept { return reinterpret_cast<void*>(address_of(first_page)); }
  std::size_t bytes() const noexcept { return page_count << kPageShift; }
  bool contains(const void* p) const noexcept {
    auto a = reinterpret_cast<std::uintptr_t>(p);
    return a >= address_of(first_page) && a < address_of(first_page + page_count);
  }
  bool has_free_blocks() const noexcept {
    return free_list != nullptr || carve_next < carve_end;
  }
};

// A doubly linked intrusive list of spans (sentinel-free, LIFO).
struct SpanList {
  Span* head = nullptr;
  std::size_t length = 0;

  void push(Span* s) noexcept {
    s->prev = nullptr;
    s->next = head;
    if (head) head->prev = s;
    head = s;
    s->in_list = true;
    ++length;
  }
  void remove(Span* s) noexcept {
    if (s->prev) s->prev->next = s->next; else head = s->next;
    if (s->next) s->next->prev = s->prev;
    s->next = s->prev = nullptr;
    s->in_list = false;
    --length;
  }
  Span* pop() noexcept {
    Span* s = head;
    if (s) remove(s);
    return s;
  }
  bool empty() const noexcept { return head == nullptr; }
};

}  // namespace strata::detail
