// The page map: lazy leaves, lookups, owner tags.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "backend/page_heap.h"
#include "central/central_cache.h"
#include "core/page_map.h"
#include "core/size_classes.h"
#include "frontend/thread_cache.h"
#include "platform/os.h"

using namespace strata::detail;

TEST(PageMap, UnknownAddressesMapToNothing) {
  int on_stack = 0;
  EXPECT_EQ(g_page_map.lookup(&on_stack), nullptr);
  EXPECT_EQ(g_page_map.lookup(nullptr), nullptr);
  EXPECT_EQ(g_page_map.owner_tag(nullptr), 0u);
  EXPECT_EQ(g_page_map.lookup(reinterpret_cast<void*>(std::uintptr_t{1} << 46)), nullptr);
}

TEST(PageMap, SetAndLookupAcrossALeafBoundary) {
  // A private page map: the process's one stays untouched by this test.
  static PageMap map;
  // Pages straddling a 2^18-page leaf boundary, far from anything mapped.
  PageId first = (PageId{3} << PageMap::kLeafBits) - 2;
  ASSERT_TRUE(map.ensure(first, 4));
  Span span;
  map.set_range(first, 4, &span);
  for (PageId p = first; p < first + 4; ++p) {
    EXPECT_EQ(map.lookup_page(p), &span);
    const char* inside = reinterpret_cast<const char*>(address_of(p)) + 123;
    EXPECT_EQ(map.lookup(inside), &span);
  }
  EXPECT_EQ(map.lookup_page(first - 1), nullptr);
  EXPECT_EQ(map.lookup_page(first + 4), nullptr);
  // Tags, and each page's class and place in its span, on both sides of
  // the leaf boundary.
  map.set_owner_tag(first, 4, 0x1234000);
  map.set_page_classes(first, 4, 48);
  for (PageId p = first; p < first + 4; ++p) {
    const char* inside = reinterpret_cast<const char*>(address_of(p)) + 4000;
    EXPECT_EQ(map.owner_tag(inside), 0x1234000u);
    EXPECT_EQ(map.entry_ref(inside).page_class().size_class, 48u);
    EXPECT_EQ(map.entry_ref(inside).page_class().page_offset, (p - first) * kPageSize);
    EXPECT_EQ(map.entry_ref(inside).span(), &span);
  }
  map.set_owner_tag(first + 1, 1, 0);
  map.set_page_classes(first + 1, 1, 7);  // a one-page span of class 7
  EXPECT_EQ(map.owner_tag(reinterpret_cast<void*>(address_of(first + 1))), 0u);
  EXPECT_EQ(map.entry_ref(reinterpret_cast<void*>(address_of(first + 1))).page_class().size_class, 7u);
  EXPECT_EQ(map.entry_ref(reinterpret_cast<void*>(address_of(first + 1))).page_class().page_offset, 0u);
  EXPECT_EQ(map.entry_ref(reinterpret_cast<void*>(address_of(first + 3))).page_class().page_offset, 3 * kPageSize);
  EXPECT_EQ(map.leaf_bytes(), 2 * sizeof(PageMap::Leaf));
}

// The layout: flat unless STRATA_FLAT_PAGE_MAP=0 or the OS refuses the
// reservation (probed here the same way: 320 GiB, MAP_NORESERVE).
TEST(PageMap, LayoutFollowsTheOptionAndTheOS) {
  Span* span = g_page_heap.allocate(1);  // the process's map has chosen by now
  ASSERT_NE(span, nullptr);
  const char* option = std::getenv("STRATA_FLAT_PAGE_MAP");
  const bool radix_asked = option != nullptr && std::strcmp(option, "0") == 0;
  bool os_grants = false;
  const std::size_t bytes =
      (std::size_t{1} << (PageMap::kFlatMaxBits - kPageShift)) * (sizeof(PageMap::Entry) + sizeof(std::uint32_t));
  if (void* probe = os_map(bytes, kPageSize)) {
    os_grants = true;
    os_unmap(probe, bytes);
  }
  EXPECT_EQ(g_page_map.flat_base() != nullptr, !radix_asked && os_grants);
  // Either way the span's pages map to it, and a page beside the heap to nothing.
  EXPECT_EQ(g_page_map.lookup(span->start()), span);
  EXPECT_EQ(g_page_map.lookup_page(span->first_page + span->page_count + (PageId{1} << 20)), nullptr);
  g_page_heap.deallocate(span);
}

TEST(PageMap, HeapPagesMapToTheirSpan) {
  Span* span = g_page_heap.allocate(5);
  ASSERT_NE(span, nullptr);
  for (std::size_t i = 0; i < 5; ++i)
    EXPECT_EQ(g_page_map.lookup_page(span->first_page + i), span);
  g_page_heap.deallocate(span);
}

// What a remote free checks without reading the span (frontend/
// thread_cache.cpp, deallocate_slow): every page of a span a thread owns,
// of every class, gives the class, and a block's offset in its span from
// the page's offset in it; block starts pass, interior pointers do not.
TEST(PageMap, PageClassesGiveEveryBlocksOffsetInItsSpan) {
  auto owner = std::make_unique<ThreadCache>();  // a stand-in: only its address is used
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    const SizeClassInfo& info = class_info(cls);
    Span* span = g_page_heap.allocate(info.span_pages, 1, SpanState::kSmall);
    ASSERT_NE(span, nullptr);
    init_small_span(span, cls, owner.get());
    auto offset_from_page_map = [](const char* p) {
      PageMap::PageClass page = g_page_map.entry_ref(p).page_class();
      return std::make_pair(page.size_class, page.page_offset | (reinterpret_cast<std::uintptr_t>(p) & (kPageSize - 1)));
    };
    const char* start = static_cast<const char*>(span->start());
    for (std::size_t i = 0; i < info.span_objects; ++i) {
      const char* block = start + i * info.size;
      auto [page_class, offset] = offset_from_page_map(block);
      ASSERT_EQ(page_class, cls);
      ASSERT_EQ(offset, i * info.size) << "class " << cls << " block " << i;
      EXPECT_TRUE(is_block_start(offset, page_class));
      // An interior pointer, on the block's last byte (the next page, for
      // blocks that cross one).
      auto [last_class, last_offset] = offset_from_page_map(block + info.size - 1);
      ASSERT_EQ(last_class, cls);
      EXPECT_FALSE(is_block_start(last_offset, last_class)) << "class " << cls << " block " << i;
    }
    g_page_heap.deallocate(span);
  }
}
