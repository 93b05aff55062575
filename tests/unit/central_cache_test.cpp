// The central cache: spans of an exited thread become unowned, frees from
// other threads reach them in batches, and a span whose blocks all came back
// returns to the page heap.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/page_heap.h"
#include "central/central_cache.h"
#include "core/page_map.h"
#include "core/span_blocks.h"
#include "frontend/thread_cache.h"
#include "owned_spans.hpp"
#include "strata/strata.h"

using namespace strata::detail;
using strata_test::free_bits_set;

namespace {

// A size used by no other test in this binary, so its class is ours alone
// (at most 2 KiB: larger blocks of a thread that has taken few spans are
// spans of their own, not blocks of a class).
constexpr std::size_t kSize = 1500;

std::size_t spans_in_use() { return g_page_heap.stats().in_use_spans; }

}  // namespace

TEST(CentralCache, ExitedThreadsSpansAreUnownedThenReturnWhenEmpty) {
  const std::size_t cls = size_to_class(kSize);
  std::size_t base_spans = spans_in_use();
  std::vector<void*> blocks;
  std::thread owner([&] {
    for (int i = 0; i < 500; ++i) blocks.push_back(strata_malloc(kSize));
  });
  owner.join();
  // The owner is gone: every span it had is now the central cache's.
  CentralStats stats = g_central[cls].stats();
  // The first kLongSpansAfter spans short, the later ones long (core/size_classes.h).
  const SizeClassInfo& info = class_info(cls);
  const std::size_t in_short = kLongSpansAfter * info.span_objects;
  std::size_t spans_needed = kLongSpansAfter + (500 - in_short + info.long_objects - 1) / info.long_objects;
  EXPECT_GE(stats.spans, spans_needed);
  for (void* b : blocks) {
    Span* span = g_page_map.lookup(b);
    ASSERT_NE(span, nullptr);
    EXPECT_EQ(span->owner.load(), nullptr);
    EXPECT_EQ(g_page_map.owner_tag(b), 0u);
  }
  // Freed from this thread: they travel to the central cache in batches;
  // the last partial batch leaves with the next slow allocation.
  for (void* b : blocks) strata_free(b);
  void* probe = strata_malloc(kSize);  // a slow path: flushes the outbox
  strata_free(probe);
  EXPECT_LE(g_central[cls].stats().spans, 1u) << "every block came back, every span left but one kept empty";
  EXPECT_LE(spans_in_use(), base_spans + 2) << "spans went back to the page heap";
}

TEST(CentralCache, AdoptedSpansServeTheNextThread) {
  const std::size_t cls = size_to_class(kSize + 200);
  std::vector<void*> keep;
  std::thread owner([&] {
    std::vector<void*> tmp;
    for (int i = 0; i < 64; ++i) tmp.push_back(strata_malloc(kSize + 200));
    for (int i = 0; i < 64; ++i) {
      if (i % 2) keep.push_back(tmp[i]);
      else strata_free(tmp[i]);
    }
  });
  owner.join();
  CentralStats before = g_central[cls].stats();
  EXPECT_GE(before.spans, 1u);
  EXPECT_GE(before.free_blocks, 1u) << "half the blocks were freed by their owner";
  std::thread adopter([&] {
    ASSERT_NE(current_cache(), nullptr);  // a thread with a cache of its own adopts spans
    void* b = strata_malloc(kSize + 200);
    Span* span = g_page_map.lookup(b);
    EXPECT_EQ(span->state, SpanState::kSmall);
    EXPECT_NE(span->owner.load(), nullptr) << "the adopter owns the span now";
    strata_free(b);
  });
  adopter.join();
  for (void* b : keep) strata_free(b);
  void* probe = strata_malloc(kSize + 200);
  strata_free(probe);
}


// A class with no unowned span: a thread taking a new span does not wait
// for the class's lock (adopt reads partial_listed_ first). Before, this
// adopt waited until the lock was let go.
TEST(CentralCache, AdoptDoesNotWaitForTheLockOfAClassWithNothingToAdopt) {
  CentralCache central;
  central.mutex().lock();  // as a busy class's lock would be, by another thread
  std::atomic<bool> returned{false};
  Span* adopted = reinterpret_cast<Span*>(1);
  std::thread taker([&] {
    adopted = central.adopt(nullptr);
    returned.store(true);
  });
  for (int i = 0; i < 5000 && !returned.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool returned_while_held = returned.load();
  central.mutex().unlock();
  taker.join();
  EXPECT_TRUE(returned_while_held);
  EXPECT_EQ(adopted, nullptr);
}

TEST(CentralCache, BlockCountsAddUp) {
  // take a word / take one / free / give bits back keep: blocks out + free
  // bits == capacity, with the number of free blocks known from the
  // countdown, never a count of bits.
  const std::size_t cls = 1;  // 16 B: 512 blocks, eight words
  Span* span = g_page_heap.allocate(class_info(cls).span_pages, 1, SpanState::kSmall);
  ASSERT_NE(span, nullptr);
  init_small_span(span, cls, nullptr);
  auto check = [&] {
    EXPECT_EQ(span_free_count(span), free_bits_set(span));
    EXPECT_EQ(span_allocated(span) + free_bits_set(span), span->capacity);
  };
  check();
  EXPECT_EQ(span_free_count(span), 512u) << "a fresh span: every block free, none touched";
  TakenWord taken{};
  ASSERT_TRUE(take_free_word(span, taken));
  EXPECT_EQ(taken.word, 0u);
  EXPECT_EQ(taken.bits, ~std::uint64_t{0}) << "the lowest word, whole";
  EXPECT_EQ(taken.base, reinterpret_cast<std::uintptr_t>(span->start()));
  EXPECT_EQ(span_allocated(span), 64u);
  check();
  void* one = take_one_block(span);
  EXPECT_EQ(one, static_cast<char*>(span->start()) + 64 * 16) << "the lowest free block";
  EXPECT_EQ(span_allocated(span), 65u);
  check();
  // Three blocks of the taken word are handed out and freed; the rest goes back.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(free_block(span, reinterpret_cast<void*>(taken.base + i * 16)));
  EXPECT_EQ(span_allocated(span), 62u);
  check();
  EXPECT_FALSE(return_free_bits(span, taken.word, taken.bits & ~std::uint64_t{7}));
  EXPECT_EQ(span_allocated(span), 1u);
  check();
  EXPECT_TRUE(free_block(span, one)) << "the last block back empties the span";
  EXPECT_EQ(free_bits_set(span), 512u);
  verify_empty_span(span);
  g_page_heap.deallocate(span);
}

// Which word a refill takes (find_free_word): a dense lowest word as it
// is; else round the span from the word after the last one taken, or the
// densest for a span just made current; never-used words only when the
// used ones are empty.
TEST(SpanBlocks, SparseWordsAreTakenRoundTheSpan) {
  const std::size_t cls = 1;  // 16 B: 512 blocks, eight words
  Span* span = g_page_heap.allocate(class_info(cls).span_pages, 1, SpanState::kSmall);
  ASSERT_NE(span, nullptr);
  init_small_span(span, cls, nullptr);
  const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(span->start());
  auto free_blocks = [&](std::uint32_t word, std::uint32_t count, std::uint32_t first = 0) {
    for (std::uint32_t i = first; i < first + count; ++i)
      EXPECT_FALSE(free_block(span, reinterpret_cast<void*>(base + (word * 64 + i) * 16)));
  };
  TakenWord taken{};
  ASSERT_TRUE(take_free_word(span, taken));
  free_blocks(0, 1);
  EXPECT_EQ(find_free_word(span, 1), 0u) << "the used word before a never-used one";
  EXPECT_EQ(find_free_word(span, kDensestWord), 0u);
  for (std::uint32_t w = 0; w < 8; ++w) {  // every block out: all eight words used
    ASSERT_TRUE(take_free_word(span, taken));
    EXPECT_EQ(taken.word, w);
  }
  EXPECT_EQ(find_free_word(span, 3), 8u) << "no free block";
  free_blocks(0, 1);
  free_blocks(1, 2);
  free_blocks(3, 20);
  free_blocks(5, 9);
  free_blocks(6, 3);
  EXPECT_EQ(find_free_word(span, 0), 0u) << "from 0 on: the lowest (the central cache's order)";
  EXPECT_EQ(find_free_word(span, 2), 3u);
  EXPECT_EQ(find_free_word(span, 4), 5u);
  EXPECT_EQ(find_free_word(span, 7), 0u) << "round the span";
  EXPECT_EQ(find_free_word(span, 8), 0u) << "after the last word";
  EXPECT_EQ(find_free_word(span, kDensestWord), 3u);
  free_blocks(0, kDenseWordBlocks - 1, 1);  // word 0 now holds kDenseWordBlocks
  EXPECT_EQ(find_free_word(span, 4), 0u) << "a dense lowest word first";
  EXPECT_EQ(find_free_word(span, kDensestWord), 0u);
  g_page_heap.deallocate(span);
}

// Free bits past a span's last block never exist: a class whose blocks do
// not fill the last word (80 B: 102 blocks, a word and 38 bits).
TEST(SpanBlocks, NoFreeBitPastTheLastBlock) {
  const std::size_t cls = 5;
  ASSERT_EQ(class_size(cls), 80u);
  Span* span = g_page_heap.allocate(class_info(cls).span_pages, 1, SpanState::kSmall);
  ASSERT_NE(span, nullptr);
  init_small_span(span, cls, nullptr);
  EXPECT_EQ(span->free_bits[1], (std::uint64_t{1} << 38) - 1);
  for (std::size_t w = 2; w < kFreeWords; ++w) EXPECT_EQ(span->free_bits[w], 0u);
  std::vector<void*> blocks;
  while (void* b = span_has_free_blocks(span) ? take_one_block(span) : nullptr) blocks.push_back(b);
  ASSERT_EQ(blocks.size(), 102u);
  EXPECT_TRUE(std::is_sorted(blocks.begin(), blocks.end())) << "lowest addresses first";
  EXPECT_EQ(blocks.back(), static_cast<char*>(span->start()) + 101 * 80);
  for (std::size_t i = 0; i + 1 < blocks.size(); ++i) EXPECT_FALSE(free_block(span, blocks[i]));
  EXPECT_TRUE(free_block(span, blocks.back()));
  g_page_heap.deallocate(span);
}

// A span's last unit usually ends in the tail its last block leaves (8 KiB of
// 80-byte blocks: 102 blocks, 32 bytes left): it goes back like any other
// unit when the blocks that overlap it are free. A unit goes back only when
// every block overlapping it is free, and its blocks stay free in the bits:
// handed out again, they fault their pages back in.
TEST(SpanBlocks, EveryFreeUnitIsParkedAndItsBlocksStayFree) {
  const std::size_t cls = 5;
  ASSERT_EQ(class_size(cls), 80u);
  Span* span = g_page_heap.allocate(class_info(cls).span_pages, 1, SpanState::kSmall);
  ASSERT_NE(span, nullptr);
  init_small_span(span, cls, nullptr);
  ASSERT_EQ(span->bytes(), std::size_t{8192});
  std::vector<void*> blocks;
  while (span_has_free_blocks(span)) blocks.push_back(take_one_block(span));
  for (void* b : blocks) std::memset(b, 0x5a, 80);  // resident
  // Block 0 stays in use: unit 0 must stay, unit 1 (the tail's) must go.
  for (std::size_t i = 1; i < blocks.size(); ++i) EXPECT_FALSE(free_block(span, blocks[i]));
  std::size_t released = park_free_units(span);
  EXPECT_EQ(span->parked_units, std::uint64_t{2}) << "only the second unit is free";
  EXPECT_EQ(released, std::size_t{4096});
  EXPECT_EQ(park_free_units(span), 0u) << "a parked unit is not given back twice";
  EXPECT_EQ(span_free_count(span), 101u) << "parked blocks are still free";
  EXPECT_EQ(static_cast<unsigned char*>(blocks[100])[0], 0u) << "their pages came back zeroed";
  TakenWord taken{};
  ASSERT_TRUE(take_free_word(span, taken));
  EXPECT_EQ(taken.word, 0u);
  ASSERT_TRUE(take_free_word(span, taken));
  EXPECT_EQ(taken.word, 1u);
  EXPECT_EQ(span->parked_units, 0u) << "taking blocks of a parked unit forgets it";
  EXPECT_FALSE(return_free_bits(span, 1, taken.bits));
  g_page_heap.deallocate(span);
}

// Never-used blocks of 1 KiB and more come an OS page at a time on pages
// never touched (the page heap's fresh or decommitted pages), 16 KiB at a
// time on pages the heap had in use before (not pages_zero: resident
// already), and a block larger than that still one at a time.
TEST(SpanBlocks, NeverUsedLargeBlocksComeAPageAtATimeOnlyWherePagesAreNotResident) {
  auto blocks_of_first_word = [](std::size_t size, bool pages_zero) {
    const std::size_t cls = size_to_class(size);
    Span* span = g_page_heap.allocate(class_info(cls).span_pages, 1, SpanState::kSmall);
    EXPECT_NE(span, nullptr);
    if (span == nullptr) return -1;
    span->pages_zero = pages_zero;
    init_small_span(span, cls, nullptr);
    EXPECT_EQ(span->block_base % 4096, 0u);
    TakenWord taken{};
    EXPECT_TRUE(choose_free_word(span, false, taken));
    g_page_heap.deallocate(span);
    return __builtin_popcountll(taken.bits);
  };
  EXPECT_EQ(blocks_of_first_word(1024, true), 4) << "fresh pages: one OS page of 1 KiB blocks";
  EXPECT_EQ(blocks_of_first_word(1024, false), 16) << "resident pages: 16 KiB of them";
  EXPECT_EQ(blocks_of_first_word(20000, false), 1) << "a 20 KB buffer still one at a time";
}
