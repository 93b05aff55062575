// The page heap: splitting, coalescing at both ends, best fit, alignment,
// growing and shrinking in place, and its own invariant checker.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "backend/page_heap.h"
#include "platform/options.h"
#include "core/page_map.h"

using namespace strata::detail;

namespace {

// Each test gets a heap of its own (sharing the process's page map), primed
// with one large free run so that consecutive allocations are neighbours.
PageHeap& fresh_heap() {
  // Static storage: a heap's pages stay registered in the process's page
  // map, so a heap must outlive the test (and not look like a leak).
  static PageHeap heaps[16];
  static int used = 0;
  PageHeap* heap = &heaps[used++];
  Span* run = heap->allocate(4096);
  EXPECT_NE(run, nullptr);
  heap->deallocate(run);
  return *heap;
}

void expect_valid(PageHeap& heap) {
  const char* problem = heap.validate();
  EXPECT_EQ(problem, nullptr) << problem;
}

}  // namespace

TEST(PageHeap, AllocateGivesWholeMappedPages) {
  PageHeap heap_without_priming;
  PageHeap& heap = heap_without_priming;
  Span* span = heap.allocate(3);
  ASSERT_NE(span, nullptr);
  EXPECT_EQ(span->page_count, 3u);
  EXPECT_EQ(span->state, SpanState::kLarge);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(span->start()) % kPageSize, 0u);
  // Fresh pages from the OS read as zero and the span knows it.
  EXPECT_TRUE(span->pages_zero);
  auto* bytes = static_cast<unsigned char*>(span->start());
  for (std::size_t i = 0; i < span->bytes(); i += 512) EXPECT_EQ(bytes[i], 0);
  bytes[0] = 1;
  bytes[span->bytes() - 1] = 2;
  heap.deallocate(span);
  expect_valid(heap);
}

TEST(PageHeap, CoalescesWithBothNeighbours) {
  PageHeap& heap = fresh_heap();
  // Carving from one free run gives neighbours in address order.
  Span* a = heap.allocate(4);
  Span* b = heap.allocate(4);
  Span* c = heap.allocate(4);
  Span* guard = heap.allocate(1);  // keeps c's right side in use
  ASSERT_TRUE(a && b && c && guard);
  ASSERT_EQ(b->first_page, a->first_page + 4);
  ASSERT_EQ(c->first_page, b->first_page + 4);
  PageId start = a->first_page;
  PageHeapStats before = heap.stats();
  heap.deallocate(a);
  heap.deallocate(c);
  expect_valid(heap);
  heap.deallocate(b);  // merges with a on the left and c on the right
  expect_valid(heap);
  Span* merged = g_page_map.lookup_page(start);
  ASSERT_NE(merged, nullptr);
  EXPECT_EQ(merged->state, SpanState::kFree);
  EXPECT_EQ(merged->first_page, start);
  EXPECT_GE(merged->page_count, 12u);
  EXPECT_EQ(heap.stats().in_use_spans, before.in_use_spans - 3);
  // The whole run comes back in one piece.
  Span* again = heap.allocate(12);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->first_page, start);
  heap.deallocate(again);
  heap.deallocate(guard);
  expect_valid(heap);
}

TEST(PageHeap, LargeFreeSpansAreBestFitLowestAddressFirst) {
  PageHeap& heap = fresh_heap();
  // Three runs of different lengths over 128 pages, separated by guards.
  std::vector<Span*> keep;
  Span* big = heap.allocate(400);
  keep.push_back(heap.allocate(1));
  Span* fit = heap.allocate(200);
  keep.push_back(heap.allocate(1));
  Span* fit_too = heap.allocate(200);
  keep.push_back(heap.allocate(1));
  ASSERT_TRUE(big && fit && fit_too);
  PageId fit_page = fit->first_page, fit_too_page = fit_too->first_page;
  ASSERT_LT(fit_page, fit_too_page);
  heap.deallocate(big);
  heap.deallocate(fit_too);
  heap.deallocate(fit);
  expect_valid(heap);
  Span* chosen = heap.allocate(150);  // 200 fits better than 400; lowest address wins
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(chosen->first_page, fit_page);
  heap.deallocate(chosen);
  for (Span* s : keep) heap.deallocate(s);
  expect_valid(heap);
}

TEST(PageHeap, AlignedSpans) {
  PageHeap& heap = fresh_heap();
  for (std::size_t align_pages : {2u, 8u, 64u, 256u}) {
    Span* span = heap.allocate(3, align_pages);
    ASSERT_NE(span, nullptr);
    EXPECT_EQ(span->first_page % align_pages, 0u);
    EXPECT_EQ(span->page_count, 3u);
    heap.deallocate(span);
  }
  expect_valid(heap);
}

TEST(PageHeap, GrowsInPlaceWhenTheNextPagesAreFreeAndShrinks) {
  PageHeap& heap = fresh_heap();
  Span* span = heap.allocate(40);
  Span* next = heap.allocate(40);
  ASSERT_TRUE(span && next);
  ASSERT_EQ(next->first_page, span->first_page + 40);
  EXPECT_FALSE(heap.try_grow(span, 60)) << "the next span is in use";
  heap.deallocate(next);
  EXPECT_FALSE(heap.try_grow(span, std::size_t{1} << 30)) << "not that many free pages follow";
  EXPECT_TRUE(heap.try_grow(span, 60));
  EXPECT_EQ(span->page_count, 60u);
  for (std::size_t i = 0; i < 60; ++i) EXPECT_EQ(g_page_map.lookup_page(span->first_page + i), span);
  expect_valid(heap);
  heap.shrink(span, 10);
  EXPECT_EQ(span->page_count, 10u);
  Span* tail = g_page_map.lookup_page(span->first_page + 10);
  ASSERT_NE(tail, nullptr);
  EXPECT_EQ(tail->state, SpanState::kFree);
  expect_valid(heap);
  heap.deallocate(span);
  expect_valid(heap);
}

TEST(PageHeap, ReservationsAreLargeNotOnePerAllocation) {
  PageHeap heap;
  PageHeapStats before = heap.stats();
  std::vector<Span*> spans;
  for (int i = 0; i < 200; ++i) spans.push_back(heap.allocate(1 + i % 7));
  PageHeapStats during = heap.stats();
  EXPECT_LE(during.reservations - before.reservations, 4u);
  for (Span* s : spans) heap.deallocate(s);
  expect_valid(heap);
  // The same cycle again needs no new memory at all.
  PageHeapStats after_first = heap.stats();
  for (int i = 0; i < 200; ++i) spans[i] = heap.allocate(1 + i % 7);
  for (Span* s : spans) heap.deallocate(s);
  EXPECT_EQ(heap.stats().reservations, after_first.reservations);
  EXPECT_EQ(heap.stats().mapped_bytes % kReservationBytes, 0u);
}

// The untouched rest of the newest reservation is used only when no free
// span fits: a program that allocates a heap spanning several reservations,
// frees it and allocates it again gets the pages it touched before, not
// never-touched ones. With the rest filed as an ordinary free span, it
// merged with the freed spans around it whenever the OS had placed the
// reservations next to each other (as in the bulk benchmark's process, not
// always in this one), and the lowest-address-first second pass walked
// through it before the touched pages above: 126 MiB resident for 98 MiB.
TEST(PageHeap, ASecondPassReusesFreedPagesBeforeUntouchedOnes) {
  static PageHeap heap;  // static: its pages stay in the process's page map
  constexpr std::size_t kSpans = 6400;  // of 2 pages: 100 MiB over reservations of 2, 4, ..., 64 MiB
  std::vector<Span*> spans;
  std::vector<PageId> first_pass;
  for (std::size_t i = 0; i < kSpans; ++i) {
    spans.push_back(heap.allocate(2));
    ASSERT_NE(spans.back(), nullptr);
    first_pass.push_back(spans.back()->first_page);
  }
  std::size_t mapped = heap.stats().mapped_bytes;
  EXPECT_GT(heap.stats().reservations, 2u);
  EXPECT_GT(heap.stats().fresh_bytes, 0u);  // the newest reservation has a rest
  for (Span* span : spans) heap.deallocate(span);
  expect_valid(heap);
  std::sort(first_pass.begin(), first_pass.end());
  spans.clear();
  for (std::size_t i = 0; i < kSpans; ++i) {
    Span* span = heap.allocate(2);
    ASSERT_NE(span, nullptr);
    ASSERT_TRUE(std::binary_search(first_pass.begin(), first_pass.end(), span->first_page))
        << "span " << i << " of the second pass lies in pages the first pass never used";
    spans.push_back(span);
  }
  EXPECT_EQ(heap.stats().mapped_bytes, mapped);
  for (Span* span : spans) heap.deallocate(span);
  expect_valid(heap);
}

TEST(PageHeap, DecommitMakesFreePagesZeroAndCountsThem) {
  PageHeap& heap = fresh_heap();
  Span* span = heap.allocate(16);
  ASSERT_NE(span, nullptr);
  PageId first = span->first_page;
  auto* bytes = static_cast<unsigned char*>(span->start());
  for (std::size_t i = 0; i < span->bytes(); ++i) bytes[i] = 0xab;
  heap.deallocate(span);
  std::size_t released = heap.decommit_free(0, 0);
  EXPECT_GE(released, 16 * kPageSize);
  PageHeapStats stats = heap.stats();
  EXPECT_EQ(stats.decommitted_bytes, stats.free_bytes);
  Span* again = heap.allocate(16);
  ASSERT_NE(again, nullptr);
  if (again->first_page == first) {
    EXPECT_TRUE(again->pages_zero);
    EXPECT_EQ(static_cast<unsigned char*>(again->start())[100], 0);
  }
  heap.deallocate(again);
  expect_valid(heap);
}

TEST(PageHeap, HugePagePolicyFillsTheLowestAddressFirst) {
  strata::detail::g_options.huge_pages = true;
  PageHeap& heap = fresh_heap();
  // Free runs of the same length at increasing addresses, separated by guards.
  std::vector<Span*> runs, guards;
  for (int i = 0; i < 6; ++i) {
    runs.push_back(heap.allocate(3));
    guards.push_back(heap.allocate(1));
  }
  PageId lowest = runs[0]->first_page;
  for (Span* r : runs) lowest = r->first_page < lowest ? r->first_page : lowest;
  for (int i = 0; i < 6; ++i) heap.deallocate(runs[i]);  // freed low to high: LIFO would pick the highest
  expect_valid(heap);
  // A one-page request takes the lowest free run, not the last one freed.
  Span* first = heap.allocate(1);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->first_page, lowest);
  heap.deallocate(first);
  for (Span* g : guards) heap.deallocate(g);
  expect_valid(heap);
  strata::detail::g_options.huge_pages = false;
}

TEST(PageHeap, RunwaysKeepTheSpansOfThreadsThatGrowAtOnceApart) {
  static PageHeap heap;  // no free pages yet: every request makes the heap grow
  constexpr std::size_t kSpanPages = 4;
  constexpr int kSpans = 6;  // 24 pages: within one runway of kRunwayPages (32)
  Span* runway_a = nullptr;
  Span* runway_b = nullptr;
  std::vector<Span*> a, b;
  for (int i = 0; i < kSpans; ++i) {  // two threads' requests, strictly alternating
    a.push_back(heap.allocate_small(kSpanPages, runway_a));
    b.push_back(heap.allocate_small(kSpanPages, runway_b));
    ASSERT_NE(a.back(), nullptr);
    ASSERT_NE(b.back(), nullptr);
  }
  for (int i = 0; i < kSpans; ++i) {
    EXPECT_EQ(a[i]->state, SpanState::kSmall);
    EXPECT_EQ(a[i]->page_count, kSpanPages);
    EXPECT_TRUE(a[i]->pages_zero) << "carved from pages never touched";
    EXPECT_EQ(g_page_map.lookup_page(a[i]->first_page + kSpanPages - 1), a[i]) << "every page maps to its span";
  }
  for (int i = 1; i < kSpans; ++i) {
    EXPECT_EQ(a[i]->first_page, a[i - 1]->first_page + kSpanPages) << "thread a's spans follow each other";
    EXPECT_EQ(b[i]->first_page, b[i - 1]->first_page + kSpanPages) << "thread b's spans follow each other";
  }
  ASSERT_NE(runway_a, nullptr);
  ASSERT_NE(runway_b, nullptr);
  const std::size_t rest = PageHeap::kRunwayPages - kSpans * kSpanPages;
  EXPECT_EQ(runway_a->page_count, rest);
  PageHeapStats stats = heap.stats();
  EXPECT_EQ(stats.runway_bytes, 2 * rest * kPageSize);
  EXPECT_EQ(stats.mapped_bytes, stats.in_use_bytes + stats.free_bytes + stats.fresh_bytes)
      << "the runways count as free pages";
  EXPECT_EQ(stats.decommitted_bytes, stats.free_bytes) << "the runways' pages were never touched";
  expect_valid(heap);

  // Free pages that fit come before the runway: a span freed by b serves a.
  PageId hole = b[3]->first_page;
  heap.deallocate(b[3]);
  Span* reused = heap.allocate_small(kSpanPages, runway_a);
  ASSERT_NE(reused, nullptr);
  EXPECT_EQ(reused->first_page, hole);
  EXPECT_EQ(runway_a->page_count, rest) << "the runway was not touched";
  b[3] = reused;

  // A runway given back is free memory like any other, and merges.
  heap.release_runway(runway_a);
  EXPECT_EQ(runway_a, nullptr);
  EXPECT_EQ(heap.stats().runway_bytes, rest * kPageSize);
  expect_valid(heap);
  for (Span* s : a) heap.deallocate(s);
  for (Span* s : b) heap.deallocate(s);
  heap.release_runway(runway_b);
  stats = heap.stats();
  EXPECT_EQ(stats.runway_bytes, 0u);
  EXPECT_EQ(stats.in_use_bytes, 0u);
  EXPECT_EQ(stats.free_spans, 1u) << "everything coalesced into one free span";
  expect_valid(heap);
}

TEST(PageHeap, ARunwayTooShortGoesBackAndTheHeapGrowsByANewOne) {
  static PageHeap heap;
  Span* runway = nullptr;
  Span* first = heap.allocate_small(60, runway);  // 60 of a 240-page runway (four spans' worth)
  ASSERT_NE(first, nullptr);
  ASSERT_NE(runway, nullptr);
  EXPECT_EQ(runway->page_count, 180u);
  std::vector<Span*> spans = {first};
  for (int i = 0; i < 3; ++i) spans.push_back(heap.allocate_small(60, runway));
  EXPECT_EQ(runway, nullptr) << "four spans used the runway up";
  Span* next = heap.allocate_small(60, runway);
  ASSERT_NE(next, nullptr);
  ASSERT_NE(runway, nullptr);
  spans.push_back(next);
  PageId rest_first = runway->first_page;
  // 200 pages do not fit in the rest (180): it goes back free and the heap
  // grows by a new runway.
  spans.push_back(heap.allocate_small(200, runway));
  ASSERT_NE(spans.back(), nullptr);
  ASSERT_NE(runway, nullptr);
  EXPECT_EQ(heap.stats().runway_bytes, runway->bytes()) << "the short rest is no runway any more";
  Span* freed_rest = g_page_map.lookup_page(rest_first);
  ASSERT_NE(freed_rest, nullptr);
  EXPECT_TRUE(freed_rest->state == SpanState::kFree || freed_rest == runway)
      << "the old rest is free pages now (or merged into the new runway)";
  expect_valid(heap);
  for (Span* s : spans) heap.deallocate(s);
  heap.release_runway(runway);
  EXPECT_EQ(heap.stats().runway_bytes, 0u);
  expect_valid(heap);
}
