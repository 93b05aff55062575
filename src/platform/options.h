// Run-time configuration, read once from STRATA_* environment variables at
// the first allocation (without allocating) and adjustable through the C API.
// docs/configuration.md lists every option.
#pragma once

#include "platform/visibility.h"

#include <cstddef>
#include <cstdint>

namespace strata::detail {

struct Options {
  bool check = false;                               // STRATA_CHECK: checked slow paths, abort on misuse
  bool verbose = false;                             // STRATA_VERBOSE: warnings on stderr
  std::size_t thread_cache_bytes = std::size_t{4} << 20;  // STRATA_THREAD_CACHE_BYTES
  std::uint64_t decay_ms = 1000;                    // STRATA_DECAY_MS: free pages go back after this
  bool background_thread = false;                   // STRATA_BACKGROUND_THREAD
  bool huge_pages = false;                          // STRATA_HUGE_PAGES: MADV_HUGEPAGE on reservations
  bool show_stats = false;                          // STRATA_SHOW_STATS: print statistics at exit
  // Heap profiling (docs/profiling.md)
  std::uint64_t profile_sample = 2 << 20;           // STRATA_PROFILE_SAMPLE: mean bytes between samples, 0 = off
  bool profile = false;                             // STRATA_PROFILE: write <path>.<pid>.heap at exit
  std::uint32_t profile_top = 0;                    // STRATA_PROFILE_TOP: print the top N sites at exit
  char profile_path[512] = "strata";                // STRATA_PROFILE_PATH: prefix of the file written at exit
};

extern STRATA_INTERNAL Options g_options;

// Reads the environment; malformed values warn on stderr and keep the default.
void load_options() noexcept;

// STRATA_FLAT_PAGE_MAP (default on; 0 asks for the radix page map, as when
// the OS refuses the flat one's reservation: core/page_map.h). Read from the
// environment when the page map chooses its layout, which may come before
// load_options (a unit test's first page heap growth).
bool flat_page_map_wanted() noexcept;

}  // namespace strata::detail
