// The central cache: spans of an exited thread become unowned, frees from
// other threads reach them in batches, and a span whose blocks all came back
// returns to the page heap.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "backend/page_heap.h"
#include "central/central_cache.h"
#include "core/page_map.h"
#include "core/span_blocks.h"
#include "frontend/thread_cache.h"
#include "strata/strata.h"

using namespace strata::detail;

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
  std::size_t spans_needed = (500 + class_info(cls).span_objects - 1) / class_info(cls).span_objects;
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

TEST(CentralCache, BlockCountsAddUp) {
  // carve / take / push keep: allocated + listed + uncarved + parked == capacity,
  // with the free list's length known from two numbers, never a walk.
  const std::size_t cls = 10;
  Span* span = g_page_heap.allocate(class_info(cls).span_pages, 1, SpanState::kSmall);
  ASSERT_NE(span, nullptr);
  init_small_span(span, cls, nullptr);
  auto walk = [&] {
    std::uint32_t n = 0;
    for (void* b = span->free_list; b; b = list_next(b)) ++n;
    return n;
  };
  auto check = [&] {
    EXPECT_EQ(span_listed(span), walk());
    EXPECT_EQ(span_allocated(span) + span_listed(span) + span_uncarved(span) + span->parked_blocks, span->capacity);
  };
  std::uint32_t carved = 0;
  void* head = carve_blocks(span, 7, g_list_key, carved);
  EXPECT_EQ(carved, 7u);
  EXPECT_EQ(span_allocated(span), 7u);
  check();
  void* b = head;
  for (int i = 0; i < 3; ++i) {
    void* next = list_next(b);
    EXPECT_FALSE(push_block(span, b, g_list_key));
    b = next;
  }
  EXPECT_EQ(span_allocated(span), 4u);
  check();
  std::uint32_t taken = 0;
  take_free_list(span, taken);
  EXPECT_EQ(taken, 3u) << "the list's length came from the counts";
  EXPECT_EQ(span_allocated(span), 7u);
  check();
  g_page_heap.deallocate(span);
}

// A span's last unit usually ends in the tail its last block leaves (8 KiB of
// 48-byte blocks: 170 blocks, 32 bytes left). Once the span is carved to its
// end, that unit holds no block to come, so it goes back like any other when
// its blocks are free. (It never did: the unit reached past the carving
// point, and the scan stopped there.)
TEST(SpanBlocks, EveryFreeUnitOfAFullyCarvedSpanIsParked) {
  const std::size_t cls = 3;
  ASSERT_EQ(class_size(cls), 48u);
  Span* span = g_page_heap.allocate(class_info(cls).span_pages, 1, SpanState::kSmall);
  ASSERT_NE(span, nullptr);
  init_small_span(span, cls, nullptr);
  ASSERT_NE(span->bytes() % 48, 0u) << "the span has a tail";
  ASSERT_EQ(span->bytes(), std::size_t{8192});
  std::vector<void*> blocks;
  while (blocks.size() < span->capacity) {
    std::uint32_t carved = 0;
    void* head = carve_blocks(span, span->capacity, g_list_key, carved);
    ASSERT_GT(carved, 0u);
    for (void* b = head; b != nullptr; b = list_next(b)) blocks.push_back(b);
  }
  ASSERT_GE(span->carve_next, span->carve_end);
  std::sort(blocks.begin(), blocks.end());
  // Block 0 stays in use: unit 0 must stay, unit 1 (the tail's) must go.
  for (std::size_t i = 1; i < blocks.size(); ++i) EXPECT_FALSE(push_block(span, blocks[i], g_list_key));
  std::size_t released = park_free_units(span, g_list_key);
  EXPECT_EQ(span->parked_units, std::uint64_t{2}) << "only the second unit is free";
  EXPECT_EQ(released, std::size_t{4096});
  EXPECT_EQ(span->parked_blocks, 170u - 86u) << "blocks 86..169 start in the second unit";
  EXPECT_EQ(span_allocated(span) + span_listed(span) + span_uncarved(span) + span->parked_blocks, span->capacity);
  EXPECT_EQ(unpark_blocks(span, g_list_key), 170u - 86u);
  EXPECT_EQ(span_listed(span), 169u);
  EXPECT_TRUE(push_block(span, blocks[0], g_list_key)) << "the last block back empties the span";
  g_page_heap.deallocate(span);
}
