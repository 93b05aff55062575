// The central cache: spans of an exited thread become unowned, frees from
// other threads reach them in batches, and a span whose blocks all came back
// returns to the page heap.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "backend/page_heap.h"
#include "central/central_cache.h"
#include "core/page_map.h"
#include "strata/strata.h"

using namespace strata::detail;

namespace {

// A size used by no other test in this binary, so its class is ours alone.
constexpr std::size_t kSize = 3000;

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
  EXPECT_EQ(g_central[cls].stats().spans, 0u) << "every block came back, every span left";
  EXPECT_LE(spans_in_use(), base_spans + 1) << "spans went back to the page heap";
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
  // take_blocks / return_block keep: allocated + free + uncarved == capacity.
  Span* span = g_page_heap.allocate(class_info(10).span_pages, 1, SpanState::kSmall);
  ASSERT_NE(span, nullptr);
  init_small_span(span, 10, nullptr);
  auto uncarved = [&] { return (span->carve_end - span->carve_next) / class_size(10); };
  auto free_count = [&] {
    std::size_t n = 0;
    for (void* b = span->free_list; b; b = list_next(b)) ++n;
    return n;
  };
  BlockChain chain;
  EXPECT_EQ(take_blocks(span, 7, chain), 7u);
  EXPECT_EQ(span->allocated + free_count() + uncarved(), span->capacity);
  void* b = chain.head;
  for (int i = 0; i < 3; ++i) {
    void* next = list_next(b);
    return_block(span, b);
    b = next;
  }
  EXPECT_EQ(span->allocated, 4u);
  EXPECT_EQ(span->allocated + free_count() + uncarved(), span->capacity);
  BlockChain more;
  take_blocks(span, 5, more);  // 3 from the free list, 2 carved
  EXPECT_EQ(free_count(), 0u);
  EXPECT_EQ(span->allocated, 9u);
  EXPECT_EQ(span->allocated + free_count() + uncarved(), span->capacity);
  g_page_heap.deallocate(span);
}
