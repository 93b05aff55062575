// The outbox: batches stay true to their destination even when delivering
// one batch forwards blocks back into the outbox.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "central/central_cache.h"
#include "core/page_map.h"
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

// A block of class `cls` whose span the central cache owns: allocated by a
// thread that then exits, so its spans are abandoned, and left in use.
void* block_of_an_unowned_span(std::size_t cls) {
  void* block = nullptr;
  std::thread([&] { block = strata_malloc(class_size(cls)); }).join();
  return block;
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
    strata_free(strata_malloc(8));
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
  InboxItem mail = adopter->inbox.take_all();
  ASSERT_NE(mail, 0u);
  ASSERT_FALSE(item_is_block(mail));
  Parcel* parcel = item_parcel(mail);
  EXPECT_EQ(parcel->next, 0u) << "one parcel";
  ASSERT_EQ(parcel->count, 1u);
  EXPECT_EQ(parcel->blocks[0], block_a);
  release_parcel(nullptr, parcel);
  set_owner(span_a, nullptr);
  strata_free(block_a);
  strata_release_free_memory();
}

// Both kinds of inbox item reach the owner's list: parcels (from a thread's
// outbox) and single blocks (from a thread without a cache). Drained parcels
// become the owner's spares, up to a bound.
TEST(RemoteFree, ParcelsAndSingleBlocksReachTheOwnersList) {
  const std::size_t cls = size_to_class(2000);
  constexpr int kBlocks = 200;  // three full parcels and a partial one
  auto owner = std::make_unique<ThreadCache>();
  owner->lists[cls].max_length = 1000;
  owner->lists[cls].room = 1000;

  std::vector<void*> blocks;
  std::thread([&] {
    for (int i = 0; i < kBlocks + 1; ++i) blocks.push_back(strata_malloc(2000));
  }).join();
  owner->key = g_list_key;  // set by the first malloc of the process
  // The allocating thread exited: its spans are unowned. Hand them to `owner`.
  std::vector<Span*> spans;
  for (void* b : blocks) {
    Span* span = g_page_map.lookup(b);
    if (span->owner.load() != owner.get()) {
      set_owner(span, owner.get());
      spans.push_back(span);
    }
  }

  std::thread([&] {
    strata_free(strata_malloc(8));
    ThreadCache* cache = current_cache();
    for (int i = 0; i < kBlocks; ++i) strata_free(blocks[i]);
    flush_outbox(cache);
  }).join();
  remote_free(nullptr, blocks[kBlocks], g_page_map.lookup(blocks[kBlocks]));  // a thread without a cache

  drain_inbox(owner.get());
  EXPECT_EQ(owner->stats.remote_received, std::uint64_t{kBlocks} + 1);
  EXPECT_EQ(owner->lists[cls].length(), std::uint32_t{kBlocks} + 1);
  EXPECT_GE(owner->spare_parcel_count, 3u);
  EXPECT_LE(owner->spare_parcel_count, Parcel::kMaxSpares);
  std::vector<void*> listed;
  for (void* b = owner->lists[cls].head; b != nullptr; b = list_next(b)) listed.push_back(b);
  std::sort(listed.begin(), listed.end());
  std::sort(blocks.begin(), blocks.end());
  EXPECT_EQ(listed, blocks) << "every block arrived exactly once";

  // Give everything back: the spans to the central cache, the blocks freed.
  for (Span* span : spans) set_owner(span, nullptr);
  for (void* b : blocks) strata_free(b);
  release_spare_parcels(owner.get());
  strata_release_free_memory();
}
