// The blocks of a small span: how they leave it (a whole free list taken at
// once, or a run carved from never-used memory) and how they come back (one
// push each). Only the span's owner calls these (a thread, or the holder of
// the class's central lock for an unowned span).
//
// Every operation keeps the counting invariant of core/span.h. While a span
// is awake, `countdown` is the number of blocks out (`allocated`) and the
// free list holds `listed_mark - countdown` blocks, so taking the whole list
// is O(1): the count comes from the two numbers, not from a walk.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/free_list.h"
#include "core/size_classes.h"
#include "core/span.h"

namespace strata::detail {

// Blocks out of the span (see core/span.h), awake or sleeping.
inline std::uint32_t span_allocated(const Span* span) noexcept {
  if (!span->sleeping) return span->countdown;
  // Asleep with nothing to carve or unpark: every block is out but the
  // `wake_frees - countdown` on its list.
  return span->capacity - (class_info(span->size_class).wake_frees - span->countdown);
}

// Blocks on the span's own free list.
inline std::uint32_t span_listed(const Span* span) noexcept {
  return span->listed_mark - span_allocated(span);
}

inline std::uint32_t span_uncarved(const Span* span) noexcept {
  return static_cast<std::uint32_t>((span->carve_end - span->carve_next) / class_size(span->size_class));
}

inline bool span_has_free_blocks(const Span* span) noexcept {
  return span->free_list != nullptr || span->carve_next < span->carve_end || span->parked_blocks != 0;
}

// Takes the span's whole free list (awake span): returns its head and count.
inline void* take_free_list(Span* span, std::uint32_t& count) noexcept {
  void* head = span->free_list;
  count = span->listed_mark - span->countdown;
  span->free_list = nullptr;
  span->countdown = span->listed_mark;
  return head;
}

// Takes one block off the span's free list (awake span, list not empty).
inline void* pop_free_block(Span* span, std::uintptr_t key) noexcept {
  void* block = span->free_list;
  span->free_list = reinterpret_cast<void*>(encode_link(static_cast<FreeBlock*>(block)->encoded_next, key));
  ++span->countdown;
  return block;
}

// Carves up to `max` never-used blocks into a list in address order (the
// first malloc gets the lowest address: hardware prefetchers follow
// ascending streams), the last one linked to `then` (a list to go on with,
// or nullptr). Returns the head; `count` gets how many.
void* carve_blocks(Span* span, std::uint32_t max, std::uintptr_t key, std::uint32_t& count,
                   void* then = nullptr) noexcept;

// Counts one block back: true when the countdown reaches 0, or when it was 0
// already (it wraps: a block of a span whose blocks had all come back is
// freed, so some block was freed twice). On x86-64 one `sub` and one `jbe`,
// the same two instructions as a test for 0 alone (GCC cannot be asked for
// that branch in C).
inline bool count_block_back(std::uint32_t& countdown) noexcept {
#if defined(__x86_64__)
  asm goto("subl $1, %0\n\tjbe %l[event]" : "+m"(countdown) : : "cc" : event);
  return false;
event:
  return true;
#else
  return countdown-- <= 1;
#endif
}

// A countdown that wrapped (count_block_back): reports and aborts.
[[noreturn]] void countdown_wrapped(const void* block) noexcept;

// Gives a block back to its span: links it in, marks it free. Returns true
// when the countdown reached 0 (an awake span became empty, or a sleeping
// one collected enough frees to wake).
inline bool push_block(Span* span, void* block, std::uintptr_t key) noexcept {
  static_cast<FreeBlock*>(block)->encoded_next = encode_link(reinterpret_cast<std::uintptr_t>(span->free_list), key);
  set_free_mark(block, key);
  span->free_list = block;
  if (__builtin_expect(!count_block_back(span->countdown), 1)) return false;
  if (span->countdown == ~std::uint32_t{0}) countdown_wrapped(block);
  return true;
}

// Puts a sleeping span back to work: its countdown counts blocks out again.
inline void wake_span(Span* span) noexcept {
  span->countdown = span_allocated(span);
  span->sleeping = false;
}

// Sends a span with nothing to carve or unpark and fewer than wake_frees
// blocks on its list to sleep: frees only count until it is worth waking.
inline void sleep_span(Span* span) noexcept {
  std::uint32_t listed = span->listed_mark - span->countdown;
  span->sleeping = true;
  span->countdown = class_info(span->size_class).wake_frees - listed;
}

// An awake span whose blocks all came back, kept for reuse by the central
// cache or holding parked units (a thread's other empty spans are recycled,
// below): checked for a block still in use (as verify_empty_span) and its
// free list laid out again in address order in the same pass, so that its
// next allocation lists do not follow the order of the frees (after a burst
// of frees in random order that order is random, and every malloc would
// wait for a cache miss to read the next link). One pass over the span's
// carved blocks, which the check reads anyway.
void relist_empty_span(Span* span, std::uintptr_t key) noexcept;

// An awake span whose blocks all came back, kept by its owner for reuse:
// starts over as never-used memory without a walk (carving lays its blocks
// out again in address order when the span serves again, in one pass just
// before malloc reads them). Its blocks keep the free mark their free
// wrote, and carving does not write it again below `marked_end`, so a
// block still in use (some other block of the span was freed twice) fails
// malloc's mark check when it is carved, instead of the walk
// relist_empty_span does at once. That walk touched every block of the
// span a second time, between its free and its next malloc, long before
// the malloc (large bursts: another cache miss). A span with parked units
// is relisted instead (its blocks are not all marked).
void recycle_empty_span(Span* span, std::uintptr_t key) noexcept;

// Before recycled blocks are treated as never used (parking gives never-used
// pages back without looking at them): checks that each still holds its
// mark, then forgets them (carving will mark them again). A span that leaves
// its owner or its class is checked whole instead (verify_empty_span).
void forget_recycled_marks(Span* span, std::uintptr_t key) noexcept;

[[noreturn]] void report_block_in_use_of_empty_span(const void* block) noexcept;

// Prepares a span fresh from the page heap for class `cls` (no owner yet).
void format_small_span(Span* span, std::size_t cls) noexcept;

// A span whose counts say every block came back: the first block ever
// carved (recycled ones included) without the free mark, or nullptr. One
// without it is still in use, so some other block was freed twice (the
// check of core/free_list.h for frees that never reach a malloc). Skips parked units. A read of the
// span's blocks in address order; only when a span empties.
const void* unmarked_carved_block(const Span* span, std::uintptr_t key) noexcept;

// Aborts with a report when unmarked_carved_block finds a block in use.
void verify_empty_span(const Span* span, std::uintptr_t key) noexcept;

// Is `block` on the span's own free list? (Bounded walk: a corrupted list
// cannot loop it forever.) For the misuse checks, never for the fast paths.
bool span_list_contains(const Span* span, const void* block, std::uintptr_t key) noexcept;

// --- parked units: pages of a partly used span given back to the OS ----------

// Gives back every unit of `span` (awake, not the owner's current span) whose
// blocks are all on its free list: MADV_DONTNEED on their pages, the blocks
// leave the free list and become parked. Returns the bytes given back.
// Cost: one walk of the free list and one of the span's blocks; only on
// decay or on request, never on a fast path.
std::size_t park_free_units(Span* span, std::uintptr_t key) noexcept;

// Puts every parked block back on the span's free list (their pages come
// back zeroed, on first touch, when the links are written). Returns how many.
std::uint32_t unpark_blocks(Span* span, std::uintptr_t key) noexcept;

}  // namespace strata::detail
