// The thread cache: free lists per span (a burst of frees goes straight to
// the spans), allocation lists, kept empty spans and their bound, sleeping
// full spans, young threads, thread-exit return, and cross-thread frees
// through outbox and inbox.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "backend/page_heap.h"
#include "core/page_map.h"
#include "core/span_blocks.h"
#include "frontend/thread_cache.h"
#include "owned_spans.hpp"
#include "strata/strata.h"

using namespace strata::detail;
using strata_test::for_each_owned_span;
using strata_test::free_bits_set;

namespace {

// The counting invariant of core/span.h for every span `cache` owns, with
// the allocation words counted as out of their spans (their bits are clear
// in the span).
void expect_counts_add_up(ThreadCache* cache) {
  for_each_owned_span(cache, [](const Span* span) {
    EXPECT_EQ(span_allocated(span) + free_bits_set(span), span->capacity);
  });
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    if (const Span* span = cache->current[cls]) {
      EXPECT_EQ(span->free_bits[cache->words[cls].span_word] & cache->words[cls].bits, 0u)
          << "a block on the allocation word is not free in its span";
    }
  }
}

// Makes the calling thread busy (past the young phase: a cache of its own)
// and returns its cache.
ThreadCache* become_busy() {
  for (int i = 0; i < 300; ++i) strata_free(strata_malloc(16));
  return current_cache(false);
}

// Runs body(cache, cls, info) on a thread of its own that has a cache,
// for the class of `size`.
template <class Body>
void on_a_thread_of_its_own(std::size_t size, Body body) {
  std::thread([&] {
    ThreadCache* cache = current_cache();
    ASSERT_NE(cache, nullptr);
    const std::size_t cls = size_to_class(size);
    body(cache, cls, class_info(cls));
  }).join();
}

// Pages of [p, p + bytes) resident now.
std::size_t resident_pages(const void* p, std::size_t bytes) {
  auto start = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{4095};
  std::size_t pages = (reinterpret_cast<std::uintptr_t>(p) + bytes - start + 4095) / 4096;
  std::vector<unsigned char> in_core(pages);
  if (mincore(reinterpret_cast<void*>(start), pages * 4096, in_core.data()) != 0) return pages;
  std::size_t n = 0;
  for (unsigned char c : in_core) n += c & 1;
  return n;
}

// The distinct spans of a list, in address order.
std::vector<Span*> distinct(std::vector<Span*> spans) {
  std::sort(spans.begin(), spans.end());
  spans.erase(std::unique(spans.begin(), spans.end()), spans.end());
  return spans;
}

// The distinct spans `blocks` lie in, in address order.
std::vector<Span*> spans_of(const std::vector<void*>& blocks) {
  std::vector<Span*> spans;
  for (void* b : blocks) spans.push_back(g_page_map.lookup(b));
  return distinct(spans);
}

}  // namespace

TEST(ThreadCache, YoungThreadsOwnNoSpans) {
  void* held = nullptr;
  std::thread([&] {
    for (int i = 0; i < 100; ++i) strata_free(strata_malloc(16 + i % 64));
    held = strata_malloc(1000);
    EXPECT_EQ(current_cache(false), nullptr) << "a thread that did little has no cache of its own";
    EXPECT_EQ(g_page_map.lookup(held)->owner.load(), nullptr) << "its blocks come from unowned spans";
  }).join();
  strata_free(held);
}

TEST(ThreadCache, BusyThreadsGetACacheAndOwnTheirSpans) {
  std::thread([] {
    std::vector<void*> blocks;
    for (int i = 0; i < 2000; ++i) blocks.push_back(strata_malloc(48));
    ThreadCache* cache = current_cache(false);
    ASSERT_NE(cache, nullptr) << "a thread that allocated a lot graduated";
    EXPECT_EQ(g_page_map.lookup(blocks.back())->owner.load(), cache);
    for (void* b : blocks) strata_free(b);
  }).join();
}

TEST(ThreadCache, ABurstOfFreesGoesStraightToItsSpans) {
  std::thread([] {
    ThreadCache* cache = current_cache();
    ASSERT_NE(cache, nullptr);
    const std::size_t cls = size_to_class(64);
    std::vector<void*> blocks;
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 20000; ++i) blocks.push_back(strata_malloc(64));
      expect_counts_add_up(cache);
      std::uint64_t slow_before = cache->stats.frees_slow;
      for (void* b : blocks) strata_free(b);
      blocks.clear();
      EXPECT_EQ(cache->stats.frees_slow, slow_before) << "owned blocks never take the free slow path";
      expect_counts_add_up(cache);
      // Every span of the class is empty now: kept (within the bound) or gone.
      std::size_t kept = 0;
      for (Span* s = cache->partial[cls].head; s; s = s->next) {
        EXPECT_EQ(span_allocated(s), 0u);
        if (s->kept_empty) kept += s->bytes();
      }
      EXPECT_EQ(cache->sleeping[cls].length, 0u);
      EXPECT_LE(cache->kept_empty_bytes, cache->max_kept_bytes * kBurstKeptFactor);
    }
  }).join();
}

TEST(ThreadCache, KeptEmptySpansStayUnderTheBound) {
  std::thread([] {
    ThreadCache* cache = current_cache();
    ASSERT_NE(cache, nullptr);
    std::vector<void*> blocks;
    for (int round = 0; round < 10; ++round)
      for (std::size_t size = 16; size <= 64 * 1024; size = size * 5 / 4 + 16) {
        for (int i = 0; i < 200; ++i) blocks.push_back(strata_malloc(size));
        for (void* b : blocks) strata_free(b);
        blocks.clear();
      }
    std::size_t kept = 0;
    for (std::size_t cls = 1; cls < kNumClasses; ++cls)
      for (Span* s = cache->partial[cls].head; s; s = s->next)
        if (s->kept_empty) {
          kept += s->bytes();
          EXPECT_EQ(span_allocated(s), 0u);
        }
    EXPECT_EQ(kept, cache->kept_empty_bytes);
    EXPECT_LE(cache->kept_empty_bytes, cache->max_kept_bytes * kBurstKeptFactor);
    expect_counts_add_up(cache);
  }).join();
}

// A span a burst used up sleeps drained (core/span.h, SleepState): frees
// count its blocks out, and only the last one back wakes it, empty, in one
// event (a burst freed in order: one slow path per span, not a wake at an
// eighth and an empty at the end).
// The current span empties (every block back) while the class's word is
// dry: the word is taken from it there and then, so the next malloc of the
// class takes the fast path (one slow event per round of a burst, not two).
TEST(ThreadCache, ACurrentSpanThatEmptiesWithItsWordDryRefillsTheWordAtOnce) {
  const std::size_t size = 64;  // a span of 512 blocks, words never cut to a page
  on_a_thread_of_its_own(size, [&](ThreadCache* cache, std::size_t cls, const SizeClassInfo& info) {
    std::vector<void*> blocks;
    for (std::uint32_t i = 0; i < info.span_objects; ++i) blocks.push_back(strata_malloc(size));
    Span* span = g_page_map.lookup(blocks[0]);
    for (void* b : blocks) ASSERT_EQ(g_page_map.lookup(b), span) << "one span's blocks, all of them";
    ASSERT_EQ(cache->current[cls], span);
    ASSERT_EQ(cache->words[cls].bits, 0u) << "its word ran dry with its last block";
    for (std::size_t i = 0; i + 1 < blocks.size(); ++i) strata_free(blocks[i]);
    EXPECT_EQ(cache->words[cls].bits, 0u) << "not before the span is empty";
    const std::uint64_t words_before = cache->stats.words_taken;
    strata_free(blocks.back());
    EXPECT_EQ(cache->stats.words_taken, words_before + 1);
    ASSERT_EQ(cache->current[cls], span) << "the emptied span stays current";
    const std::uint32_t on_word = static_cast<std::uint32_t>(__builtin_popcountll(cache->words[cls].bits));
    EXPECT_EQ(on_word, 64u) << "a whole word of the span";
    EXPECT_EQ(span->countdown, on_word) << "the word's blocks count as out";
    expect_counts_add_up(cache);
    void* again = strata_malloc(size);
    EXPECT_EQ(g_page_map.lookup(again), span);
    EXPECT_EQ(cache->stats.words_taken, words_before + 1) << "served from the word taken at the free";
    strata_free(again);
    expect_counts_add_up(cache);
  });
}

// The same when the blocks come back from another thread: the malloc whose
// slow path drains them finds the word taken during the drain and hands out
// its block, rather than taking a second word over it (whose blocks would
// then count as out for good).
TEST(ThreadCache, AWordTakenWhileTheSlowPathDrainsIsTheOneHandedOut) {
  const std::size_t size = 64;
  on_a_thread_of_its_own(size, [&](ThreadCache* cache, std::size_t cls, const SizeClassInfo& info) {
    std::vector<void*> blocks;
    for (std::uint32_t i = 0; i < info.span_objects; ++i) blocks.push_back(strata_malloc(size));
    Span* span = g_page_map.lookup(blocks[0]);
    ASSERT_EQ(cache->current[cls], span);
    ASSERT_EQ(cache->words[cls].bits, 0u);
    std::thread([&] {
      for (void* b : blocks) strata_free(b);
    }).join();  // its exit sends what it has not sent yet
    ASSERT_FALSE(cache->inbox.empty()) << "the blocks wait in this thread's inbox";
    void* block = strata_malloc(size);  // drains: the span empties, its word is taken there
    EXPECT_EQ(g_page_map.lookup(block), span);
    strata_free(block);
    EXPECT_EQ(span->countdown, static_cast<std::uint32_t>(__builtin_popcountll(cache->words[cls].bits)))
        << "only the word's blocks are out";
    expect_counts_add_up(cache);
  });
}

// Push, push_back and remove keep both ends, the links and the length
// right wherever the span sits (they select links without branches).
TEST(SpanList, PushPushBackAndRemoveKeepEndsLinksAndLength) {
  Span spans[4];
  SpanList list;
  auto order = [&list] {
    std::vector<Span*> forward, backward;
    for (Span* s = list.head; s != nullptr; s = s->next) forward.push_back(s);
    for (Span* s = list.tail; s != nullptr; s = s->prev) backward.push_back(s);
    std::reverse(backward.begin(), backward.end());
    EXPECT_EQ(forward, backward) << "next and prev agree";
    EXPECT_EQ(forward.size(), list.length);
    return forward;
  };
  list.push(&spans[1]);
  EXPECT_EQ(order(), (std::vector<Span*>{&spans[1]}));
  list.push(&spans[0]);
  list.push_back(&spans[2]);
  list.push_back(&spans[3]);
  EXPECT_EQ(order(), (std::vector<Span*>{&spans[0], &spans[1], &spans[2], &spans[3]}));
  list.remove(&spans[1]);  // middle
  EXPECT_FALSE(spans[1].in_list);
  EXPECT_EQ(spans[1].next, nullptr);
  EXPECT_EQ(spans[1].prev, nullptr);
  EXPECT_EQ(order(), (std::vector<Span*>{&spans[0], &spans[2], &spans[3]}));
  list.remove(&spans[0]);  // head
  EXPECT_EQ(order(), (std::vector<Span*>{&spans[2], &spans[3]}));
  list.remove(&spans[3]);  // tail
  EXPECT_EQ(order(), (std::vector<Span*>{&spans[2]}));
  EXPECT_EQ(list.pop(), &spans[2]);  // the only one
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.tail, nullptr);
  EXPECT_EQ(list.length, 0u);
  list.push_back(&spans[3]);  // onto an empty list from the back
  EXPECT_EQ(order(), (std::vector<Span*>{&spans[3]}));
  EXPECT_TRUE(spans[3].in_list);
}

TEST(ThreadCache, AUsedUpSpanSleepsDrainedUntilEveryBlockIsBack) {
  const std::size_t size = 2000;  // larger blocks are spans of their own in a thread this new
  on_a_thread_of_its_own(size, [&](ThreadCache* cache, std::size_t /*cls*/, const SizeClassInfo& info) {
    std::vector<void*> blocks;
    for (std::uint32_t i = 0; i < 3 * info.span_objects; ++i) blocks.push_back(strata_malloc(size));
    Span* first = g_page_map.lookup(blocks[0]);
    ASSERT_EQ(first->sleeping, kAsleepDrained) << "a span the thread used up sleeps drained";
    std::vector<void*> of_first, rest;
    for (void* b : blocks) (g_page_map.lookup(b) == first ? of_first : rest).push_back(b);
    ASSERT_EQ(of_first.size(), first->capacity);
    // Every block back but one: still asleep, its countdown counting the one out.
    for (std::size_t i = 0; i + 1 < of_first.size(); ++i) strata_free(of_first[i]);
    EXPECT_EQ(first->sleeping, kAsleepDrained);
    EXPECT_EQ(first->countdown, 1u);
    EXPECT_EQ(span_allocated(first), 1u);
    expect_counts_add_up(cache);
    const std::size_t kept_before = cache->kept_empty_bytes;
    strata_free(of_first.back());
    // Empty now: kept for the thread's next burst (within its bound) or
    // given back; either way no longer asleep.
    for (const Span* s = cache->sleeping[first->owner_class].head; s != nullptr; s = s->next)
      EXPECT_NE(s, first) << "off the sleeping list once empty";
    EXPECT_GE(cache->kept_empty_bytes, kept_before);
    expect_counts_add_up(cache);
    for (void* b : rest) strata_free(b);
    expect_counts_add_up(cache);
  });
}

// A span asleep drained wakes by itself only when it empties; one whose
// blocks the program freed all but a few of still gives back its pages
// without a live block when memory is released (and at every scavenge).
TEST(ThreadCache, ASpanAsleepDrainedGivesBackItsFreePagesOnRelease) {
  const std::size_t size = 64;
  on_a_thread_of_its_own(size, [&](ThreadCache* cache, std::size_t cls, const SizeClassInfo& info) {
    std::vector<void*> a, b;
    for (std::uint32_t i = 0; i < info.span_objects; ++i) a.push_back(strata_malloc(size));
    for (std::uint32_t i = 0; i < info.span_objects; ++i) b.push_back(strata_malloc(size));
    Span* span_a = g_page_map.lookup(a[0]);
    ASSERT_EQ(span_a->sleeping, kAsleepDrained);
    ASSERT_GT(span_a->bytes(), kPageSize) << "pages to give back beside the live block";
    for (std::size_t i = 1; i < a.size(); ++i) strata_free(a[i]);  // block 0 stays
    ASSERT_EQ(span_a->sleeping, kAsleepDrained);
    ASSERT_FALSE(span_a->any_parked);
    strata_release_free_memory();
    EXPECT_EQ(span_a->sleeping, kAwake) << "woken onto the class's list";
    EXPECT_TRUE(span_a->any_parked) << "its pages without a live block went back";
    EXPECT_EQ(span_allocated(span_a), 1u);
    bool listed = false;
    for (const Span* s = cache->partial[cls].head; s != nullptr; s = s->next) listed |= s == span_a;
    EXPECT_TRUE(listed);
    expect_counts_add_up(cache);
    strata_free(a[0]);
    for (void* p : b) strata_free(p);
    expect_counts_add_up(cache);
  });
}

// A span that fell asleep with a few free blocks (a live set replaced at
// random, not a burst) wakes onto its owner's list as soon as wake_frees
// more come back.
TEST(ThreadCache, ASpanAsleepWithFreeBlocksWakesAfterAnEighthComesBack) {
  const std::size_t size = 64;  // spans of one length: an emptied span is kept, not outgrown
  on_a_thread_of_its_own(size, [&](ThreadCache* cache, std::size_t cls, const SizeClassInfo& info) {
    ASSERT_EQ(info.long_pages, info.span_pages);
    const std::uint32_t capacity = info.span_objects;
    std::vector<void*> a, b;
    for (std::uint32_t i = 0; i < capacity; ++i) a.push_back(strata_malloc(size));
    for (std::uint32_t i = 0; i < capacity; ++i) b.push_back(strata_malloc(size));
    Span* span_a = g_page_map.lookup(a[0]);
    Span* span_b = g_page_map.lookup(b[0]);
    ASSERT_NE(span_a, span_b);
    ASSERT_EQ(span_a->sleeping, kAsleepDrained);
    ASSERT_EQ(cache->current[cls], span_b);
    // A empties (kept at the back of the list); B, still current, gets one
    // block back: too few to be worth a word, so the next malloc takes A
    // and B sleeps with that one free block.
    for (void* p : a) strata_free(p);
    ASSERT_TRUE(span_a->kept_empty);
    strata_free(b[0]);
    void* next = strata_malloc(size);
    EXPECT_EQ(g_page_map.lookup(next), span_a);
    ASSERT_EQ(span_b->sleeping, kAsleep) << "asleep with a free block";
    const std::uint32_t wake_frees = span_wake_frees(span_b);
    ASSERT_GE(wake_frees, 2u);
    EXPECT_EQ(span_allocated(span_b), capacity - 1);
    // Frees short of the wake count leave it asleep; the next one wakes it.
    for (std::uint32_t i = 1; i + 1 < wake_frees; ++i) strata_free(b[i]);
    EXPECT_EQ(span_b->sleeping, kAsleep);
    strata_free(b[wake_frees - 1]);
    EXPECT_EQ(span_b->sleeping, kAwake);
    EXPECT_EQ(span_allocated(span_b), capacity - wake_frees);
    expect_counts_add_up(cache);
    for (std::size_t i = wake_frees; i < b.size(); ++i) strata_free(b[i]);
    strata_free(next);
    expect_counts_add_up(cache);
  });
}

// A thread that needs a new span for a class first wakes one of its oldest
// sleeping spans of the class if blocks came back to it: a live set that
// shrinks and grows by turns reuses those blocks instead of new pages.
TEST(ThreadCache, ASleepingSpanWithBlocksBackServesBeforeNewMemory) {
  const std::size_t size = 2000;
  on_a_thread_of_its_own(size, [&](ThreadCache* cache, std::size_t cls, const SizeClassInfo& info) {
    std::vector<void*> blocks;
    for (std::uint32_t i = 0; i <= info.span_objects; ++i) blocks.push_back(strata_malloc(size));
    Span* first = g_page_map.lookup(blocks[0]);
    Span* second = g_page_map.lookup(blocks.back());
    ASSERT_NE(first, second);
    ASSERT_TRUE(first->sleeping) << "the used-up span sleeps";
    ASSERT_GE(span_wake_frees(first), 2u) << "one free leaves it asleep";
    void* freed = blocks[3];
    strata_free(freed);
    blocks.erase(blocks.begin() + 3);
    EXPECT_TRUE(first->sleeping);
    const std::uint16_t owned = cache->owned_spans[cls];
    // Use up the second span; the next block is the one that came back.
    for (std::uint32_t i = 1; i < second->capacity; ++i) blocks.push_back(strata_malloc(size));
    ASSERT_EQ(span_allocated(second), second->capacity);
    void* next = strata_malloc(size);
    EXPECT_EQ(next, freed) << "the sleeping span's free block serves before a new span";
    EXPECT_FALSE(first->sleeping);
    EXPECT_EQ(cache->owned_spans[cls], owned) << "no span taken";
    blocks.push_back(next);
    expect_counts_add_up(cache);
    for (void* p : blocks) strata_free(p);
    expect_counts_add_up(cache);
  });
}

// The look is not at the oldest sleeper alone: a block back to a younger
// one serves too, before new memory.
TEST(ThreadCache, ASleeperBehindTheOldestServesBeforeNewMemory) {
  const std::size_t size = 64;
  on_a_thread_of_its_own(size, [&](ThreadCache* cache, std::size_t cls, const SizeClassInfo& info) {
    const std::uint32_t capacity = info.span_objects;
    std::vector<void*> blocks;
    for (std::uint32_t i = 0; i < 3 * capacity; ++i) blocks.push_back(strata_malloc(size));
    Span* oldest = g_page_map.lookup(blocks[0]);
    Span* second = g_page_map.lookup(blocks[capacity]);
    ASSERT_EQ(oldest->sleeping, kAsleepDrained);
    ASSERT_EQ(second->sleeping, kAsleepDrained);
    ASSERT_EQ(cache->sleeping[cls].tail, oldest) << "the oldest sleeper at the back";
    void* freed = blocks[capacity + 5];
    strata_free(freed);
    blocks.erase(blocks.begin() + capacity + 5);
    const std::uint16_t owned = cache->owned_spans[cls];
    void* next = strata_malloc(size);  // the third span is used up: it sleeps, and a sleeper serves
    EXPECT_EQ(next, freed) << "the second sleeper's block serves before a new span";
    EXPECT_EQ(second->sleeping, kAwake);
    EXPECT_EQ(oldest->sleeping, kAsleepDrained);
    EXPECT_EQ(cache->owned_spans[cls], owned) << "no span taken";
    blocks.push_back(next);
    expect_counts_add_up(cache);
    for (void* p : blocks) strata_free(p);
    expect_counts_add_up(cache);
  });
}

// A thread's first spans of a class are short; once it owns
// kLongSpansAfter of them (a burst of the class), the spans it takes are
// long: 32 blocks of 1 KiB instead of 16, so a span runs dry, sleeps, wakes
// and empties half as often per block (core/size_classes.h).
TEST(ThreadCache, SpansOfABusyClassAreLong) {
  const std::size_t size = 1024;
  on_a_thread_of_its_own(size, [&](ThreadCache* cache, std::size_t cls, const SizeClassInfo& info) {
    ASSERT_GT(info.long_pages, info.span_pages) << "1 KiB blocks have long spans";
    ASSERT_EQ(info.long_objects, 2u * info.span_objects) << "twice the short span";
    std::vector<void*> blocks;
    for (std::uint32_t i = 0; i < kLongSpansAfter * info.span_objects; ++i) blocks.push_back(strata_malloc(size));
    Span* first = g_page_map.lookup(blocks[0]);
    for (void* b : blocks) {
      EXPECT_EQ(g_page_map.lookup(b)->page_count, info.span_pages) << "the class's first spans are short";
      EXPECT_EQ(g_page_map.lookup(b)->capacity, info.span_objects);
    }
    for (std::uint32_t i = 0; i < info.long_objects; ++i) blocks.push_back(strata_malloc(size));
    Span* long_span = g_page_map.lookup(blocks.back());
    ASSERT_NE(long_span, first);
    EXPECT_EQ(long_span->page_count, info.long_pages) << "the next span is long";
    EXPECT_EQ(long_span->capacity, info.long_objects);
    EXPECT_EQ(span_wake_frees(long_span), info.long_objects / 8) << "a long span wakes after an eighth of its blocks";
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      EXPECT_EQ(g_page_map.lookup(blocks[i])->size_class, cls);
      std::memset(blocks[i], static_cast<int>(i), size);  // every block whole, none overlapping
    }
    for (std::size_t i = 0; i < blocks.size(); ++i)
      ASSERT_EQ(static_cast<unsigned char*>(blocks[i])[size - 1], static_cast<unsigned char>(i));
    expect_counts_add_up(cache);
    for (void* b : blocks) strata_free(b);
    expect_counts_add_up(cache);
    // Emptied, the long span (still current) serves the next malloc.
    void* again = strata_malloc(size);
    EXPECT_EQ(g_page_map.lookup(again)->page_count, info.long_pages);
    strata_free(again);
  });
}

// A class whose bursts outgrow its two short spans (25 blocks of 1 KiB:
// every span event twice per round) gets long spans once a short one
// empties while the thread holds both: the burst then fits one span.
TEST(ThreadCache, BurstsThatOutgrowTwoShortSpansMakeTheClassLong) {
  const std::size_t size = 1024;
  on_a_thread_of_its_own(size, [&](ThreadCache* cache, std::size_t cls, const SizeClassInfo& info) {
    const std::uint32_t burst = 25;
    ASSERT_LT(info.span_objects, burst) << "a burst needs two short spans";
    ASSERT_GE(info.long_objects, burst) << "and fits one long span";
    std::vector<void*> blocks;
    for (int round = 0; round < 8; ++round) {
      for (void* b : blocks) strata_free(b);
      blocks.clear();
      for (std::uint32_t i = 0; i < burst; ++i) blocks.push_back(strata_malloc(size));
    }
    EXPECT_TRUE((cache->long_wanted >> cls) & 1);
    const std::vector<Span*> spans = spans_of(blocks);
    ASSERT_EQ(spans.size(), 1u) << "one long span holds the burst";
    EXPECT_EQ(spans[0]->page_count, info.long_pages);
    expect_counts_add_up(cache);
    for (void* b : blocks) strata_free(b);
  });
}

// A thread holding a few blocks of many classes (most threads of most
// programs) keeps one short span of each: long spans would be slack.
TEST(ThreadCache, AFewBlocksOfAClassStayInOneShortSpan) {
  std::thread([] {
    ASSERT_NE(current_cache(), nullptr);
    std::vector<void*> blocks;
    for (int round = 0; round < 100; ++round) {
      for (std::size_t size = 144; size <= 2048; size += 64) blocks.push_back(strata_malloc(size));
      if (blocks.size() > 60) {  // a few live blocks of each class, the oldest freed
        for (std::size_t i = 0; i < 30; ++i) strata_free(blocks[i]);
        blocks.erase(blocks.begin(), blocks.begin() + 30);
      }
    }
    for (void* b : blocks) {
      Span* span = g_page_map.lookup(b);
      EXPECT_EQ(span->page_count, class_info(span->size_class).span_pages) << "size " << class_size(span->size_class);
    }
    for (void* b : blocks) strata_free(b);
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
  // Nothing is live, nothing is held by a dead thread: at most the spans
  // this thread itself keeps are still out.
  EXPECT_LE(g_page_heap.stats().in_use_spans, base + 2);
}

TEST(ThreadCache, PagesWithoutLiveBlocksGoBackFromPartlyUsedSpans) {
  std::thread([] {
    ThreadCache* cache = current_cache();
    ASSERT_NE(cache, nullptr);
    std::mt19937 random(7);
    std::vector<unsigned char*> blocks;
    for (int i = 0; i < 200000; ++i) {
      auto* p = static_cast<unsigned char*>(strata_malloc(16 + random() % 241));
      p[0] = static_cast<unsigned char>(i);
      blocks.push_back(p);
    }
    std::shuffle(blocks.begin(), blocks.end(), random);
    std::vector<unsigned char*> live(blocks.begin(), blocks.begin() + 2000);  // 1% stays
    for (std::size_t i = 2000; i < blocks.size(); ++i) strata_free(blocks[i]);
    std::uint64_t before = cache->stats.parked_bytes;
    std::size_t released = strata_release_free_memory();
    EXPECT_GT(cache->stats.parked_bytes, before) << "whole free pages of partly used spans went back";
    EXPECT_GT(released, std::size_t{8} << 20);
    // The process statistic counts parked units; the thread's counter also
    // counts never-used tails given back (park_free_units), which are not
    // units: compare with the units of this thread's spans.
    std::uint64_t units_bytes = 0;
    for_each_owned_span(cache, [&](const Span* s) {
      units_bytes += static_cast<std::uint64_t>(__builtin_popcountll(s->parked_units)) << s->unit_shift;
    });
    EXPECT_GT(units_bytes, 0u);
    strata_stats_t stats;
    strata_stats(&stats);
    EXPECT_GE(stats.parked_bytes, units_bytes);
    expect_counts_add_up(cache);
    // The live blocks are intact, and the parked memory serves again.
    for (std::size_t i = 0; i < live.size(); ++i) EXPECT_NE(g_page_map.lookup(live[i]), nullptr);
    std::vector<void*> again;
    for (int i = 0; i < 200000; ++i) {
      auto* p = static_cast<unsigned char*>(strata_malloc(16 + random() % 241));
      std::memset(p, 0x5a, 16);
      again.push_back(p);
    }
    expect_counts_add_up(cache);
    for (void* p : again) strata_free(p);
    for (void* p : live) strata_free(p);
    expect_counts_add_up(cache);
  }).join();
}

TEST(ThreadCache, RemoteFreesTravelInBatchesAndComeBackToTheOwner) {
  constexpr int kBlocks = 4096;
  std::vector<void*> blocks(kBlocks);
  std::atomic<int> stage{0};
  ThreadCache* owner_cache = nullptr;
  std::uint64_t owned = 0;
  std::thread owner([&] {
    owner_cache = current_cache();
    for (int i = 0; i < kBlocks; ++i) blocks[i] = strata_malloc(64);
    // Heap profiling may have sampled a block: a span of its own, no owner
    // (its free is not remote). Every other block is in one of our spans.
    for (void* b : blocks)
      if (g_page_map.owner_tag(b) == reinterpret_cast<std::uintptr_t>(owner_cache)) ++owned;
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
    // Running dry drains the inbox: the blocks freed over there come back.
    std::uint64_t received_before = owner_cache->stats.remote_received;
    std::vector<void*> again;
    for (int i = 0; i < kBlocks; ++i) again.push_back(strata_malloc(64));
    EXPECT_EQ(owner_cache->stats.remote_received - received_before, owned);
    expect_counts_add_up(owner_cache);
    for (void* b : again) strata_free(b);
  });
  while (stage.load() != 1) std::this_thread::yield();
  std::thread freer([&] {
    ThreadCache* mine = current_cache();
    std::uint64_t sent_before = mine->stats.batches_sent;
    ASSERT_GE(owned, std::uint64_t{kBlocks} - 8) << "at most a few sampled blocks";
    for (void* b : blocks) strata_free(b);
    flush_outbox(mine);
    std::uint64_t batches = mine->stats.batches_sent - sent_before;
    EXPECT_GE(mine->stats.remote_frees, owned);
    // One atomic push per batch of (up to) 64 blocks, not one per block.
    EXPECT_LE(batches, owned / 64 + 1);
    EXPECT_GE(batches, owned / 64 - 1);
  });
  freer.join();
  stage = 2;
  owner.join();
}

// Neither malloc nor free writes into a block: blocks the program never
// touches cost no memory (a program that allocates a large buffer pool and
// uses a little of it; seed 001 and 004, which never write their blocks).
TEST(ThreadCache, MallocAndFreeNeverTouchABlock) {
  std::thread([] {
    ThreadCache* cache = become_busy();
    ASSERT_NE(cache, nullptr);
    strata_release_free_memory();  // free pages of other tests' spans read as untouched again
    const std::size_t size = 1024;
    std::vector<void*> blocks;
    for (int i = 0; i < 8192; ++i) blocks.push_back(strata_malloc(size));  // 8 MiB
    std::size_t fresh = 0, resident = 0;
    for (void* b : blocks) {
      Span* span = g_page_map.lookup(b);
      if (span->owner.load() != cache) continue;
      ++fresh;
      resident += resident_pages(b, size) != 0;
    }
    ASSERT_GT(fresh, 7000u) << "most blocks come from spans this thread took";
    for (void* b : blocks) strata_free(b);
    std::size_t resident_after = 0;
    for (void* b : blocks) resident_after += resident_pages(b, size) != 0;
    // Spans this thread took from the central cache may have been touched by
    // earlier tests: allow a few.
    EXPECT_LT(resident, fresh / 20) << "malloc wrote into blocks";
    EXPECT_LT(resident_after, blocks.size() / 20) << "free wrote into blocks";
    expect_counts_add_up(cache);
  }).join();
}

// A busy thread that frees and allocates one large buffer over and over
// (a hash table's bucket array, rebuilt) keeps getting the block it had:
// the allocation word takes blocks handed out before ahead of never-used
// ones, whose pages the program would make resident one after the other.
TEST(ThreadCache, ALargeBlockFreedAndAllocatedAgainIsReused) {
  std::thread([] {
    ThreadCache* cache = become_busy();
    ASSERT_NE(cache, nullptr);
    const std::size_t size = 20000;
    for (int i = 0; i < 40; ++i) strata_free(strata_malloc(size));  // past the class's paged requests
    ASSERT_NE(cache->current[size_to_class(size)], nullptr) << "the class has a span of its own now";
    std::vector<std::uintptr_t> seen;
    for (int i = 0; i < 200; ++i) {
      void* p = strata_malloc(size);
      std::memset(p, 1, size);
      // Heap profiling may sample one: a span of its own, not the class's.
      if (g_page_map.lookup(p)->state == SpanState::kSmall) seen.push_back(reinterpret_cast<std::uintptr_t>(p));
      strata_free(p);
    }
    ASSERT_GT(seen.size(), 150u);
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(std::unique(seen.begin(), seen.end()) - seen.begin(), 1) << "one buffer, one block";
    expect_counts_add_up(cache);
  }).join();
}

TEST(ThreadCache, AnEmptiedSpanIsKeptWithoutAWalkAndServesAgainInAddressOrder) {
  std::thread([] {
    ThreadCache* cache = become_busy();
    ASSERT_NE(cache, nullptr);
    const std::size_t size = 128;  // a class whose spans are all of one length (no long spans)
    const std::size_t cls = size_to_class(size);
    ASSERT_EQ(class_info(cls).long_pages, class_info(cls).span_pages);
    const std::uint32_t per_span = class_info(cls).span_objects;
    std::vector<void*> blocks;
    for (std::uint32_t i = 0; i < 3 * per_span; ++i) blocks.push_back(strata_malloc(size));
    Span* first = g_page_map.lookup(blocks[0]);
    ASSERT_NE(first, cache->current[cls]);
    // Freed in random order: the span empties and is kept for reuse, every
    // bit set.
    std::vector<void*> mine(blocks.begin(), blocks.begin() + per_span);
    std::shuffle(mine.begin(), mine.end(), std::mt19937(3));
    for (void* b : mine) strata_free(b);
    ASSERT_TRUE(first->kept_empty);
    EXPECT_EQ(free_bits_set(first), per_span);
    expect_counts_add_up(cache);
    // Used up the other spans first, then this one: in address order.
    for (std::uint32_t i = per_span; i < blocks.size(); ++i) strata_free(blocks[i]);
    blocks.clear();
    std::vector<void*> again;
    for (std::uint32_t i = 0; i < 3 * per_span; ++i) again.push_back(strata_malloc(size));
    std::vector<void*> from_first;
    for (void* b : again)
      if (g_page_map.lookup(b) == first) from_first.push_back(b);
    EXPECT_EQ(from_first.size(), per_span) << "the kept span served again, whole";
    EXPECT_TRUE(std::is_sorted(from_first.begin(), from_first.end())) << "in address order";
    expect_counts_add_up(cache);
    for (void* b : again) strata_free(b);
  }).join();
}

// An empty span the thread keeps for one class serves another class of the
// same span length; the page map's class words must follow, or other
// threads' frees of its new blocks would fail the block-start check they
// make without the span (and take the slow route, every one of them).
TEST(ThreadCache, AKeptSpanMadeOverForAnotherClassCarriesItsNewClassInThePageMap) {
  std::thread([] {
    ThreadCache* cache = become_busy();
    ASSERT_NE(cache, nullptr);
    const std::size_t old_cls = size_to_class(448), new_cls = size_to_class(480);
    ASSERT_NE(old_cls, new_cls);
    ASSERT_EQ(class_info(old_cls).span_pages, class_info(new_cls).span_pages);
    std::vector<void*> blocks;
    for (std::uint32_t i = 0; i < 3 * class_info(old_cls).span_objects; ++i) blocks.push_back(strata_malloc(448));
    const std::vector<Span*> old_spans = spans_of(blocks);
    for (void* b : blocks) strata_free(b);
    void* block = strata_malloc(480);
    Span* span = g_page_map.lookup(block);
    ASSERT_NE(std::find(old_spans.begin(), old_spans.end(), span), old_spans.end())
        << "a kept span of the other class served";
    ASSERT_EQ(span->size_class, new_cls);
    for (std::uint32_t i = 0; i < class_info(new_cls).span_objects; ++i) {
      const char* p = static_cast<const char*>(span->start()) + i * class_size(new_cls);
      PageMap::PageClass page = g_page_map.entry_ref(p).page_class();
      EXPECT_EQ(page.size_class, new_cls) << "block " << i;
      EXPECT_TRUE(is_block_start(page.page_offset | (reinterpret_cast<std::uintptr_t>(p) & (kPageSize - 1)), new_cls));
    }
    strata_free(block);
  }).join();
}

// A thread that moves on to a class whose spans have another length gives
// its kept empty spans back to the page heap as it needs pages, so the new
// class's spans are served from the pages it already had, not new ones.
TEST(ThreadCache, KeptSpansOfAnotherLengthServeANewClassThroughThePageHeap) {
  std::thread([] {
    ThreadCache* cache = become_busy();
    ASSERT_NE(cache, nullptr);
    const std::size_t old_cls = size_to_class(32), new_cls = size_to_class(64);
    ASSERT_NE(class_info(old_cls).span_pages, class_info(new_cls).span_pages);
    std::vector<void*> blocks;
    for (std::uint32_t i = 0; i < 4 * class_info(old_cls).span_objects; ++i) blocks.push_back(strata_malloc(32));
    const std::vector<Span*> old_spans = spans_of(blocks);
    for (void* b : blocks) strata_free(b);
    const std::size_t kept_before = cache->kept_empty_bytes;
    ASSERT_GE(kept_before, class_info(new_cls).span_pages * kPageSize) << "the emptied spans are kept";
    void* block = strata_malloc(64);
    const Span* span = g_page_map.lookup(block);
    const std::uintptr_t first = address_of(span->first_page), last = first + span->bytes();
    bool inside = false;
    for (const Span* old : old_spans)
      inside |= first < address_of(old->first_page) + old->bytes() && address_of(old->first_page) < last;
    EXPECT_TRUE(inside) << "the new class's span lies on pages of the old class's kept spans";
    EXPECT_LT(cache->kept_empty_bytes, kept_before);
    strata_free(block);
  }).join();
}

TEST(ThreadCacheDeathTest, ASecondFreeOfABlockIsCaughtAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      std::thread([] {
        for (int i = 0; i < 300; ++i) strata_free(strata_malloc(16));
        std::vector<void*> blocks;
        for (int i = 0; i < 100; ++i) blocks.push_back(strata_malloc(256));
        strata_free(blocks[7]);
        strata_free(blocks[7]);
        std::fprintf(stderr, "not caught\n");
        std::exit(0);
      }).join(),
      "double free");
}

// A block freed again while it waits on its thread's allocation word (freed,
// then taken back with its word, not handed out yet) is not free in its
// span, so the second free finds its bit clear; it is caught when the
// span's count says empty while the word still holds blocks.
TEST(ThreadCacheDeathTest, ASecondFreeOfABlockOnTheAllocationWordIsCaughtWhenItsSpanEmpties) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      std::thread([] {
        for (int i = 0; i < 300; ++i) strata_free(strata_malloc(16));
        ThreadCache* cache = current_cache(false);
        const std::size_t size = 512;  // 16 blocks a span; a span with 2 free blocks is worth a word
        const std::size_t cls = size_to_class(size);
        const std::uint32_t per_span = class_info(cls).span_objects;
        if (size_class_build::wake_frees_for(per_span) != 2) std::exit(2);
        // Use up whatever the class's current span has, then one whole span.
        std::vector<void*> warm;
        while (cache->words[cls].bits != 0) warm.push_back(strata_malloc(size));
        std::vector<void*> blocks;
        for (std::uint32_t i = 0; i < per_span; ++i) blocks.push_back(strata_malloc(size));
        Span* span = g_page_map.lookup(blocks[0]);
        if (cache->current[cls] != span || cache->words[cls].bits != 0) std::exit(3);
        strata_free(blocks[0]);
        strata_free(blocks[1]);
        void* again = strata_malloc(size);  // takes the word {0, 1}, hands out block 0
        if (again != blocks[0]) std::exit(4);
        strata_free(blocks[1]);  // on the word: not free in the span yet
        for (std::uint32_t i = 0; i < per_span; ++i)
          if (i != 1) strata_free(blocks[i]);
        std::fprintf(stderr, "not caught\n");
        std::exit(0);
      }).join(),
      "double free");
}

TEST(ThreadCache, ABurstsEmptySpansServeTheNextBurstThenGoBackOnceIdle) {
  const long decay_before = strata_option_get(STRATA_OPTION_DECAY_MS);
  ASSERT_EQ(strata_option_set(STRATA_OPTION_DECAY_MS, 100), 0);
  std::thread([] {
    ThreadCache* cache = become_busy();
    ASSERT_NE(cache, nullptr);
    // 16 MiB of 1 KiB blocks: four times STRATA_THREAD_CACHE_BYTES.
    const std::size_t count = 4 * cache->max_kept_bytes / 1024;
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < count; ++i) blocks.push_back(strata_malloc(1024));
    for (void* b : blocks) strata_free(b);
    blocks.clear();
    EXPECT_GT(cache->kept_empty_bytes, cache->max_kept_bytes) << "a burst keeps more than the long-term bound";
    EXPECT_LE(cache->kept_empty_bytes, cache->max_kept_bytes * kBurstKeptFactor);
    const std::uint64_t spans_new = cache->stats.spans_new;
    for (std::size_t i = 0; i < count; ++i) blocks.push_back(strata_malloc(1024));
    EXPECT_LE(cache->stats.spans_new - spans_new, 1u) << "the second burst reuses the first one's spans";
    for (void* b : blocks) strata_free(b);
    expect_counts_add_up(cache);
    // Idle for more than a decay period: the surplus goes back to the page heap.
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    housekeeping(cache);
    EXPECT_LE(cache->kept_empty_bytes, cache->max_kept_bytes);
    expect_counts_add_up(cache);
  }).join();
  strata_option_set(STRATA_OPTION_DECAY_MS, decay_before);
}

// After a burst left many empty spans, a small working set keeps coming
// from the spans it emptied last (still in the caches), instead of cycling
// through every span of the burst (each one cold again).
// A program that frees and allocates at random, most often a few hot
// slots (mimalloc-bench's alloc-test): its frees land one or two to a word
// in the words it took last. A refill takes the lowest word only when it
// holds a few blocks, else the next word round the span, so words stay
// worth their slow path: 10 blocks per word here (with the lowest word
// always, the rule until 2026-11-27: 2.5 here, 2.3 in alloc-test).
TEST(ThreadCache, RandomFreesStillRefillWordsOfSeveralBlocks) {
  on_a_thread_of_its_own(16, [&](ThreadCache* cache, std::size_t /*cls*/, const SizeClassInfo& /*info*/) {
    constexpr std::size_t kSlots = 8192;
    std::vector<void*> slots(kSlots, nullptr);
    std::mt19937 random(41);
    for (void*& slot : slots)
      if (random() & 1) slot = strata_malloc(16);
    auto toggle = [&slots](std::size_t i) {
      if (slots[i] != nullptr) {
        strata_free(slots[i]);
        slots[i] = nullptr;
      } else {
        slots[i] = strata_malloc(16);
        std::memset(slots[i], 0x5a, 16);
      }
    };
    // Half the operations on 64 slots, 40 % on 1,024, the rest on all.
    auto pick = [&random]() -> std::size_t {
      const std::uint32_t r = random() % 10;
      return random() % (r < 5 ? 64 : r < 9 ? 1024 : kSlots);
    };
    for (int i = 0; i < 100000; ++i) toggle(pick());  // a steady state
    const std::uint64_t words_before = cache->stats.words_taken;
    std::uint64_t mallocs = 0;
    for (int i = 0; i < 400000; ++i) {
      const std::size_t slot = pick();
      mallocs += slots[slot] == nullptr;
      toggle(slot);
    }
    const double blocks_per_word = double(mallocs) / double(cache->stats.words_taken - words_before);
    EXPECT_GE(blocks_per_word, 4.0) << mallocs << " mallocs";
    expect_counts_add_up(cache);
    for (void* slot : slots) strata_free(slot);
  });
}

TEST(ThreadCache, ASmallWorkingSetAfterABurstKeepsReusingTheSameSpans) {
  std::thread([] {
    ThreadCache* cache = become_busy();
    ASSERT_NE(cache, nullptr);
    std::vector<void*> blocks;
    for (int i = 0; i < 4096; ++i) blocks.push_back(strata_malloc(1024));  // 4 MiB
    for (void* b : blocks) strata_free(b);
    blocks.clear();
    ASSERT_GT(cache->kept_empty_bytes, std::size_t{1} << 20) << "the burst left kept empty spans";
    auto spans_of_a_round = [&blocks] {
      std::vector<Span*> spans;
      for (int i = 0; i < 200; ++i) {
        blocks.push_back(strata_malloc(1024));
        spans.push_back(g_page_map.lookup(blocks.back()));
      }
      for (void* b : blocks) strata_free(b);
      blocks.clear();
      return distinct(spans);
    };
    // Over 20 rounds the rounds use few spans beyond one round's (the span
    // the burst was carving, a current span that changes); taking the span
    // emptied first would bring in about one round's worth of new ones each
    // round (the burst left about 20 rounds' worth).
    const std::size_t one_round = spans_of_a_round().size();
    std::vector<Span*> all;
    for (int round = 1; round < 20; ++round)
      for (Span* span : spans_of_a_round()) all.push_back(span);
    EXPECT_LE(distinct(all).size(), 2 * one_round) << "one round uses " << one_round << " spans";
    expect_counts_add_up(cache);
  }).join();
}

TEST(ThreadCache, LargerBlocksAreSpansOfTheirOwnUntilTheThreadKeepsAskingForTheirClass) {
  std::thread([] {
    void* young = strata_malloc(3000);
    EXPECT_EQ(g_page_map.lookup(young)->state, SpanState::kLarge) << "a young thread's 3000 B block";
    strata_free(young);
    ThreadCache* cache = become_busy();
    ASSERT_NE(cache, nullptr);
    const std::size_t cls = size_to_class(3000);
    void* first = strata_malloc(3000);
    Span* span = g_page_map.lookup(first);
    EXPECT_EQ(span->state, SpanState::kLarge) << "freed, its pages serve any size";
    EXPECT_EQ(span->page_count, 1u);
    EXPECT_EQ(cache->current[cls], nullptr) << "no span of the class yet";
    void* small = strata_malloc(2000);
    EXPECT_EQ(g_page_map.lookup(small)->state, SpanState::kSmall) << "2 KiB and less: classes at once";
    strata_free(first);
    strata_free(small);
    // A class the thread keeps asking for gets its span.
    std::vector<void*> blocks;
    for (int i = 0; i < 40; ++i) blocks.push_back(strata_malloc(3000));
    EXPECT_EQ(g_page_map.lookup(blocks.back())->state, SpanState::kSmall) << "the 40th block of the class";
    EXPECT_NE(cache->current[cls], nullptr);
    void* other = strata_malloc(5000);
    EXPECT_EQ(g_page_map.lookup(other)->state, SpanState::kLarge) << "another class starts over";
    strata_free(other);
    for (void* b : blocks) strata_free(b);
  }).join();
}

TEST(ThreadCache, ThreadsThatGrowAtOnceTakeTheirSpansFromRunwaysOfTheirOwn) {
  // Two threads take turns, each allocating a span's worth of 64 B blocks
  // per turn, so that their requests to the page heap alternate. Each
  // thread's spans must still follow each other in memory (its runway),
  // not alternate with the other thread's.
  constexpr int kTurns = 24;
  constexpr int kBlocksPerTurn = 512;
  // Free pages earlier tests left resident would be reused first (holes);
  // given back, they read as never touched and serve as runways.
  strata_release_free_memory();
  std::atomic<int> turn{0};
  std::vector<void*> blocks[2];
  auto run = [&](int me) {
    for (int i = 0; i < 300; ++i) blocks[me].push_back(strata_malloc(64));  // past the young phase
    for (int t = 0; t < kTurns; ++t) {
      while (turn.load() != me) std::this_thread::yield();
      for (int i = 0; i < kBlocksPerTurn; ++i) blocks[me].push_back(strata_malloc(64));
      turn.store(1 - me);
    }
  };
  std::thread first(run, 0), second(run, 1);
  first.join();
  second.join();
  for (int me = 0; me < 2; ++me) {
    std::vector<Span*> taken;  // in the order the thread took them
    for (void* b : blocks[me]) {
      Span* span = g_page_map.lookup(b);
      if (taken.empty() || taken.back() != span) taken.push_back(span);
    }
    ASSERT_GE(taken.size(), 20u) << "each thread took a span per turn";
    int jumps = 0;
    for (std::size_t i = 1; i < taken.size(); ++i)
      if (taken[i]->first_page != taken[i - 1]->first_page + taken[i - 1]->page_count) ++jumps;
    // A jump where a runway ends (8 spans of 4 pages each) and around the
    // spans of the young phase; without runways nearly every span is one
    // (22-27 of 25-29).
    EXPECT_LE(jumps, static_cast<int>(taken.size() / 3)) << "thread " << me << ": " << taken.size() << " spans";
    for (void* b : blocks[me]) strata_free(b);
  }
}
