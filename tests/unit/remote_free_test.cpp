// The outbox: batches stay true to their destination even when delivering
// one batch forwards blocks back into the outbox.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "central/central_cache.h"
#include "core/ownership.h"
#include "core/page_map.h"
#include "core/span_blocks.h"
#include "frontend/parcel.h"
#include "frontend/remote_free.h"
#include "frontend/thread_cache.h"
#include "strata/strata.h"

using namespace strata::detail;

namespace {

// Where a block should travel now: its span's owner, or its class's central cache.
Destination expected_destination(void* block) {
  Span* span = g_page_map.lookup(block);
  ThreadCache* owner = span->owner.load();
  return owner != nullptr ? reinterpret_cast<Destination>(owner) : central_destination(span->size_class);
}

// A block of class `cls` whose span the central cache owns, left in use (as
// a young thread's allocation is; blocks over 2 KiB of a young thread are
// spans of their own, so the central cache is asked directly).
void* block_of_an_unowned_span(std::size_t cls) { return g_central[cls].allocate_one(cls); }

// `owner` (a stand-in cache) received exactly one parcel, holding just
// `block`; the block then goes back to the central cache with its span.
void expect_one_parcel_of(ThreadCache* owner, void* block, Span* span) {
  InboxItem mail = owner->inbox.take_all();
  ASSERT_NE(mail, 0u);
  ASSERT_FALSE(item_is_block(mail));
  Parcel* parcel = item_parcel(mail);
  EXPECT_EQ(parcel->next, 0u) << "one parcel";
  ASSERT_EQ(parcel->count, 1u);
  EXPECT_EQ(parcel->blocks[0], block);
  release_parcel(nullptr, parcel);
  set_owner(span, nullptr);
  strata_free(block);
  strata_release_free_memory();
}

}  // namespace

// The scenario of a heap corruption the thread-churn stress test found under
// ThreadSanitizer: a batch for central cache A (in outbox slot s) is sent
// because a block for central cache C needs slot s. Central A finds that the
// span of one of its blocks was adopted by thread T meanwhile and forwards
// the block, which re-enters the outbox for T, also in slot s. The slot must
// not then be relabelled "central C" with T's block in it: central C would
// return a block of class A to its span under C's lock, racing with A's.
TEST(RemoteFree, ForwardedBlocksKeepTheirOwnBatch) {
  // A stand-in adopter T and two classes A != C whose destinations all share
  // one outbox slot.
  std::vector<std::unique_ptr<ThreadCache>> adopters;
  ThreadCache* adopter = nullptr;
  std::size_t class_a = 0, class_c = 0;
  for (int tries = 0; tries < 64 && class_c == 0; ++tries) {
    adopters.push_back(std::make_unique<ThreadCache>());
    std::size_t slot = Outbox::slot_index(reinterpret_cast<Destination>(adopters.back().get()));
    class_a = class_c = 0;
    for (std::size_t cls = kNumClasses - 1; cls >= 1 && class_c == 0; --cls) {
      if (Outbox::slot_index(central_destination(cls)) != slot) continue;
      if (class_a == 0) class_a = cls; else class_c = cls;
    }
    adopter = adopters.back().get();
  }
  ASSERT_NE(class_c, 0u) << "no adopter address shares a slot with two classes";

  void* block_a = block_of_an_unowned_span(class_a);
  void* block_c = block_of_an_unowned_span(class_c);
  Span* span_a = g_page_map.lookup(block_a);
  Span* span_c = g_page_map.lookup(block_c);
  ASSERT_EQ(span_a->owner.load(), nullptr);
  ASSERT_EQ(span_c->owner.load(), nullptr);

  std::thread([&] {
    ThreadCache* cache = current_cache();
    ASSERT_NE(cache, nullptr);
    remote_free(cache, block_a, span_a);  // queued for central A
    set_owner(span_a, adopter);           // ...which T adopts before it arrives
    remote_free(cache, block_c, span_c);  // needs the slot: A's batch leaves, block_a is forwarded
    for (const OutboxSlot& slot : cache->outbox.slots) {
      if (slot.parcel == nullptr) continue;
      for (std::uint32_t i = 0; i < slot.parcel->count; ++i)
        EXPECT_EQ(expected_destination(slot.parcel->blocks[i]), slot.destination)
            << "a block of class " << unsigned{g_page_map.lookup(slot.parcel->blocks[i])->size_class}
            << " rides in a batch for another destination";
    }
    flush_outbox(cache);
  }).join();

  // The forwarded block reached T's inbox; give it back to the central cache.
  expect_one_parcel_of(adopter, block_a, span_a);
}

// Both kinds of inbox item reach the owner: parcels (from a thread's outbox)
// and single blocks (from a thread without a cache); each block joins its
// own span (its bit), exactly once. Drained parcels become the owner's
// spares, up to a bound.
TEST(RemoteFree, ParcelsAndSingleBlocksReachTheirSpans) {
  // A sampled block is a span of its own and never reaches the owner's
  // inbox: the counts below hold only with heap profiling's sampling off
  // (CTest sets STRATA_PROFILE_SAMPLE=0; this holds when run by hand too).
  const long sampling = strata_option_get(STRATA_OPTION_PROFILE_SAMPLE);
  strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, 0);
  constexpr int kBlocks = 200;  // three full parcels and a partial one
  std::vector<void*> blocks;
  std::atomic<int> stage{0};
  std::thread owner([&] {
    ThreadCache* cache = current_cache();
    ASSERT_NE(cache, nullptr);
    for (int i = 0; i < kBlocks + 2; ++i) blocks.push_back(strata_malloc(2000));
    void* keep = blocks.back();  // one block stays live so that no span empties
    blocks.pop_back();
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
    drain_inbox(cache);
    EXPECT_EQ(cache->stats.remote_received, std::uint64_t{kBlocks} + 1);
    EXPECT_GE(cache->spare_parcel_count, 3u);
    EXPECT_LE(cache->spare_parcel_count, Parcel::kMaxSpares);
    for (void* b : blocks) {
      Span* span = g_page_map.lookup(b);
      EXPECT_TRUE(block_is_free(span, b) || span->kept_empty || span_allocated(span) == 0)
          << "every block reached its span";
    }
    strata_free(keep);
  });
  while (stage.load() != 1) std::this_thread::yield();
  std::thread([&] {
    ThreadCache* cache = current_cache();
    for (int i = 0; i < kBlocks; ++i) strata_free(blocks[i]);
    flush_outbox(cache);
  }).join();
  remote_free(nullptr, blocks[kBlocks], g_page_map.lookup(blocks[kBlocks]));  // a thread without a cache
  stage = 2;
  owner.join();
  strata_release_free_memory();
  strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, sampling);
}

// Parcels a thread does not keep go to the depot in batches, and come out
// of it as batches: a thread with no spares takes a whole batch (its first
// parcel now, the rest as spares); a thread without a cache takes one
// parcel and the rest of the batch stays. No parcel is lost or handed out
// twice on the way.
TEST(RemoteFree, ParcelsBeyondTheSparesTravelThroughTheDepotInBatches) {
  constexpr std::uint32_t kParcels = Parcel::kMaxSpares + Parcel::kBatch / 2 + 1;
  std::vector<Parcel*> given;
  std::thread([&] {
    ThreadCache* cache = current_cache();
    ASSERT_NE(cache, nullptr);
    for (std::uint32_t i = 0; i < kParcels; ++i) given.push_back(acquire_parcel(cache));
    ASSERT_EQ(cache->spare_parcels, nullptr);
    for (Parcel* parcel : given) {
      parcel->count = 7;  // as a drained parcel still says
      release_parcel(cache, parcel);
      EXPECT_LE(cache->spare_parcel_count, Parcel::kMaxSpares);
    }
    // kMaxSpares + 1 releases gave one batch away.
    EXPECT_EQ(cache->spare_parcel_count, kParcels - Parcel::kBatch);
  }).join();  // its exit gives the rest to the depot as a second batch

  std::sort(given.begin(), given.end());
  std::vector<Parcel*> taken;
  std::thread([&] {
    ThreadCache* cache = current_cache();
    ASSERT_NE(cache, nullptr);
    ASSERT_EQ(cache->spare_parcels, nullptr);
    taken.push_back(acquire_parcel(cache));  // the exit's batch: one now, the rest kept
    EXPECT_EQ(cache->spare_parcel_count, kParcels - Parcel::kBatch - 1);
    while (taken.size() < kParcels) taken.push_back(acquire_parcel(cache));  // then the other batch
    for (Parcel* parcel : taken) {
      EXPECT_EQ(parcel->count, 0u);
      EXPECT_EQ(parcel->next, 0u);
      EXPECT_EQ(parcel->next_batch, nullptr);
      release_parcel(cache, parcel);
    }
    release_spare_parcels(cache);  // as its exit does: one batch
    EXPECT_EQ(cache->spare_parcel_count, 0u);

    Parcel* alone = acquire_parcel(nullptr);  // without a cache: one of the batch
    EXPECT_TRUE(std::binary_search(given.begin(), given.end(), alone));
    release_parcel(nullptr, alone);  // a batch of its own, on top
    EXPECT_EQ(acquire_parcel(nullptr), alone);
    release_parcel(nullptr, alone);
  }).join();
  std::sort(taken.begin(), taken.end());
  EXPECT_EQ(taken, given) << "the second thread received exactly the parcels the first gave up";
}

// A parcel holding the last blocks of one span and the first of the next
// span of the class, which starts where the first ends (the blocks follow
// each other in memory): the drain takes them as runs of one span word,
// and a run stops at its span's last block. Every block's bit lands in its
// own span, and none past a span's last block.
TEST(RemoteFree, ARunOfBlocksStopsAtTheEndOfItsSpan) {
  const long sampling = strata_option_get(STRATA_OPTION_PROFILE_SAMPLE);
  strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, 0);
  constexpr std::size_t kSize = 512;  // spans of 16 or 32 blocks: a span ends inside a bit word
  std::vector<void*> blocks;
  std::vector<void*> sent;
  std::atomic<int> stage{0};
  std::thread owner([&] {
    ThreadCache* cache = current_cache();
    ASSERT_NE(cache, nullptr);
    for (int i = 0; i < 256; ++i) blocks.push_back(strata_malloc(kSize));
    std::sort(blocks.begin(), blocks.end());
    // Two spans of the class, the second starting where the first ends.
    for (std::size_t k = 8; k + 8 < blocks.size() && sent.empty(); ++k) {
      Span* a = g_page_map.lookup(blocks[k - 1]);
      Span* b = g_page_map.lookup(blocks[k]);
      if (a == b || static_cast<char*>(blocks[k - 1]) + kSize != blocks[k]) continue;
      if (g_page_map.lookup(blocks[k - 8]) != a || g_page_map.lookup(blocks[k + 7]) != b) continue;
      sent.assign(blocks.begin() + static_cast<long>(k) - 8, blocks.begin() + static_cast<long>(k) + 8);
    }
    ASSERT_EQ(sent.size(), 16u) << "no two spans of the class side by side";
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
    drain_inbox(cache);
    for (void* b : sent) EXPECT_TRUE(block_is_free(g_page_map.lookup(b), b)) << "a block's bit is in its own span";
    for (Span* span : {g_page_map.lookup(sent.front()), g_page_map.lookup(sent.back())}) {
      const std::uint32_t words = (span->capacity + 63) / 64;
      const std::uint64_t past = span->capacity % 64 == 0 ? 0 : ~std::uint64_t{0} << (span->capacity % 64);
      EXPECT_EQ(span->free_bits[words - 1] & past, 0u) << "a bit past the span's last block";
      std::uint32_t free_bits = 0;
      for (std::uint32_t w = 0; w < words; ++w) free_bits += static_cast<std::uint32_t>(__builtin_popcountll(span->free_bits[w]));
      EXPECT_EQ(span_allocated(span) + free_bits, span->capacity) << "its count agrees with its bits";
    }
    for (void* b : blocks)
      if (std::find(sent.begin(), sent.end(), b) == sent.end()) strata_free(b);
  });
  while (stage.load() != 1) std::this_thread::yield();
  std::thread([&] {
    ThreadCache* cache = current_cache();
    for (void* b : sent) strata_free(b);  // one parcel, in address order
    flush_outbox(cache);
  }).join();
  stage = 2;
  owner.join();
  strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, sampling);
}

// The free mark is the list key in a block's second word. A block in use may
// hold that value by chance (or by an attacker's choice): freeing it, from
// its owner, from another thread or from a young thread (straight to the
// central cache), must never be reported as a double free. Each suspect is
// confirmed by looking where a free block can be; a report would abort.
TEST(RemoteFree, BlocksInUseThatLookFreeAreNeverReported) {
  constexpr int kBlocks = 3000;
  constexpr std::size_t kSize = 48;
  for (int round = 0; round < 3; ++round) {
    std::vector<void*> blocks;
    for (int i = 0; i < 4096; ++i) strata_free(strata_malloc(kSize));  // this thread is busy
    for (int i = 0; i < kBlocks; ++i) {
      auto* words = static_cast<std::uintptr_t*>(strata_malloc(kSize));
      ASSERT_NE(words, nullptr);
      words[0] = reinterpret_cast<std::uintptr_t>(words) ^ g_list_key;  // a plausible link too
      words[1] = g_list_key;
      blocks.push_back(words);
    }
    // A third freed by another (busy) thread, a third by a young one, a third here.
    std::thread([&] {
      for (int i = 0; i < 4096; ++i) strata_free(strata_malloc(kSize));
      for (int i = 0; i < kBlocks; i += 3) strata_free(blocks[i]);
    }).join();
    std::thread([&] {
      for (int i = 1; i < kBlocks; i += 3) strata_free(blocks[i]);
    }).join();
    for (int i = 2; i < kBlocks; i += 3) strata_free(blocks[i]);
    // Drain the inbox, empty the spans, hand every block out again: all distinct.
    std::vector<void*> again;
    for (int i = 0; i < 2 * kBlocks; ++i) again.push_back(strata_malloc(kSize));
    std::vector<void*> sorted = again;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a block was handed out twice";
    for (void* b : again) strata_free(b);
  }
}

// A remote free's destination is the page's owner tag: the owner's cache,
// which the owner may have built just before it tagged the span (a new
// thread's first span of a class, adopted from the central cache). The
// sender reads the tag with acquire, so it sees that cache whole when it
// pushes onto its inbox. A relaxed read was a data race ThreadSanitizer
// found in stress_thread_churn (the owner's construction of its inbox
// against the sender's compare-and-swap). Here nothing but the tag orders
// the two threads (the flags are relaxed), so under ThreadSanitizer a
// missing acquire is reported as that race.
TEST(RemoteFree, TheOwnerTagPublishesTheOwnersCache) {
  void* block = block_of_an_unowned_span(size_to_class(64));
  Span* span = g_page_map.lookup(block);
  ASSERT_EQ(span->owner.load(), nullptr);
  ThreadCache* sender = current_cache();
  ASSERT_NE(sender, nullptr);

  std::atomic<ThreadCache*> built{nullptr};
  std::atomic<bool> done{false};
  std::thread owner([&] {
    auto* cache = new ThreadCache();  // built here...
    set_owner(span, cache);           // ...and published by the tag alone
    built.store(cache, std::memory_order_relaxed);
    while (!done.load(std::memory_order_relaxed)) std::this_thread::yield();
  });
  while (built.load(std::memory_order_relaxed) == nullptr) std::this_thread::yield();
  strata_free(block);     // the tag names the new cache: a parcel for it...
  flush_outbox(sender);   // ...pushed onto its inbox
  done.store(true, std::memory_order_relaxed);
  owner.join();

  std::unique_ptr<ThreadCache> cache(built.load());
  expect_one_parcel_of(cache.get(), block, span);  // the block went to the tag's cache
}

namespace {

// The calling thread made busy (a cache of its own: its remote frees go in
// parcels), with heap profiling's sampling off so that every block lies in
// a class span; the thread exits with status 2 when it gets no cache.
ThreadCache* busy_cache_without_sampling() {
  strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, 0);
  for (int i = 0; i < 300; ++i) strata_free(strata_malloc(16));
  ThreadCache* cache = current_cache(false);
  if (cache == nullptr) std::exit(2);
  return cache;
}

// Frees `blocks`, in order, from another busy thread, whose parcels leave
// at once.
void free_on_another_thread(const std::vector<void*>& blocks) {
  std::thread([&] {
    busy_cache_without_sampling();
    for (void* b : blocks) strata_free(b);
    flush_outbox(current_cache(false));
  }).join();
}

// A span's worth of kWordTestSize blocks of a busy thread (the first ones the
// class's next word holds), with block 1 freed, then taken back onto the
// allocation word with block 0, which malloc handed out again: block 1 is
// free but not in the span's bits. Exits the (death-test) thread where the
// layout is not what the caller relies on.
constexpr std::size_t kWordTestSize = 512;
std::vector<void*> blocks_with_block_1_on_the_word(ThreadCache* cache) {
  const std::size_t cls = size_to_class(kWordTestSize);
  std::vector<void*> warm;  // whatever the class's current word holds
  while (cache->words[cls].bits != 0) warm.push_back(strata_malloc(kWordTestSize));
  std::vector<void*> blocks;
  for (std::uint32_t i = 0; i < class_info(cls).span_objects; ++i) blocks.push_back(strata_malloc(kWordTestSize));
  if (cache->words[cls].bits != 0) std::exit(3);
  strata_free(blocks[0]);
  strata_free(blocks[1]);
  if (strata_malloc(kWordTestSize) != blocks[0]) std::exit(4);  // takes the word {0, 1}
  if (cache->words[cls].bits == 0) std::exit(5);                 // block 1 waits on it
  return blocks;
}

}  // namespace

// A parcel may hold a block twice (another thread freed it twice). Where
// the first copy empties its span and the span goes back to the page heap,
// the second must not set a bit in the released span: the drain shares one
// page's lookup between consecutive blocks only until a span's countdown
// runs out, then looks the page up again, finds the span released and
// reports.
TEST(RemoteFreeDeathTest, ABlockSentTwiceAfterItsSpanWasReleasedIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      std::thread([] {
        ThreadCache* cache = busy_cache_without_sampling();
        cache->max_kept_bytes = 0;  // an emptied span goes to the page heap
        constexpr std::size_t kSize = 512;
        std::vector<void*> blocks;
        for (int i = 0; i < 64; ++i) blocks.push_back(strata_malloc(kSize));
        Span* first = g_page_map.lookup(blocks[0]);
        if (cache->current[size_to_class(kSize)] == first) std::exit(3);  // a current span is never released
        std::vector<void*> sent;  // every block of the first span, all on one page
        for (void* b : blocks)
          if (g_page_map.lookup(b) == first) sent.push_back(b);
        if (sent.size() != first->capacity || first->page_count != 1 || sent.size() + 1 >= Parcel::kCapacity)
          std::exit(4);
        sent.push_back(sent.front());
        free_on_another_thread(sent);  // one parcel
        drain_inbox(cache);
        std::fprintf(stderr, "not caught\n");
        std::exit(0);
      }).join(),
      "double free \\(block of a span released while it was sent\\)");
}

// A block on its owner's allocation word (freed, then taken back with its
// word, not handed out yet) is not free in its span's bits. Freed again by
// another thread, it reaches the owner's drain, which checks the word
// before it sets the bit: the double free is reported there, not handed
// out twice later.
TEST(RemoteFreeDeathTest, ABlockFreedAgainByAnotherThreadWhileOnItsOwnersWordIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      std::thread([] {
        ThreadCache* cache = busy_cache_without_sampling();
        std::vector<void*> blocks = blocks_with_block_1_on_the_word(cache);
        free_on_another_thread({blocks[1]});                   // freed again, from another thread
        drain_inbox(cache);
        std::fprintf(stderr, "not caught\n");
        std::exit(0);
      }).join(),
      "double free");
}

// Blocks freed in order by another thread reach their owner as a run of
// one span word, set with one mask: a block of the run that is free
// already (freed twice), or waits on the owner's allocation word, is
// reported as the single-block path would.
TEST(RemoteFreeDeathTest, ABlockFreedTwiceInsideARunIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      std::thread([] {
        busy_cache_without_sampling();
        constexpr std::size_t kSize = 64;
        std::vector<void*> blocks;
        for (int i = 0; i < 600; ++i) blocks.push_back(strata_malloc(kSize));
        std::sort(blocks.begin(), blocks.end());
        std::vector<void*> sent;  // 8 blocks in a row on one page, in one bit word
        for (std::size_t k = 0; k + 8 < blocks.size() && sent.empty(); ++k) {
          Span* span = g_page_map.lookup(blocks[k]);
          if (static_cast<char*>(blocks[k + 7]) != static_cast<char*>(blocks[k]) + 7 * kSize) continue;
          if (g_page_map.lookup(blocks[k + 7]) != span || block_index(span, blocks[k]) % 64 > 56) continue;
          if ((reinterpret_cast<std::uintptr_t>(blocks[k]) >> kPageShift) !=
              (reinterpret_cast<std::uintptr_t>(blocks[k + 7]) >> kPageShift))
            continue;
          sent.assign(blocks.begin() + static_cast<long>(k), blocks.begin() + static_cast<long>(k) + 8);
        }
        if (sent.size() != 8) std::exit(3);
        strata_free(sent[4]);           // freed by its owner...
        free_on_another_thread(sent);   // ...and again, inside a run
        drain_inbox(current_cache(false));
        std::fprintf(stderr, "not caught\n");
        std::exit(0);
      }).join(),
      "double free");
}

TEST(RemoteFreeDeathTest, ABlockOnItsOwnersWordInsideARunIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      std::thread([] {
        ThreadCache* cache = busy_cache_without_sampling();
        std::vector<void*> blocks = blocks_with_block_1_on_the_word(cache);
        // Block 0 (in use again) and 1-4 in a row, on one page: 1-4 are a run.
        for (int i = 1; i < 5; ++i)
          if (static_cast<char*>(blocks[i]) != static_cast<char*>(blocks[0]) + i * kWordTestSize) std::exit(6);
        free_on_another_thread({blocks[0], blocks[1], blocks[2], blocks[3], blocks[4]});
        drain_inbox(cache);
        std::fprintf(stderr, "not caught\n");
        std::exit(0);
      }).join(),
      "double free");
}
