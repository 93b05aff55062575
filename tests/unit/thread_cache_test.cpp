// The thread cache: slow start, the byte bound, thread-exit return, and
// cross-thread frees through outbox and inbox.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "backend/page_heap.h"
#include "core/page_map.h"
#include "frontend/thread_cache.h"
#include "strata/strata.h"

using namespace strata::detail;

TEST(ThreadCache, SlowStartGrowsTheListLimit) {
  std::thread([] {
    const std::size_t cls = size_to_class(48);
    strata_free(strata_malloc(48));
    ThreadCache* cache = current_cache();
    ASSERT_NE(cache, nullptr);
    std::uint32_t first = cache->lists[cls].max_length;
    std::vector<void*> blocks;
    for (int round = 0; round < 50; ++round) {
      for (int i = 0; i < 200; ++i) blocks.push_back(strata_malloc(48));
      for (void* b : blocks) strata_free(b);
      blocks.clear();
    }
    EXPECT_GT(cache->lists[cls].max_length, first);
    EXPECT_GE(cache->lists[cls].max_length, class_info(cls).batch)
        << "a list that keeps running dry earns at least a batch";
    EXPECT_LE(cache->lists[cls].length(), cache->lists[cls].max_length);
  }).join();
}

TEST(ThreadCache, HeldBytesStayUnderTheBound) {
  std::thread([] {
    strata_free(strata_malloc(16));
    ThreadCache* cache = current_cache();
    ASSERT_NE(cache, nullptr);
    // Churn many classes hard: every list wants to grow.
    std::vector<void*> blocks;
    for (int round = 0; round < 20; ++round)
      for (std::size_t size = 16; size <= 64 * 1024; size = size * 5 / 4 + 16) {
        for (int i = 0; i < 64; ++i) blocks.push_back(strata_malloc(size));
        for (void* b : blocks) strata_free(b);
        blocks.clear();
      }
    std::size_t held = 0, capacity = 0;
    for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
      held += std::size_t{cache->lists[cls].length()} * class_size(cls);
      capacity += std::size_t{cache->lists[cls].max_length} * class_size(cls);
    }
    EXPECT_EQ(capacity, cache->capacity_bytes);
    EXPECT_LE(cache->capacity_bytes, cache->max_bytes);
    EXPECT_LE(held, cache->max_bytes);
  }).join();
}

TEST(ThreadCache, ThreadExitGivesEverythingBack) {
  std::size_t base = g_page_heap.stats().in_use_spans;
  for (int t = 0; t < 4; ++t) {
    std::thread([] {
      std::vector<void*> blocks;
      for (int i = 0; i < 3000; ++i) blocks.push_back(strata_malloc(16 + (i % 40) * 24));
      for (void* b : blocks) strata_free(b);
    }).join();
  }
  // Nothing is live, nothing is cached by a dead thread: at most the spans
  // this thread itself keeps are still out.
  EXPECT_LE(g_page_heap.stats().in_use_spans, base + 2);
}

TEST(ThreadCache, RemoteFreesTravelInBatchesAndComeBackToTheOwner) {
  constexpr int kBlocks = 4096;
  std::vector<void*> blocks(kBlocks);
  std::atomic<int> stage{0};
  ThreadCache* owner_cache = nullptr;
  std::thread owner([&] {
    for (int i = 0; i < kBlocks; ++i) blocks[i] = strata_malloc(64);
    owner_cache = current_cache();
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
    // Running dry drains the inbox: the blocks freed over there come back.
    std::uint64_t received_before = owner_cache->stats.remote_received;
    std::vector<void*> again;
    for (int i = 0; i < kBlocks; ++i) again.push_back(strata_malloc(64));
    EXPECT_GE(owner_cache->stats.remote_received - received_before, std::uint64_t{kBlocks} * 9 / 10);
    for (void* b : again) strata_free(b);
  });
  while (stage.load() != 1) std::this_thread::yield();
  std::thread freer([&] {
    strata_free(strata_malloc(8));
    ThreadCache* mine = current_cache();
    std::uint64_t sent_before = mine->stats.batches_sent;
    for (void* b : blocks) {
      ASSERT_NE(g_page_map.owner_tag(b), 0u);
      strata_free(b);
    }
    std::uint64_t batches = mine->stats.batches_sent - sent_before;
    EXPECT_GE(mine->stats.remote_frees, std::uint64_t{kBlocks});
    // One atomic push per batch of (up to) 64 blocks, not one per block.
    EXPECT_LE(batches, std::uint64_t{kBlocks} / 64 + 1);
    EXPECT_GE(batches, std::uint64_t{kBlocks} / 64 - 1);
  });
  freer.join();  // exit flushes the rest of the outbox
  stage = 2;
  owner.join();
}
