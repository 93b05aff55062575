// Size classes: which block size serves a request, and how big the span cut
// into that class is.
//
// The table (docs/design.md has it in full):
//   16, 32, 48, ..., 128               (16-byte steps; no 8-byte class: glibc's
//                                       16-byte alignment, which programs rely on)
//   then 8 classes per power of two:    128 < s <= 256 in 16 B steps, ...,
//                                       512 < s <= 1 KiB in 64 B steps,
//   4 from 1 KiB to 8 KiB:              1 KiB < s <= 2 KiB in 256 B steps, ...,
//   8 again above:                      8 KiB < s <= 16 KiB in 1 KiB steps, ...,
//                                       16 KiB < s <= 32 KiB in 2 KiB steps
// so the waste above 128 B is below 12.5 % (25 % from 1 to 8 KiB), every
// block is 16-aligned, and every power of two up to 32 KiB is a class
// (blocks of power-of-two size are aligned to their size up to the page
// size, since spans start on pages).
//
// Lookup is O(1): one branch on size <= 1024 picks the index formula, one
// byte table gives the class (TCMalloc's two-range trick).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/constants.h"

namespace strata::detail {

inline constexpr std::size_t kNumClasses = 61;  // class 0 = "not a small class"

struct SizeClassInfo {
  std::uint32_t size;          // block size in bytes
  std::uint16_t span_pages;    // pages per span of this class
  // A *long* span of the class, for a thread that uses the class heavily
  // (kLongSpansAfter): twice the blocks, so half the per-span events (the
  // span running dry, sleeping, waking, emptying) per block. Equal to the
  // short span where that one holds 64 blocks or more already.
  std::uint16_t long_pages;
  std::uint16_t span_objects;  // blocks per span
  std::uint16_t long_objects;  // blocks per long span
  // (A span's wake count is its own: span_wake_frees, from its capacity.)
  std::uint64_t reciprocal;    // ceil(2^32 / size): offset / size without a division
  // ceil(2^64 / size): offset is a multiple of size exactly when
  // offset * multiple_test, modulo 2^64, is below it (Lemire, Kaser and
  // Kurz, "Faster remainder by direct computation", 2019); 0 for class 0.
  std::uint64_t multiple_test;
};
static_assert(sizeof(SizeClassInfo) == 32, "a power of two: the table is indexed with a shift");

// Blocks up to this size fill a span with as many blocks as its free bits
// hold (512: 8 KiB of 16 B blocks, 32 KiB of 64 B ones), larger ones aim at
// 16. A burst of small blocks then sits in 4x fewer spans, so that free, which
// reads each block's span, finds more of them in L1 (docs/design.md, *Size
// classes*); from 80 B up the larger spans cost peak RSS in thread churn.
inline constexpr std::size_t kFullSpanMaxSize = 64;
inline constexpr std::size_t kBlocksPerFullSpan = kMaxBlocksPerSpan;

// Long spans are twice the short span, for classes whose short span holds
// fewer than kLongSpanBelowBlocks blocks (144 B to 2 KiB: the classes whose
// spans run dry, sleep, wake and empty most often per block), and at most
// kLongSpanMaxBytes.
inline constexpr std::size_t kLongSpanBelowBlocks = 64;
inline constexpr std::size_t kLongSpanMaxBytes = std::size_t{64} << 10;

// A thread that owns fewer than this many spans of a class takes short ones
// for it, from then on long ones: a thread that holds a few blocks of a
// class (most classes of most threads) keeps one or two short spans of it,
// one in a burst of the class gets spans twice as long from the third on.
// From the second on, thread churn's threads (blocks of theirs held
// elsewhere keep a second span of a class in use) took 0.3 MiB more
// (docs/design.md, *Size classes*, long spans).
inline constexpr std::uint32_t kLongSpansAfter = 2;

// From 1 KiB to 8 KiB, 4 classes per power of two instead of 8. A thread
// keeps a partly used span of every class it uses, of 16-19 blocks (24 KiB to
// 128 KiB here), and when its live set shrinks and grows again, half a span
// or more of each class stays free: half as many classes there, half as much
// of that. Above 8 KiB the 8 classes stay, since a thread first serves such
// blocks as spans of their own, per class (docs/design.md, *Size classes*).
inline constexpr std::size_t kCoarseClassesFrom = 1024;
inline constexpr std::size_t kCoarseClassesTo = 8192;

namespace size_class_build {

constexpr std::size_t index_of(std::size_t size) noexcept {
  return size <= 1024 ? (size + 7) >> 3 : (size + 127 + (120 << 7)) >> 7;
}
inline constexpr std::size_t kIndexCount = index_of(kMaxSmallSize) + 1;

struct Tables {
  std::array<SizeClassInfo, kNumClasses> info{};
  std::array<std::uint8_t, kIndexCount> class_of_index{};
  std::size_t count = 0;
};

// Pages of a span of `size` blocks that aims at `target` bytes: at least
// one page, and enough that the tail after the last block wastes at most 1/8.
constexpr std::uint32_t pages_for_target(std::size_t size, std::size_t target) noexcept {
  std::size_t pages = (target + kPageSize - 1) / kPageSize;
  if (pages == 0) pages = 1;
  while ((pages * kPageSize) % size > (pages * kPageSize) / 8) ++pages;
  return static_cast<std::uint32_t>(pages);
}

constexpr std::uint32_t span_pages_for(std::size_t size) noexcept {
  // Aim at 16 objects (at most 1 MiB; 512 up to kFullSpanMaxSize), then grow
  // until the tail left over after the last object wastes at most 1/8 of the span.
  std::size_t target = size * (size <= kFullSpanMaxSize ? kBlocksPerFullSpan : 16);
  if (target > (std::size_t{1} << 20)) target = std::size_t{1} << 20;
  return pages_for_target(size, target);
}

// The long span (SizeClassInfo::long_pages): twice the short one where the
// short one holds fewer than kLongSpanBelowBlocks blocks and the long one
// fits kLongSpanMaxBytes; else the short span itself.
constexpr std::uint32_t long_pages_for(std::size_t size) noexcept {
  const std::uint32_t short_pages = span_pages_for(size);
  if (short_pages * kPageSize / size >= kLongSpanBelowBlocks) return short_pages;
  const std::uint32_t pages = pages_for_target(size, 2 * short_pages * kPageSize);
  return pages * kPageSize <= kLongSpanMaxBytes ? pages : short_pages;
}

// A span too full to be worth a word sleeps (its owner does not look at it);
// one asleep with some free blocks wakes once this many more came back: an
// eighth of the span, so that waking it pays for itself with a word of that
// many blocks, and a span with a few free blocks does not make every malloc
// and free take a slow path (docs/design.md). One asleep drained (no free
// block) counts its blocks out instead (core/span.h, SleepState); this is
// also how many free blocks its owner's look for a span settles for.
constexpr std::uint32_t wake_frees_for(std::uint32_t objects) noexcept {
  std::uint32_t n = objects / 8;
  return n + (n == 0);  // at least 1; no branch (the allocation slow path asks it of every span)
}

constexpr Tables build() noexcept {
  Tables t{};
  auto add = [&t](std::size_t size) {
    ++t.count;
    std::uint32_t pages = span_pages_for(size);
    std::uint32_t objects = static_cast<std::uint32_t>(pages * kPageSize / size);
    std::uint32_t long_pages = long_pages_for(size);
    std::uint32_t long_objects = static_cast<std::uint32_t>(long_pages * kPageSize / size);
    t.info[t.count] = SizeClassInfo{static_cast<std::uint32_t>(size),
                                    static_cast<std::uint16_t>(pages),
                                    static_cast<std::uint16_t>(long_pages),
                                    static_cast<std::uint16_t>(objects),
                                    static_cast<std::uint16_t>(long_objects),
                                    ((std::uint64_t{1} << 32) + size - 1) / size, ~std::uint64_t{0} / size + 1};
  };
  for (std::size_t s = 16; s <= 128; s += 16) add(s);
  for (std::size_t base = 128; base < kMaxSmallSize; base *= 2) {
    const std::size_t step = base >= kCoarseClassesFrom && base < kCoarseClassesTo ? base / 4 : base / 8;
    for (std::size_t s = base + step; s <= base * 2; s += step) add(s);
  }
  // Map every lookup index to the smallest class that holds its largest size.
  std::size_t cls = 1;
  for (std::size_t index = 0; index < kIndexCount; ++index) {
    std::size_t largest = index <= 128 ? index * 8 : (index << 7) - (120 << 7);
    while (cls <= t.count && t.info[cls].size < largest) ++cls;
    t.class_of_index[index] = static_cast<std::uint8_t>(cls);
  }
  return t;
}

inline constexpr Tables kTables = build();
static_assert(kTables.count + 1 == kNumClasses, "kNumClasses must match the generated table");
static_assert([] {
  for (std::size_t cls = 1; cls < kNumClasses; ++cls)
    if (kTables.info[cls].long_objects > kMaxBlocksPerSpan || kTables.info[cls].long_pages < kTables.info[cls].span_pages)
      return false;
  return true;
}(), "a long span's blocks fit its free bits");

}  // namespace size_class_build

// Class for a request of `size` bytes (size <= kMaxSmallSize).
constexpr std::size_t size_to_class(std::size_t size) noexcept {
  return size_class_build::kTables.class_of_index[size_class_build::index_of(size)];
}

// The same for size <= 1024, without the range test.
inline std::size_t small_size_to_class(std::size_t size) noexcept {
  return size_class_build::kTables.class_of_index[(size + 7) >> 3];
}

inline constexpr const SizeClassInfo& class_info(std::size_t cls) noexcept {
  return size_class_build::kTables.info[cls];
}

inline constexpr std::size_t class_size(std::size_t cls) noexcept {
  return size_class_build::kTables.info[cls].size;
}

// Blocks in a span of class `cls` that has `pages` pages (short or long).
inline constexpr std::uint32_t blocks_in_span(std::size_t cls, std::size_t pages) noexcept {
  const SizeClassInfo& info = size_class_build::kTables.info[cls];
  return pages == info.long_pages ? info.long_objects : info.span_objects;
}

// Is `offset` (from its span's start, less than the span's bytes: < 2^21)
// where a block of class `cls` starts? One multiply and a compare instead of
// a 64-bit division (tens of cycles on every remote free); exact for every
// offset below 2^49 (tests/unit/size_classes_test checks every offset of
// every span). Class 0 has no block start.
inline bool is_block_start(std::size_t offset, std::size_t cls) noexcept {
  const std::uint64_t test = size_class_build::kTables.info[cls].multiple_test;
  return static_cast<std::uint64_t>(offset) * test < test;
}

// The smallest class >= `size` whose blocks are all aligned to `alignment`
// (a power of two <= kPageSize), or 0 when no small class fits.
std::size_t aligned_size_to_class(std::size_t size, std::size_t alignment) noexcept;

}  // namespace strata::detail
