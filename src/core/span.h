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
// Free blocks of a small span are in exactly one of four places (free-list
// sharding, as in mimalloc): its own `free_list` (blocks freed since the
// owner last took the list), its owner's allocation list for the class (a
// list the owner took from this span, frontend/thread_cache.h), the
// never-used range [carve_next, carve_end) (which may start with blocks
// freed before the span last emptied, up to `marked_end`), or a parked unit
// (pages given back to the OS while the span holds live blocks,
// core/span_blocks.h).
//
// Counting invariant (the one the tests check):
//   allocated + (blocks on free_list) + (uncarved) + (parked) == capacity
// where `allocated` counts blocks out of the span: in use by the program, on
// the owner's allocation list, or travelling back to the owner. The free
// fast path keeps only `countdown` (see below); span_blocks.h derives the
// rest.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/constants.h"

namespace strata::detail {

class ThreadCache;
struct Sample;

enum class SpanState : std::uint8_t { kDetached, kFree, kSmall, kLarge };

// Three cache lines: what threads that free a block of the span read (the
// first), what the owner writes on every free and refill (the second: a
// remote sender reading the first line never contends with the owner's
// writes), and the page heap's bookkeeping (the third).
struct Span {
  // --- line 1: read by every slow free, remote senders included ----------
  std::atomic<ThreadCache*> owner{nullptr};
  PageId first_page = 0;
  std::size_t page_count = 0;
  std::uint8_t size_class = 0;     // 0 for free and large spans
  SpanState state = SpanState::kDetached;  // kFree exactly while filed
  bool pages_zero = false;         // all pages known to read as zero
  bool fully_mapped = false;       // every page (not just the ends) maps here
  std::uint32_t capacity = 0;      // blocks per span (small)
  // heap profiling: the record of a sampled block (a kLarge span of one
  // block, profile/sampled_block.h), nullptr otherwise
  Sample* sample = nullptr;
  // page heap registry of small spans (statistics walk it)
  Span* small_next = nullptr;
  Span* small_prev = nullptr;
  std::uint64_t idle_since = 0;    // a kept empty span (thread's or central's): when it became empty

  // --- line 2: owner-only, written by the free fast path and refills -------
  alignas(64) void* free_list = nullptr;  // blocks freed to this span, encoded links
  // Frees until the owner must look at the span again (the fast path's
  // `--countdown == 0` test). Awake span: the number of blocks out
  // (`allocated`), so 0 means every block came back. Sleeping span (full
  // when its owner last looked): frees still to come before it is worth
  // waking (SizeClassInfo::wake_frees). One counter serves both events, as
  // snmalloc's "needed" count does.
  std::uint32_t countdown = 0;
  // free_list holds `listed_mark - allocated` blocks while the span is awake
  // (a free moves a block from `allocated` to the list without touching
  // the mark; taking the list or carving moves the mark).
  std::uint32_t listed_mark = 0;
  std::uintptr_t carve_next = 0;   // first never-used block (lazy carving)
  std::uintptr_t carve_end = 0;    // end of the last whole block
  std::uint64_t parked_units = 0;  // bit u: unit u's pages were given back
  std::uint32_t parked_blocks = 0; // blocks overlapping parked units
  std::uint32_t used_epoch = 0;    // owner's scavenge epoch when it last fed an allocation list
  // Blocks in [carve_next, marked_end) were freed before the span last
  // emptied and still hold the free mark: carving relinks them without
  // marking them again, so malloc's mark check still stops a block that was
  // never freed (core/span_blocks.h, recycle_empty_span).
  std::uintptr_t marked_end = 0;
  bool sleeping = false;           // full and unlisted until countdown reaches 0
  bool kept_empty = false;         // empty, kept by its owner for reuse (bounded)
  bool tail_released = false;      // never-used pages past carve_next given back
  std::uint8_t unit_shift = 0;     // parked units are 1 << unit_shift bytes

  // --- line 3: lists and the page heap's free structures -----------------
  // list links: page heap bucket, central partial list, owner's lists
  alignas(64) Span* next = nullptr;
  Span* prev = nullptr;
  // page heap ordered set of large free spans (treap)
  Span* left = nullptr;
  Span* right = nullptr;
  // page heap decay: when the span became free, whether its pages were
  // given back to the OS, and its place in the queue of committed free spans
  Span* decay_next = nullptr;
  Span* decay_prev = nullptr;
  std::uint64_t free_since = 0;
  std::uint32_t priority = 0;
  bool in_list = false;
  bool in_treap = false;           // filed in the treap (else in a length list)
  bool decommitted = false;
  bool in_decay_queue = false;

  void* start() const noexcept { return reinterpret_cast<void*>(address_of(first_page)); }
  std::size_t bytes() const noexcept { return page_count << kPageShift; }
  bool contains(const void* p) const noexcept {
    auto a = reinterpret_cast<std::uintptr_t>(p);
    return a >= address_of(first_page) && a < address_of(first_page + page_count);
  }
};

// A doubly linked intrusive list of spans (sentinel-free), with both ends
// known: owners file spans with free blocks at the front and the empty spans
// they keep at the back.
struct SpanList {
  Span* head = nullptr;
  Span* tail = nullptr;
  std::size_t length = 0;

  void push(Span* s) noexcept {
    s->prev = nullptr;
    s->next = head;
    if (head) head->prev = s; else tail = s;
    head = s;
    s->in_list = true;
    ++length;
  }
  void push_back(Span* s) noexcept {
    s->next = nullptr;
    s->prev = tail;
    if (tail) tail->next = s; else head = s;
    tail = s;
    s->in_list = true;
    ++length;
  }
  void remove(Span* s) noexcept {
    if (s->prev) s->prev->next = s->next; else head = s->next;
    if (s->next) s->next->prev = s->prev; else tail = s->prev;
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
