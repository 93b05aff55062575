// The page map: lazy leaves, lookups, owner tags.
#include <gtest/gtest.h>

#include "backend/page_heap.h"
#include "core/page_map.h"
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
  map.set_owner_tag(first, 4, 0x1234000 | 48);
  EXPECT_EQ(map.owner_tag(reinterpret_cast<void*>(address_of(first + 3))), 0x1234000u | 48);
  EXPECT_EQ(map.leaf_bytes(), 2 * sizeof(PageMap::Entry) * PageMap::kLeafEntries);
}

TEST(PageMap, HeapPagesMapToTheirSpan) {
  Span* span = g_page_heap.allocate(5);
  ASSERT_NE(span, nullptr);
  for (std::size_t i = 0; i < 5; ++i)
    EXPECT_EQ(g_page_map.lookup_page(span->first_page + i), span);
  g_page_heap.deallocate(span);
}
