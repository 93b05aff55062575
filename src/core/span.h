// A span: a run of contiguous pages, the unit the page heap hands out.
//
// A span is in one of four states:
//   kDetached  being split or merged by the page heap (never seen unlocked);
//   kFree   in the page heap's free structures;
//   kSmall  cut into blocks of one size class;
//   kLarge  one block (a request over kMaxSmallSize, or an over-aligned one).
//
// A small span has exactly one owner at a time (the `owner` field):
//   a ThreadCache  - only that thread touches the span's free bits and counts;
//   nullptr        - the central cache of its class owns it; its fields are
//                    touched only under that class's lock.
// Other threads that free a block of the span never touch the span: they send
// the block to the owner (frontend/remote_free.h).
//
// Free blocks of a small span are bits, not lists: bit i of `free_bits` is
// set while block i is free and on the span (out-of-band metadata, as in
// jemalloc's slabs). Neither malloc nor free writes into a block (but in a
// *listing* thread, whose own frees go onto lists threaded through the
// blocks: frontend/recent_blocks.h), so blocks the program never wrote cost
// no memory, and a heap overflow cannot reach the spans' metadata. A free
// block is in exactly one of three places: the span's bits, its owner's
// allocation word for the class (a word of bits the owner took from the
// span, frontend/thread_cache.h), or its owner's recent list of the class.
//
// Counting invariant (the one the tests check), for an awake span:
//   countdown (blocks out) + popcount(free_bits) == capacity
// where "out" means in use by the program, on the owner's allocation word
// or recent list, or travelling back to the owner. A span asleep with free
// blocks counts frees until it wakes instead (below); one asleep drained
// counts blocks out, as an awake one does.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/constants.h"

namespace strata::detail {

// Why an owned span is off its owner's lists of spans to allocate from
// (Span::sleeping, core/span_blocks.h): it had too few free blocks to be
// worth a word when its owner last looked. Asleep with some free blocks, it
// wakes onto the owner's list once wake_frees more come back (a live set
// replaced at random: the blocks freed are the warm ones). Asleep drained
// (no free block: a burst used it up), it wakes only when every block is
// back, or when its owner looks for a span and finds its blocks (the
// oldest sleepers, frontend/thread_cache.cpp): a burst freed in order then
// costs one event per span, not a wake and an empty.
enum SleepState : std::uint8_t { kAwake = 0, kAsleep = 1, kAsleepDrained = 2 };

class ThreadCache;
struct Sample;

// Words of free bits per span: one bit per block of the classes with the
// most blocks per span (core/constants.h).
inline constexpr std::size_t kFreeWords = kMaxBlocksPerSpan / 64;

enum class SpanState : std::uint8_t { kDetached, kFree, kSmall, kLarge };

// Four cache lines: what the slow paths of other threads read (the first:
// frees of unowned spans, forwarded blocks, misuse checks; the common remote
// free reads the page map instead, core/page_map.h), what the owner writes
// on every free and refill (the second, with the rest of the free bits in
// the third: a thread reading the first line never contends with the
// owner's writes), and the page heap's bookkeeping (the fourth).
struct Span {
  // --- line 1: read by other threads' slow paths ---------------------------
  std::atomic<ThreadCache*> owner{nullptr};
  PageId first_page = 0;
  std::size_t page_count = 0;
  std::uint8_t size_class = 0;     // 0 for free and large spans
  SpanState state = SpanState::kDetached;  // kFree exactly while filed
  bool pages_zero = false;         // all pages known to read as zero
  bool fully_mapped = false;       // every page (not just the ends) maps here
  // heap profiling: the record of a sampled block (a kLarge span of one
  // block, profile/sampled_block.h), nullptr otherwise
  Sample* sample = nullptr;
  // page heap registry of small spans (statistics walk it)
  Span* small_next = nullptr;
  Span* small_prev = nullptr;
  std::uint64_t idle_since = 0;    // a kept empty span (thread's or central's): when it became empty

  // --- line 2 (and the start of 3): owner-only. The free fast path reads
  // and writes the count, where block 0 starts, the reciprocal that turns an
  // offset into a block index, and the bits; the owner's refills read and
  // write only this line too (the span's other lines are touched when it
  // changes lists), so a slow path costs one miss per span, not three ----
  // Frees until the owner must look at the span again (the fast path's
  // `--countdown == 0` test). Awake or asleep drained: the number of blocks
  // out (`allocated`), so 0 means every block came back. Asleep with free
  // blocks: frees still to come before it is worth waking
  // (SizeClassInfo::wake_frees). One counter serves both events, as
  // snmalloc's "needed" count does.
  alignas(64) std::uint32_t countdown = 0;
  SleepState sleeping = kAwake;    // unlisted until countdown reaches 0 (or the owner looks)
  bool kept_empty = false;         // empty, kept by its owner for reuse (bounded)
  bool any_parked = false;         // parked_units != 0 (read without touching line 3)
  std::uint8_t owner_class = 0;    // == size_class, for the owner's paths (line 1 is other threads')
  std::uint16_t capacity = 0;      // blocks per span (small; at most 512)
  std::uint16_t fresh_from = 0;    // blocks from this index on were never handed out (formatting resets it)
  std::uint32_t used_epoch = 0;    // owner's scavenge epoch when it last fed an allocation word
  std::uintptr_t block_base = 0;   // == start(): the free path reads one line, not two
  // ceil(2^32 / block size) << 26: one 64x64->128 multiply of a block's
  // offset gives its word (high half) and its bit (top 6 bits of the low
  // half), core/span_blocks.h.
  std::uint64_t index_multiplier = 0;
  // Bit i: block i is free and here. 512 bits (the spans of classes up to
  // 64 B, core/size_classes.h); the first four words share the line with the
  // fields above, so every class of at most 256 blocks per span (all over
  // 64 B) and the lower half of the others' touch one line per free and per
  // refill.
  std::uint64_t free_bits[kFreeWords] = {};
  std::uint64_t parked_units = 0;  // bit u: unit u's pages were given back (all its blocks free)
  std::uint8_t unit_shift = 0;     // parked units are 1 << unit_shift bytes

  // --- line 4: lists and the page heap's free structures -----------------
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

// The free fast path's and the owner's fields and the first four words of
// bits share one cache line; the metadata pool hands out whole lines.
static_assert(offsetof(Span, free_bits) - offsetof(Span, countdown) == 32 &&
                  offsetof(Span, countdown) % 64 == 0,
              "countdown, the owner's fields, block_base, index_multiplier and free_bits[0..3] fill one line");
static_assert(sizeof(Span) == 256, "four cache lines");

// A doubly linked intrusive list of spans (sentinel-free), with both ends
// known: owners file spans with free blocks at the front and the empty spans
// they keep at the back. Push and remove have no branch: the neighbour's link
// or the list's end that each writes is picked with a select (cmov), since
// whether a span has neighbours follows the program's data (a burst's spans
// going to sleep and emptying one after the other mispredicted those tests
// about once per span event: docs/design.md, *2026-12-07 (session 23)*).
struct SpanList {
  Span* head = nullptr;
  Span* tail = nullptr;
  std::size_t length = 0;

  // `span`'s link field at `offset` (next or prev), or `end` when span is
  // null: the address is formed from integers, not through a null pointer.
  static Span** link_or(Span* span, std::size_t offset, Span** end) noexcept {
    auto* link = reinterpret_cast<Span**>(reinterpret_cast<std::uintptr_t>(span) + offset);
#if defined(__x86_64__)
    // GCC keeps a branch for some of these selects (objdump); cmov by hand.
    asm("testq %[span], %[span]\n\tcmovzq %[end], %[link]" : [link] "+r"(link) : [span] "r"(span), [end] "r"(end) : "cc");
    return link;
#else
    return span != nullptr ? link : end;
#endif
  }

  void push(Span* s) noexcept;
  void push_back(Span* s) noexcept;
  void remove(Span* s) noexcept;
  Span* pop() noexcept {
    Span* s = head;
    if (s) remove(s);
    return s;
  }
  bool empty() const noexcept { return head == nullptr; }
};

inline void SpanList::push(Span* s) noexcept {
  s->prev = nullptr;
  s->next = head;
  *link_or(head, offsetof(Span, prev), &tail) = s;
  head = s;
  s->in_list = true;
  ++length;
}

inline void SpanList::push_back(Span* s) noexcept {
  s->next = nullptr;
  s->prev = tail;
  *link_or(tail, offsetof(Span, next), &head) = s;
  tail = s;
  s->in_list = true;
  ++length;
}

inline void SpanList::remove(Span* s) noexcept {
  Span* before = s->prev;
  Span* after = s->next;
  *link_or(before, offsetof(Span, next), &head) = after;
  *link_or(after, offsetof(Span, prev), &tail) = before;
  s->next = s->prev = nullptr;
  s->in_list = false;
  --length;
}

}  // namespace strata::detail
