// The statistics check: strata_stats against the ledger of live blocks
// (block_ledger.hpp) and against what the thread caches hold, walked
// (engine_view.hpp). Called only while the simulated threads are quiet
// (they take turns), when strata documents its sums as exact: every
// comparison is exact unless a comment says why it is a bound.
#pragma once

namespace strata_fuzz {

void check_statistics();

}  // namespace strata_fuzz
