// The allocation contract run on the strata_* C API (strata_testable: the
// engine beside the system malloc, so this also runs under sanitizers).
#include "allocation_contract.hpp"

#include <strata/strata.h>

#include <gtest/gtest.h>

#include <cstring>

namespace strata_test {

const AllocApi& surface_under_test() {
  static const AllocApi api = {"strata_c_api",      strata_malloc,  strata_calloc,
                               strata_realloc,      strata_free,    strata_free_sized,
                               strata_aligned_alloc, strata_usable_size, true};
  return api;
}

namespace {

// The C API and the override agree on what a zero-size block is: a real one.
TEST(StrataCApi, ReallocToZeroReturnsAUsableBlock) {
  void* p = strata_malloc(40);
  ASSERT_NE(p, nullptr);
  void* q = strata_realloc(p, 0);
  ASSERT_NE(q, nullptr);
  std::memset(q, 1, strata_usable_size(q));
  strata_free(q);
}

TEST(StrataCApi, CallocOfManySmallObjectsIsZeroAndUsable) {
  auto* p = static_cast<unsigned char*>(strata_calloc(1000, 3));
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(p[i], 0);
  EXPECT_GE(strata_usable_size(p), 3000u);
  strata_free_sized(p, 3000);
}

}  // namespace
}  // namespace strata_test
