// The size-class table: every size maps, the waste bounds, alignment,
// monotonic classes, span shapes, and the fast path's offset table.
#include <gtest/gtest.h>

#include "api/allocator.h"
#include "core/size_classes.h"

using namespace strata::detail;

TEST(SizeClasses, EverySizeMapsToAClassThatHoldsIt) {
  for (std::size_t size = 0; size <= kMaxSmallSize; ++size) {
    std::size_t cls = size_to_class(size);
    ASSERT_GE(cls, 1u) << size;
    ASSERT_LT(cls, kNumClasses) << size;
    ASSERT_GE(class_size(cls), size) << size;
    // The smallest such class: the one below is too small.
    if (cls > 1) {
      ASSERT_LT(class_size(cls - 1), size) << size;
    }
  }
}

// 8 classes per power of two, but 4 from 1 KiB to 8 KiB (fewer partly used
// spans per thread where the spans are largest: docs/design.md).
TEST(SizeClasses, ClassesPerPowerOfTwo) {
  auto classes_in = [](std::size_t low, std::size_t high) {
    std::size_t n = 0;
    for (std::size_t cls = 1; cls < kNumClasses; ++cls) n += class_size(cls) > low && class_size(cls) <= high;
    return n;
  };
  EXPECT_EQ(classes_in(512, 1024), 8u);
  EXPECT_EQ(classes_in(1024, 2048), 4u);
  EXPECT_EQ(classes_in(2048, 4096), 4u);
  EXPECT_EQ(classes_in(4096, 8192), 4u);
  EXPECT_EQ(classes_in(8192, 16384), 8u);
  EXPECT_EQ(classes_in(16384, 32768), 8u);
}

TEST(SizeClasses, WasteBounds) {
  for (std::size_t size = 1; size <= kMaxSmallSize; ++size) {
    std::size_t waste = class_size(size_to_class(size)) - size;
    if (size > kCoarseClassesFrom && size <= kCoarseClassesTo) {
      ASSERT_LE(waste * 4, size) << "over 25 % waste at " << size;
    } else if (size > 128) {
      ASSERT_LE(waste * 8, size) << "over 12.5 % waste at " << size;
    } else {
      // 16-byte alignment of every block >= 16 B costs up to 15 B here
      // (docs/design.md: why strata keeps glibc's alignment).
      ASSERT_LE(waste, 15u) << size;
    }
  }
}

TEST(SizeClasses, AlignmentAndMonotonicity) {
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    std::size_t size = class_size(cls);
    if (size >= 16) {
      EXPECT_EQ(size % 16, 0u) << size;
    }
    if (cls > 1) {
      EXPECT_GT(size, class_size(cls - 1));
    }
  }
  EXPECT_EQ(class_size(1), 16u) << "every block has room for its link and free mark";
  for (std::size_t p = 16; p <= kMaxSmallSize; p *= 2)
    EXPECT_EQ(class_size(size_to_class(p)), p) << "power of two " << p << " is a class";
  EXPECT_EQ(class_size(kNumClasses - 1), kMaxSmallSize);
}

TEST(SizeClasses, SpanShapes) {
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    const SizeClassInfo& info = class_info(cls);
    std::size_t span_bytes = std::size_t{info.span_pages} * kPageSize;
    EXPECT_EQ(info.span_objects, span_bytes / info.size);
    EXPECT_GE(info.span_objects, 1u);
    EXPECT_LE((span_bytes % info.size) * 8, span_bytes) << "tail waste of class " << cls;
    EXPECT_LE(info.span_objects, kFreeWords * 64) << "every block has a free bit";
    if (info.size <= kFullSpanMaxSize)  // a burst of the smallest blocks sits in few spans
      EXPECT_EQ(info.span_objects, kBlocksPerFullSpan) << "class " << cls;
    else
      EXPECT_LE(info.span_objects, 128u) << "class " << cls << " (larger spans cost peak RSS)";
  }
  EXPECT_EQ(kBlocksPerFullSpan, kFreeWords * 64) << "as many blocks as the free bits hold";
}

TEST(SizeClasses, FastPathOffsetTableAgreesWithTheClassTable) {
  for (std::size_t size = 0; size <= 1024; ++size) {
    EXPECT_EQ(kSmallOffsets.offset[size], word_offset(size_to_class(size))) << size;
    EXPECT_EQ(class_of_offset(kSmallOffsets.offset[size]), size_to_class(size));
  }
}

// 4K aliasing (frontend/thread_cache.h, kWordsOffset): the fields malloc's
// fast path loads from a class's word (bits, base, size: 24 bytes of the
// 4096-aligned cache) never share address bits 0-11 with the first 8 bytes
// of a block of any class whose size is a multiple of 32, in short or long
// page-aligned spans. At offset 0 the 1 KiB class's word sat where every
// fourth 1 KiB block starts.
TEST(SizeClasses, AllocationWordsNeverShareLowAddressBitsWithBlockStarts) {
  constexpr std::size_t kAliasing = 4096;  // loads and stores compare bits 0-11 first
  for (std::size_t fast = 1; fast < kNumClasses && class_size(fast) <= 1024; ++fast) {
    const std::size_t word = word_offset(fast) % kAliasing;
    for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
      const std::size_t size = class_size(cls);
      if (size % 32 != 0) continue;
      for (std::uint32_t objects : {class_info(cls).span_objects, class_info(cls).long_objects})
        for (std::size_t i = 0; i < objects; ++i) {
          const std::size_t start = i * size % kAliasing;
          ASSERT_FALSE(start < word + 24 && word < start + 8)
              << "class " << fast << "'s word and block " << i << " of class " << cls << " (" << size << " B)";
        }
    }
  }
}

TEST(SizeClasses, AlignedClassesHoldTheirAlignment) {
  for (std::size_t alignment = 32; alignment <= kPageSize; alignment *= 2)
    for (std::size_t size = 1; size <= 20000; size += 97) {
      std::size_t cls = aligned_size_to_class(size, alignment);
      ASSERT_NE(cls, 0u);
      EXPECT_GE(class_size(cls), size);
      EXPECT_EQ(class_size(cls) % alignment, 0u);
    }
  EXPECT_EQ(aligned_size_to_class(16, 2 * kPageSize), 0u) << "over a page goes to the page heap";
  EXPECT_EQ(aligned_size_to_class(kMaxSmallSize + 1, 64), 0u);
}

TEST(SizeClasses, BlockStartsAreFoundWithoutADivision) {
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    const SizeClassInfo& info = class_info(cls);
    std::size_t span_bytes = std::size_t{info.span_pages} * kPageSize;
    for (std::size_t offset = 0; offset < span_bytes; ++offset)
      ASSERT_EQ(is_block_start(offset, cls), offset % info.size == 0) << "class " << cls << " offset " << offset;
  }
  for (std::size_t offset : {0u, 1u, 16u, 4096u}) EXPECT_FALSE(is_block_start(offset, 0)) << offset;
}
