// Recent blocks (frontend/recent_blocks.h): a thread whose allocation words
// come out sparse lists its own frees, newest first, in front of its words;
// bursts do not list, a full list goes to the bits, and a burst in a
// listing class (a second fill in a window) turns the class back to bits;
// lists go back to the bits on request, at exit and at scavenges; misuse
// of a listed block is caught.
#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "core/ownership.h"
#include "core/page_map.h"
#include "core/span_blocks.h"
#include "frontend/recent_blocks.h"
#include "frontend/thread_cache.h"
#include "owned_spans.hpp"
#include "strata/strata.h"

using namespace strata::detail;

namespace {

bool lists_class(const ThreadCache* cache, std::size_t cls) { return ((cache->listing >> cls) & 1) != 0; }

std::uintptr_t tag_of(const void* block) { return g_page_map.entry_ref(block).owner_tag(); }

// The counting invariant of core/span.h for every span the cache owns: a
// listed block counts as out of its span, as one on the allocation word.
void expect_counts_add_up(ThreadCache* cache) {
  strata_test::for_each_owned_span(cache, [](const Span* span) {
    EXPECT_EQ(span_allocated(span) + strata_test::free_bits_set(span), span->capacity);
  });
}

// Ends the cache's window as if its words had been sparse: that many whole
// words, no block in them.
void close_a_sparse_window(ThreadCache* cache) {
  cache->window = kListingWindowWords << 16;
  close_listing_window(cache);
}

// The calling thread's own cache (nullptr if it has none): enough
// allocations that the thread is no longer young.
ThreadCache* busy_cache() {
  for (int i = 0; i < 300; ++i) strata_free(strata_malloc(16));
  return current_cache(false);
}

// The calling thread's cache, listing as after a window of sparse words.
ThreadCache* listing_cache() {
  ThreadCache* cache = busy_cache();
  if (cache == nullptr) return nullptr;
  close_a_sparse_window(cache);
  return cache;
}

// Runs body(cache) on a thread of its own whose cache lists (listing_cache).
template <class Body>
void in_a_listing_thread(Body body) {
  std::thread([&body] {
    ThreadCache* cache = listing_cache();
    ASSERT_NE(cache, nullptr);
    body(cache);
  }).join();
}

// Allocates `count` blocks of `size` into `blocks` (from the class's
// words: its list stays empty), then frees them all, in order.
void free_a_run(ThreadCache* cache, std::size_t size, std::uint32_t count, std::vector<void*>& blocks) {
  for (std::uint32_t i = 0; i < count; ++i) blocks.push_back(strata_malloc(size));
  ASSERT_EQ(cache->recent[size_to_class(size)].count, 0u);
  for (void* p : blocks) strata_free(p);
}

// Takes the class's allocation word's blocks, so that the next malloc of
// the class goes to its list.
std::vector<void*> empty_the_word(ThreadCache* cache, std::size_t size) {
  std::vector<void*> taken;
  while (cache->words[size_to_class(size)].bits != 0) taken.push_back(strata_malloc(size));
  return taken;
}

// A live set of blocks of 8-1000 B replaced at random, as larson does.
void replace_at_random(std::vector<void*>& slots, int operations, std::mt19937& random) {
  std::uniform_int_distribution<std::size_t> size(8, 1000);
  for (void*& slot : slots)
    if (slot == nullptr) slot = strata_malloc(size(random));
  for (int i = 0; i < operations; ++i) {
    void*& slot = slots[random() % slots.size()];
    strata_free(slot);
    slot = strata_malloc(size(random));
    static_cast<char*>(slot)[0] = 1;
  }
}

}  // namespace

TEST(RecentBlocks, ALiveSetReplacedAtRandomListsAndABurstDoesNot) {
  std::thread([] {
    ThreadCache* cache = busy_cache();
    ASSERT_NE(cache, nullptr);
    // Bursts: allocate 20,000 blocks, free them in random order, again.
    std::mt19937 random(7);
    std::vector<void*> blocks(20000);
    for (int round = 0; round < 20; ++round) {
      for (void*& b : blocks) b = strata_malloc(8 + random() % 993);
      std::shuffle(blocks.begin(), blocks.end(), random);
      for (void* b : blocks) strata_free(b);
    }
    EXPECT_FALSE(cache->lists) << "whole bursts leave dense words";
    EXPECT_EQ(cache->listing, 0u);
    std::vector<void*> slots(20000, nullptr);
    replace_at_random(slots, 300000, random);
    EXPECT_TRUE(cache->lists) << "random replacement leaves sparse words";
    const std::size_t cls = size_to_class(512);
    EXPECT_TRUE(lists_class(cache, cls));
    EXPECT_FALSE(lists_class(cache, size_to_class(4096))) << "classes over 1 KiB never list";
    // Every page of the class's spans carries the listing tag.
    void* block = strata_malloc(512);
    EXPECT_EQ(tag_of(block), listing_tag_for(cache, cls));
    EXPECT_EQ(owner_of_tag(tag_of(block)), owner_tag_for(cache));
    strata_free(block);
    expect_counts_add_up(cache);
    for (void* slot : slots) strata_free(slot);
  }).join();
}

// Never-used blocks of 1 KiB and up are handed out an OS page (four of
// 1 KiB) at a time (core/span_blocks.h), so the words of a burst through
// fresh spans come out short though nothing was freed into them: they must
// not count as sparse. Before they were left out of the window, a thread
// walking through fresh 1 KiB spans turned to listing at its first window.
TEST(RecentBlocks, WordsCutToAPageOfFreshBlocksDoNotCountAsSparse) {
  std::thread([] {
    ThreadCache* cache = busy_cache();
    ASSERT_NE(cache, nullptr);
    std::mt19937 random(11);
    std::vector<void*> blocks(20000);  // 20 MiB: 1,250 fresh spans' worth
    for (int round = 0; round < 3; ++round) {
      for (void*& b : blocks) b = strata_malloc(1024);
      EXPECT_FALSE(cache->lists) << "round " << round << ": fresh words cut to a page are not sparse";
      std::shuffle(blocks.begin(), blocks.end(), random);
      for (void* b : blocks) strata_free(b);
    }
    EXPECT_EQ(cache->listing, 0u);
  }).join();
}

TEST(RecentBlocks, ListedBlocksComeBackNewestFirstAndWarm) {
  in_a_listing_thread([](ThreadCache* cache) {
    const std::size_t cls = size_to_class(64);
    ASSERT_TRUE(lists_class(cache, cls));
    void* a = strata_malloc(64);
    void* b = strata_malloc(64);
    EXPECT_EQ(tag_of(a), listing_tag_for(cache, cls));
    const std::uint64_t count = cache->recent[cls].count;
    strata_free(a);
    strata_free(b);
    EXPECT_EQ(cache->recent[cls].count, count + 2);
    EXPECT_FALSE(block_is_free(g_page_map.lookup(a), a)) << "a listed block is out of its span";
    std::vector<void*> word = empty_the_word(cache, 64);
    EXPECT_EQ(strata_malloc(64), b);
    EXPECT_EQ(strata_malloc(64), a);
    expect_counts_add_up(cache);
    for (void* p : word) strata_free(p);
    strata_free(a);
    strata_free(b);
  });
}

TEST(RecentBlocks, AListThatFillsGoesToTheBitsAndItsClassKeepsListing) {
  in_a_listing_thread([](ThreadCache* cache) {
    const std::size_t cls = size_to_class(96);
    std::vector<void*> blocks;
    ASSERT_NO_FATAL_FAILURE(free_a_run(cache, 96, kRecentLimit + 10, blocks));
    EXPECT_TRUE(lists_class(cache, cls)) << "one fill in a window is a random walk's, not a burst's";
    EXPECT_EQ(cache->recent[cls].count, 10u) << "the block that found the list full starts a new one";
    EXPECT_EQ(cache->recent[cls].fills, 1u);
    for (std::uint32_t i = 0; i < blocks.size(); ++i) {
      void* p = blocks[i];
      EXPECT_EQ(block_is_free(g_page_map.lookup(p), p), i < kRecentLimit) << "the full list's blocks went to the bits";
      EXPECT_EQ(tag_of(p), listing_tag_for(cache, cls));
    }
    expect_counts_add_up(cache);
    std::vector<void*> word = empty_the_word(cache, 96);
    EXPECT_EQ(strata_malloc(96), blocks.back()) << "the new list serves first";
    strata_free(blocks.back());
    for (void* p : word) strata_free(p);
    close_a_sparse_window(cache);
    EXPECT_EQ(cache->recent[cls].fills, 0u) << "a new window forgives a fill again";
  });
}

TEST(RecentBlocks, ASecondFillInAWindowTurnsItsClassBackToBitsUntilTheNextWindow) {
  in_a_listing_thread([](ThreadCache* cache) {
    const std::size_t cls = size_to_class(96);
    std::vector<void*> blocks;
    ASSERT_NO_FATAL_FAILURE(free_a_run(cache, 96, (kListFillsPerWindow + 1) * kRecentLimit + 10, blocks));
    EXPECT_FALSE(lists_class(cache, cls)) << "a burst turned the class back";
    EXPECT_EQ(cache->recent[cls].count, 0u) << "its list went to the bits";
    EXPECT_TRUE(cache->lists) << "the other classes still list";
    for (void* p : blocks) {
      EXPECT_TRUE(block_is_free(g_page_map.lookup(p), p));
      EXPECT_EQ(tag_of(p), owner_tag_for(cache)) << "few spans: the plain tag, frees take the fast path";
    }
    expect_counts_add_up(cache);
    void* more = strata_malloc(96);
    strata_free(more);
    EXPECT_EQ(cache->recent[cls].count, 0u) << "the rest of the burst takes the bits";
    EXPECT_TRUE(block_is_free(g_page_map.lookup(more), more));
    close_a_sparse_window(cache);
    EXPECT_TRUE(lists_class(cache, cls));
    void* again = strata_malloc(96);
    EXPECT_EQ(tag_of(again), listing_tag_for(cache, cls));
    strata_free(again);
    EXPECT_EQ(cache->recent[cls].count, 1u) << "listed again";
  });
}

// A class of many spans keeps its listing tags when a burst turns it back
// (retagging them all at each turn was a walk over the whole class): the
// burst's frees still set bits, and listing again at the window's end
// retags nothing.
TEST(RecentBlocks, ABurstInAClassOfManySpansKeepsItsTagsAndStillTakesTheBits) {
  in_a_listing_thread([](ThreadCache* cache) {
    const std::size_t cls = size_to_class(512);
    std::vector<void*> kept, burst;  // more spans than kRetagSpans, one block kept out in each
    std::vector<const Span*> spans;
    for (std::uint32_t i = 0; i < (kRetagSpans + 8) * class_info(cls).long_objects; ++i) {
      void* p = strata_malloc(512);
      const Span* span = g_page_map.lookup(p);
      if (std::find(spans.begin(), spans.end(), span) == spans.end()) {
        spans.push_back(span);
        kept.push_back(p);
      } else {
        burst.push_back(p);
      }
    }
    ASSERT_GT(cache->owned_spans[cls], kRetagSpans);
    for (void* p : burst) strata_free(p);  // far more than two fills: a burst
    EXPECT_FALSE(lists_class(cache, cls)) << "the burst turned the class back";
    EXPECT_EQ(cache->recent[cls].count, 0u);
    for (void* p : burst) {
      EXPECT_TRUE(block_is_free(g_page_map.lookup(p), p)) << "the burst's blocks are in the bits";
      EXPECT_EQ(tag_of(p), listing_tag_for(cache, cls)) << "many spans: the tags stay";
    }
    expect_counts_add_up(cache);
    close_a_sparse_window(cache);
    EXPECT_TRUE(lists_class(cache, cls));
    void* again = strata_malloc(512);
    strata_free(again);
    EXPECT_EQ(cache->recent[cls].count, 1u) << "listed again without a retag";
    for (void* p : kept) strata_free(p);
  });
}

TEST(RecentBlocks, ADenseWindowStopsTheThreadListing) {
  in_a_listing_thread([](ThreadCache* cache) {
    void* p = strata_malloc(200);
    strata_free(p);
    EXPECT_EQ(cache->recent[size_to_class(200)].count, 1u);
    cache->window = (kListingWindowWords << 16) | (kListingWindowWords * kBitsBlocksPerWord);
    close_listing_window(cache);
    EXPECT_FALSE(cache->lists);
    EXPECT_EQ(cache->listing, 0u);
    EXPECT_EQ(cache->recent[size_to_class(200)].count, 0u);
    EXPECT_TRUE(block_is_free(g_page_map.lookup(p), p));
    void* q = strata_malloc(200);
    EXPECT_EQ(tag_of(q), owner_tag_for(cache));
    strata_free(q);
  });
}

TEST(RecentBlocks, ListsGoBackToTheBitsOnReleaseAndAtThreadExit) {
  std::vector<void*> freed;
  std::thread([&] {
    ThreadCache* cache = listing_cache();
    ASSERT_NE(cache, nullptr);
    for (int i = 0; i < 20; ++i) freed.push_back(strata_malloc(48));
    std::vector<void*> kept;
    for (int i = 0; i < 20; ++i) kept.push_back(strata_malloc(48));
    for (void* p : freed) strata_free(p);
    EXPECT_EQ(cache->recent[size_to_class(48)].count, 20u);
    strata_release_free_memory();
    EXPECT_EQ(cache->recent[size_to_class(48)].count, 0u);
    for (void* p : freed) EXPECT_TRUE(block_is_free(g_page_map.lookup(p), p));
    expect_counts_add_up(cache);
    for (void* p : kept) strata_free(p);  // listed again, then flushed by the exit
    EXPECT_EQ(cache->recent[size_to_class(48)].count, 20u);
  }).join();
  // The exited thread's spans went to the central cache (or the page heap):
  // no owner tag names it, and its blocks are free there.
  strata_stats_t stats;
  strata_stats(&stats);
  for (void* p : freed) EXPECT_EQ(owner_of_tag(tag_of(p)), 0u);
}

TEST(RecentBlocks, SpansTakenWhileListingGetTheListingTag) {
  in_a_listing_thread([](ThreadCache* cache) {
    const std::size_t cls = size_to_class(640);
    std::vector<void*> blocks;  // several spans' worth: new spans join while the class lists
    for (int i = 0; i < 200; ++i) blocks.push_back(strata_malloc(640));
    for (void* p : blocks) EXPECT_EQ(tag_of(p), listing_tag_for(cache, cls));
    for (void* p : blocks) strata_free(p);
  });
}

// Runs `misuse` on a listing thread of its own; a misuse that is not
// caught ends the process normally (the death test then fails).
template <class Misuse>
void misuse_on_a_listing_thread(Misuse misuse) {
  std::thread([&] {
    ThreadCache* cache = listing_cache();
    if (cache == nullptr) std::exit(2);
    misuse(cache);
    std::fprintf(stderr, "not caught\n");
    std::exit(0);
  }).join();
}

TEST(RecentBlocksDeathTest, ASecondFreeOfAListedBlockIsCaughtWhenTheListGivesItOut) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(misuse_on_a_listing_thread([](ThreadCache* cache) {
                 void* p = strata_malloc(64);
                 std::vector<void*> word = empty_the_word(cache, 64);
                 strata_free(p);
                 strata_free(p);
                 void* first = strata_malloc(64);
                 void* second = strata_malloc(64);  // p again: its mark was cleared when the list gave it out
                 std::fprintf(stderr, "%p %p\n", first, second);
               }),
               "double free");
}

TEST(RecentBlocksDeathTest, ASecondFreeOfAListedBlockIsCaughtWhenTheListIsFlushed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(misuse_on_a_listing_thread([](ThreadCache*) {
                 void* p = strata_malloc(64);
                 void* q = strata_malloc(64);
                 strata_free(p);
                 strata_free(q);
                 strata_free(p);
                 strata_release_free_memory();  // p's bit is set when the flush meets it again
               }),
               "double free");
}

TEST(RecentBlocksDeathTest, AFreeOfAnInteriorPointerIsCaught) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(misuse_on_a_listing_thread([](ThreadCache*) {
                 char* p = static_cast<char*>(strata_malloc(64));
                 strata_free(p + 16);
               }),
               "interior pointer");
}

TEST(RecentBlocksDeathTest, AWriteIntoAListedBlockIsCaughtWhenTheListGivesItOut) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(misuse_on_a_listing_thread([](ThreadCache* cache) {
                 void* p = strata_malloc(64);
                 std::vector<void*> word = empty_the_word(cache, 64);
                 strata_free(p);
                 static_cast<std::uintptr_t*>(p)[1] = 0;  // a write after free
                 std::fprintf(stderr, "%p\n", strata_malloc(64));
               }),
               "write after free");
}
