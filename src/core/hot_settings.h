// Settings the hot paths read, fixed at start-up, together on one cache line
// that every small malloc reads (so the line stays in L1). A lone global on
// a line of its own can sit in the same L1 set as every page-aligned address
// (64 sets of 8 ways: address bits 6-11), which spans, thread caches and
// large blocks all are, and miss there: the popcnt flag did, on almost every
// refill of the server workload under callgrind's cache simulation.
#pragma once

#include <cstddef>

#include "platform/visibility.h"

namespace strata::detail {

struct alignas(64) HotSettings {
  // Sizes below this take the inline malloc path (api/allocator.h): 0 until
  // the process is set up and in checking mode (every malloc then reaches
  // the general path, which sets up and checks), 1025 otherwise. A variable
  // limit costs the same one compare as a constant one.
  std::size_t fast_size_limit = 0;
  // The CPU has popcnt (core/span_blocks.h, count_bits).
  bool has_popcnt = false;
};

extern STRATA_INTERNAL HotSettings g_hot;

}  // namespace strata::detail
