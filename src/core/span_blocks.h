// The blocks of a small span, as bits: how they leave it (a whole word of
// bits taken at once by the owner's refill, or one block for the central
// cache) and how they come back (one bit set each). Only the span's owner
// calls these (a thread, or the holder of the class's central lock for an
// unowned span).
//
// Every operation keeps the counting invariant of core/span.h: while a span
// is awake, `countdown` is the number of blocks out and the bits hold the
// rest, so how many blocks are free is `capacity - countdown`, no walk.
// None of them reads or writes a block.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/hot_settings.h"
#include "core/size_classes.h"
#include "core/span.h"

namespace strata::detail {

// Build option STRATA_CHECK_DOUBLE_FREE (on with CMake's STRATA_HARDENED):
// the free fast path tests the block's bit before it sets it (a double free
// is reported at the second free). Off, double frees are caught only in
// checking mode (STRATA_CHECK=1) and by the counts when a span empties.
#ifndef STRATA_CHECK_DOUBLE_FREE
#define STRATA_CHECK_DOUBLE_FREE 1
#endif

// Set bits of a word: the popcnt instruction where the CPU has it, else
// shifts and masks (x86-64's baseline has no popcnt, and GCC would call
// libgcc's slower one; every refill counts the blocks of the word it takes).
inline std::uint32_t count_bits(std::uint64_t x) noexcept {
#if defined(__x86_64__)
  if (__builtin_expect(g_hot.has_popcnt, 1)) {
    std::uint64_t n;
    asm("popcntq %1, %0" : "=r"(n) : "rm"(x) : "cc");
    return static_cast<std::uint32_t>(n);
  }
#endif
  x -= (x >> 1) & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
  return static_cast<std::uint32_t>((x * 0x0101010101010101ull) >> 56);
}

// Frees that make a sleeping span worth waking: an eighth of its blocks
// (short and long spans of a class differ; size_class_build::wake_frees_for).
inline std::uint32_t span_wake_frees(const Span* span) noexcept {
  return size_class_build::wake_frees_for(span->capacity);
}

// Blocks out of the span (see core/span.h), awake or sleeping.
inline std::uint32_t span_allocated(const Span* span) noexcept {
  if (span->sleeping != kAsleep) return span->countdown;
  // Asleep with free blocks: every block is out but the `wake_frees -
  // countdown` free.
  return span->capacity - (span_wake_frees(span) - span->countdown);
}

// Words of free bits the span's blocks use.
inline std::uint32_t span_words(const Span* span) noexcept { return (span->capacity + 63) / 64; }

// Free blocks in the span's bits.
inline std::uint32_t span_free_count(const Span* span) noexcept { return span->capacity - span_allocated(span); }

inline bool span_has_free_blocks(const Span* span) noexcept { return span_allocated(span) < span->capacity; }

// index_multiplier = reciprocal << kIndexShift: offset * index_multiplier,
// as 128 bits, is the block index << 58 (index = offset * reciprocal >> 32,
// exact for block starts: core/size_classes.h), so its high half is the
// word (index >> 6) and the top 6 bits of its low half are the bit.
inline constexpr unsigned kIndexShift = 26;

// Block index of `block` (a block start of the span: exact; an interior
// pointer: its block, or the next one near the end of a block over 2 KiB).
inline std::uint64_t block_index(const Span* span, const void* block) noexcept {
  std::uint64_t offset = reinterpret_cast<std::uintptr_t>(block) - span->block_base;
  return (offset * (span->index_multiplier >> kIndexShift)) >> 32;
}

// Is `block` (inside the small span) where one of its blocks starts?
inline bool starts_a_block(const Span* span, const void* block) noexcept {
  return is_block_start(reinterpret_cast<std::uintptr_t>(block) - address_of(span->first_page), span->size_class);
}

// Where a block start's bit lives: the word of free_bits and the bit in it,
// from the one multiply set_free_bit makes (kIndexShift). set_free_bit does
// not call these two: built from them, the free fast path gains an
// instruction (GCC adds the bits' offset to the word index; objdump).
struct BlockPlace {
  std::uint64_t word;
  std::uint64_t bit;
};
inline BlockPlace place_of(const Span* span, const void* block) noexcept {
  std::uint64_t low = reinterpret_cast<std::uintptr_t>(block) - span->block_base;
#if defined(__x86_64__)
  std::uint64_t high;  // mulq by hand: GCC's 128-bit product goes through the stack
  asm("mulq %[multiplier]" : "+a"(low), "=d"(high) : [multiplier] "m"(span->index_multiplier) : "cc");
#else
  const unsigned __int128 product = static_cast<unsigned __int128>(low) * span->index_multiplier;
  const std::uint64_t high = static_cast<std::uint64_t>(product >> 64);
  low = static_cast<std::uint64_t>(product);
#endif
  return {high, low >> 58};
}

// Sets bit `place.bit` of free_bits[place.word] and tells whether it was
// set already (set_free_bit for a place known).
inline bool set_free_bit_at(Span* span, BlockPlace place) noexcept {
  std::uint64_t& slot = span->free_bits[place.word];
  std::uint64_t bits = slot;
  bool was_set;
#if defined(__x86_64__)
  asm("btsq %[bit], %[bits]" : [bits] "+r"(bits), "=@ccc"(was_set) : [bit] "r"(place.bit));
#else
  was_set = ((bits >> place.bit) & 1) != 0;
  bits |= std::uint64_t{1} << place.bit;
#endif
  slot = bits;
  return was_set;
}

inline void* block_at(const Span* span, std::uint64_t index) noexcept {
  return reinterpret_cast<void*>(span->block_base + index * class_size(span->owner_class));
}

inline bool block_is_free(const Span* span, const void* block) noexcept {
  std::uint64_t index = block_index(span, block);
  return index < span->capacity && ((span->free_bits[index >> 6] >> (index & 63)) & 1) != 0;
}

// A word of free bits taken out of a span: `bits` (bit i: block
// `base + i * size`), and which word of the span it was.
struct TakenWord {
  std::uint64_t bits;
  std::uintptr_t base;
  std::uint32_t word;
  // Never-used blocks handed out an OS page (16 KiB on resident pages) at a
  // time (choose_free_word): the word is cut short by that rule, not by
  // frees, so its size says nothing about how sparse the thread's spans are
  // (listing's window).
  bool paged_fresh;
};

// Forgets the parked units that blocks [first, last) overlap (they are
// handed out again and will be touched): statistics count parked pages.
void unpark_blocks(Span* span, std::uint64_t first, std::uint64_t last) noexcept;

// Blocks at least this large are worth a slow path each rather than a
// page touched in vain: a word of them takes blocks handed out before
// (their pages resident) when it has any, and never-used ones one OS page at
// a time.
inline constexpr std::size_t kReuseFirstSize = 1024;

// How far past the start of its OS page a word of never-used blocks of at
// least kReuseFirstSize reaches when the span's pages were in use before
// (not pages_zero: the page heap recycled them, resident): no page to spare
// there, but a buffer freed and allocated again should still get its own
// block back, not walk the span. 4 pages: 16 blocks of 1 KiB per slow path
// instead of 4 in a burst through recycled spans; a block of 16 KiB or more
// still comes one at a time (a smaller buffer freed and allocated again
// cycles through the few blocks that start in those 16 KiB).
inline constexpr std::uintptr_t kResidentFreshReach = 16384;

// A word with at least this many free blocks is taken as it is when it is
// the span's lowest (find_free_word).
inline constexpr std::uint32_t kDenseWordBlocks = 8;

// find_free_word's `start` for a span that just became the class's current
// one: its densest word.
inline constexpr std::uint32_t kDensestWord = ~std::uint32_t{0};

// The word a refill takes from the span: the index of a word with free
// bits, span_words(span) when there is none. Among the words whose blocks
// were handed out before (below `fresh_from`):
//   - the lowest non-empty one, when it holds kDenseWordBlocks blocks or
//     more: low addresses first, and blocks that come back in bulk (a
//     burst freed, a consumer's parcels) are reused while their lines are
//     still in the cache;
//   - else the next non-empty one from `start` on, round the span (the
//     word after the one taken last), or the densest (kDensestWord).
// A thread's own random frees land one or two to a word, in the words it
// took last; the lowest word alone (the rule until 2026-11-27) was then
// mostly the block or two freed since, a slow path each. mimalloc-bench's
// alloc-test took words of 2.3 blocks (58 % of them of one) and ran 73
// allocator instructions per operation against tcmalloc's 36; round the
// span each word has a whole round to fill up (docs/design.md,
// *2026-11-27 (session 10)*). Words of never-used blocks only when the
// used ones have no free block, lowest first: they cost memory once
// written.
inline std::uint32_t find_free_word(const Span* span, std::uint32_t start) noexcept {
  const std::uint32_t words = span_words(span);
  const std::uint32_t used = (span->fresh_from + 63u) / 64u;  // at most `words`
  std::uint32_t lowest = 0;
  while (lowest < used && span->free_bits[lowest] == 0) ++lowest;
  if (lowest == used) {  // none of the used words: the never-used ones
    while (lowest < words && span->free_bits[lowest] == 0) ++lowest;
    return lowest;
  }
  std::uint32_t most = count_bits(span->free_bits[lowest]);
  if (most >= kDenseWordBlocks) return lowest;
  if (start == kDensestWord) {
    std::uint32_t densest = lowest;
    for (std::uint32_t w = lowest + 1; w < used; ++w)
      if (const std::uint32_t n = count_bits(span->free_bits[w]); n > most) {
        most = n;
        densest = w;
      }
    return densest;
  }
  for (std::uint32_t w = start; w < used; ++w)
    if (span->free_bits[w] != 0) return w;
  return lowest;  // round the span: the first non-empty word from 0 on
}

// The free bits an allocation word would take from the span: its word
// find_free_word picks, from `start`. Blocks never handed out (from
// `fresh_from` on) cost memory when the program writes them, so two more
// rules keep the word from reaching for them early (a block the allocator
// hands out is a page the program writes):
//   - with `one_page` (a thread that is not busy yet), only the never-used
//     blocks that start in the OS page of the first of them: a short
//     program touches a page per class it uses, not a word's worth;
//   - blocks of at least kReuseFirstSize: only blocks handed out before
//     when the word has any, else never-used ones one OS page at a time (a
//     program that frees and allocates one 20 KiB buffer over and over
//     keeps reusing it, instead of walking through the span's 16).
// Blocks of at most 64 B: a word spans at most two OS pages anyway. False
// when the span has no free block. Changes nothing: take_word commits.
inline bool choose_free_word(const Span* span, bool one_page, TakenWord& taken,
                             std::uint32_t start = 0) noexcept {
  const std::uint32_t w = find_free_word(span, start);
  if (w == span_words(span)) return false;
  std::uint64_t bits = span->free_bits[w];
  const std::uintptr_t size = class_size(span->owner_class);
  taken.base = span->block_base + std::uintptr_t{w} * 64 * size;
  const std::uint64_t first = std::uint64_t{w} * 64;
  const bool large = size >= kReuseFirstSize;
  taken.paged_fresh = false;
  // Never-used blocks in this word at all first: once a span's blocks
  // have all been handed out, the test is false for good (predictable),
  // where the class's size alternates between calls.
  if (span->fresh_from < span->capacity && span->fresh_from < first + 64 && size > 64 && (one_page || large)) {
    std::uint64_t used = span->fresh_from > first ? (std::uint64_t{1} << (span->fresh_from - first)) - 1 : 0;
    std::uint64_t fresh = bits & ~used;
    if (large && (bits & used) != 0) {
      bits &= used;
    } else if (fresh != 0) {
      taken.paged_fresh = (bits & used) == 0;
      constexpr std::uintptr_t kOsPage = 4096;
      const std::uintptr_t cut = large && !span->pages_zero ? kResidentFreshReach : kOsPage;
      std::uintptr_t lowest = taken.base + static_cast<std::uintptr_t>(__builtin_ctzll(fresh)) * size;
      std::uintptr_t reach = (lowest & ~(kOsPage - 1)) + cut - taken.base + size - 1;
      std::uint64_t fits = (reach * (span->index_multiplier >> kIndexShift)) >> 32;  // reach / size
      if (fits < 64) bits &= used | ((std::uint64_t{1} << fits) - 1);
    }
  }
  taken.bits = bits;
  taken.word = w;
  return true;
}

// Takes the chosen bits out of the span: their blocks count as out.
inline void take_word(Span* span, const TakenWord& taken, std::uint32_t blocks) noexcept {
  span->free_bits[taken.word] &= ~taken.bits;
  span->countdown += blocks;
  std::uint32_t end = taken.word * 64 + 64 - static_cast<std::uint32_t>(__builtin_clzll(taken.bits));
  if (end > span->fresh_from) span->fresh_from = static_cast<std::uint16_t>(end);
  if (__builtin_expect(span->any_parked, 0))
    unpark_blocks(span, taken.word * 64 + static_cast<std::uint32_t>(__builtin_ctzll(taken.bits)), end);
}

// choose_free_word and take_word at once.
inline bool take_free_word(Span* span, TakenWord& taken, bool one_page = false, std::uint32_t start = 0) noexcept {
  if (!choose_free_word(span, one_page, taken, start)) return false;
  take_word(span, taken, count_bits(taken.bits));
  return true;
}

// Gives back what is left of a taken word (`bits` of word `word`): true when
// the countdown reached 0 (an awake span became empty). A bit already set
// is a block freed while it was on the word (a double free): reported.
bool return_free_bits(Span* span, std::uint32_t word, std::uint64_t bits) noexcept;

// Takes the lowest free block (central cache: one block at a time); the
// span must have one.
void* take_one_block(Span* span) noexcept;

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

// A countdown that wrapped (count_block_back): some block of `span` was
// freed after all of them had come back. Reports and aborts.
[[noreturn]] void countdown_wrapped(const Span* span) noexcept;

// A block whose bit was already set: reports and aborts. Not marked
// noreturn, so that the free fast path reaches it with a jump (no stack
// frame there).
void block_freed_twice(const void* block) noexcept;

// Sets the bit of `block` (a block start of the span) and tells whether it
// was set already: one multiply gives word and bit (kIndexShift), and on
// x86-64 `bts` leaves the old bit in the carry, so the double-free test is
// one `jc`. The free fast path: no read or write of the block itself.
inline bool set_free_bit(Span* span, const void* block) noexcept {
  std::uint64_t offset = reinterpret_cast<std::uintptr_t>(block) - span->block_base;
  bool was_set;
#if defined(__x86_64__)
  // In one piece, so that the word's address is the multiply's high half
  // as it comes (rdx), without copies. Volatile: it stores to the span,
  // which its outputs do not show (a build that ignores was_set would
  // otherwise drop it).
  std::uint64_t high, word;
  asm volatile("mulq %[multiplier]\n\t"
      "shrq $58, %%rax\n\t"
      "movq %c[bits](%[span],%%rdx,8), %[word]\n\t"
      "btsq %%rax, %[word]\n\t"
      "movq %[word], %c[bits](%[span],%%rdx,8)"
      : "+a"(offset), "=&d"(high), [word] "=&r"(word), "=@ccc"(was_set)
      : [multiplier] "m"(span->index_multiplier), [span] "r"(span), [bits] "i"(offsetof(Span, free_bits))
      : "memory");
#else
  unsigned __int128 product = static_cast<unsigned __int128>(offset) * span->index_multiplier;
  std::uint64_t& slot = span->free_bits[static_cast<std::uint64_t>(product >> 64)];
  std::uint64_t bit = static_cast<std::uint64_t>(product) >> 58;
  was_set = ((slot >> bit) & 1) != 0;
  slot |= std::uint64_t{1} << bit;
#endif
  return was_set;
}

// Gives a block back to its span: sets its bit. Returns true when the
// countdown reached 0 (an awake span became empty, or a sleeping one
// collected enough frees to wake). Touches the span's line, never the block.
inline bool free_block(Span* span, void* block) noexcept {
  if (__builtin_expect(set_free_bit(span, block), 0) && STRATA_CHECK_DOUBLE_FREE) block_freed_twice(block);
  if (__builtin_expect(!count_block_back(span->countdown), 1)) return false;
  if (span->countdown == ~std::uint32_t{0}) countdown_wrapped(span);
  return true;
}

// Puts a sleeping span back to work: its countdown counts blocks out again.
inline void wake_span(Span* span) noexcept {
  span->countdown = span_allocated(span);
  span->sleeping = kAwake;
}

// Sends an awake span with fewer than wake_frees free blocks to sleep
// (core/span.h, SleepState): with some, frees only count until it is worth
// waking; with none, its countdown goes on counting blocks out.
inline void sleep_span(Span* span) noexcept {
  std::uint32_t free = span->capacity - span->countdown;
  if (free == 0) {
    span->sleeping = kAsleepDrained;
    return;
  }
  span->sleeping = kAsleep;
  span->countdown = span_wake_frees(span) - free;
}

// Prepares a span fresh from the page heap (or an empty one made over) for
// class `cls`: every block free, no owner yet.
void format_small_span(Span* span, std::size_t cls) noexcept;

// A span whose counts say every block came back: are all its bits set? A
// block still in use means some other block was freed twice while it sat
// on its owner's allocation word (the one double free the bits cannot
// see at once); reported. One popcount per word, only when a span empties.
void verify_empty_span(const Span* span) noexcept;

// --- parked units: pages of a partly used span given back to the OS ----------

// Gives back every unit of `span` (awake; its taken word, if any, returned)
// whose blocks are all free and not yet given back: MADV_DONTNEED on their
// pages. The blocks stay free in the bits: handed out again, their pages
// come back zeroed on first touch. Returns the bytes given back. Cost: a
// pass over the span's units; only on decay or on request.
std::size_t park_free_units(Span* span) noexcept;

}  // namespace strata::detail
