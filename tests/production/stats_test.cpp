// Statistics add up: what a thread allocates shows in the counters.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "strata/strata.h"

namespace {

strata_stats_t snapshot() {
  strata_stats_t s;
  strata_stats(&s);
  return s;
}

}  // namespace

TEST(Stats, InUseBytesEqualTheBlocksALiveSetHolds) {
  std::thread([] {
    strata_free(strata_malloc(1));  // this thread's cache exists before the first snapshot
    strata_stats_t before = snapshot();
    std::vector<void*> small, large;
    std::size_t expected = 0;
    for (int i = 0; i < 1000; ++i) {
      small.push_back(strata_malloc(100));
      expected += strata_usable_size(small.back());
    }
    for (int i = 0; i < 5; ++i) {
      large.push_back(strata_malloc(std::size_t{3} << 20));
      expected += strata_usable_size(large.back());
    }
    strata_stats_t during = snapshot();
    EXPECT_EQ(during.in_use_bytes - before.in_use_bytes, expected);
    EXPECT_EQ(during.large_in_use_bytes - before.large_in_use_bytes, std::size_t{5} * (3 << 20));
    std::size_t cls = 0;
    for (std::size_t c = 1; c < STRATA_NUM_SIZE_CLASSES; ++c)
      if (during.classes[c].block_size == strata_usable_size(small[0])) cls = c;
    ASSERT_NE(cls, 0u);
    EXPECT_EQ(during.classes[cls].blocks_in_use - before.classes[cls].blocks_in_use, 1000u);
    for (void* p : small) strata_free(p);
    for (void* p : large) strata_free(p);
    strata_stats_t after = snapshot();
    EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
    // The freed small blocks sit in this thread's cache or back in spans.
    EXPECT_GE(after.thread_cache_bytes + after.span_free_bytes, before.thread_cache_bytes);
  }).join();
}

TEST(Stats, TiersAddUpToWhatIsMapped) {
  std::vector<void*> keep;
  for (int i = 0; i < 5000; ++i) keep.push_back(strata_malloc(16 + (i % 50) * 40));
  strata_stats_t s = snapshot();
  // Every mapped byte of heap is in a span in use or free in the page heap.
  std::size_t spans = s.small_span_bytes + s.large_in_use_bytes;
  EXPECT_EQ(spans + s.page_heap_free_bytes + s.decommitted_bytes, s.mapped_bytes);
  // Every byte of a small span is a block in use, cached, in transit, free
  // in a span, or tail waste (at most 1/8 of a span).
  std::size_t accounted = s.in_use_bytes - s.large_in_use_bytes + s.thread_cache_bytes + s.in_transit_bytes +
                          s.span_free_bytes;
  EXPECT_LE(accounted, s.small_span_bytes);
  EXPECT_GE(accounted, s.small_span_bytes - s.small_span_bytes / 8);
  EXPECT_GE(s.threads, 1u);
  EXPECT_GT(s.metadata_bytes, 0u);
  EXPECT_GE(s.fragmentation, 0.0);
  EXPECT_LE(s.fragmentation, 1.0);
  for (void* p : keep) strata_free(p);
}

TEST(Stats, RemoteFreesAreCountedInBatches) {
  std::vector<void*> blocks;
  std::thread([&] {
    for (int i = 0; i < 6400; ++i) blocks.push_back(strata_malloc(64));
  }).join();
  strata_stats_t before = snapshot();
  std::thread([&] {
    for (void* p : blocks) strata_free(p);
  }).join();
  strata_stats_t after = snapshot();
  EXPECT_GE(after.remote_frees - before.remote_frees, 6400u);
}

// A thread that owns many blocks and then waits (a producer blocked on a
// queue) while another thread frees them all: the blocks wait in the
// owner's inbox, one parcel of 64 per item, and are no longer in use. The
// inbox then holds more items than the bound statistics once put on the
// walk of an inbox (4096), and the blocks past it counted as in use.
TEST(Stats, BlocksWaitingInALongInboxAreNotInUse) {
  constexpr std::size_t kParcels = 4096 + 200;  // 64 blocks each
  constexpr std::size_t kBlocks = kParcels * 64;
  strata_stats_t before = snapshot();
  std::vector<void*> blocks;
  std::mutex mutex;
  std::condition_variable changed;
  bool allocated = false, done = false;
  std::thread owner([&] {
    for (std::size_t i = 0; i < kBlocks; ++i) blocks.push_back(strata_malloc(16));
    std::unique_lock<std::mutex> guard(mutex);
    allocated = true;
    changed.notify_all();
    changed.wait(guard, [&] { return done; });  // idle: never drains its inbox
  });
  {
    std::unique_lock<std::mutex> guard(mutex);
    changed.wait(guard, [&] { return allocated; });
  }
  std::thread([&] {
    for (void* p : blocks) strata_free(p);
  }).join();  // its exit sends what its outbox still holds
  strata_stats_t waiting = snapshot();
  EXPECT_EQ(waiting.in_use_bytes, before.in_use_bytes);
  EXPECT_GE(waiting.in_transit_bytes, kBlocks * 16);
  {
    std::lock_guard<std::mutex> guard(mutex);
    done = true;
    changed.notify_all();
  }
  owner.join();
}

namespace {
struct Collected {
  std::string text;
};
void collect(void* context, const char* text, size_t length) {
  static_cast<Collected*>(context)->text.append(text, length);
}
}  // namespace

TEST(Stats, PrintsATableAndJson) {
  void* live = strata_malloc(100);  // at least one class has blocks to list
  Collected out;
  strata_print_stats(collect, &out);
  EXPECT_NE(out.text.find("strata statistics"), std::string::npos);
  EXPECT_NE(out.text.find("in use"), std::string::npos);
  EXPECT_NE(out.text.find("class  block size"), std::string::npos);
  Collected json;
  strata_print_stats_json(collect, &json);
  ASSERT_FALSE(json.text.empty());
  EXPECT_EQ(json.text.front(), '{');
  EXPECT_NE(json.text.find("\"in_use_bytes\":"), std::string::npos);
  EXPECT_NE(json.text.find("\"classes\":[{"), std::string::npos);
  EXPECT_EQ(json.text.substr(json.text.size() - 2), "}\n");
  strata_free(live);
}
