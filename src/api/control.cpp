// Run-time control: giving memory back, options, the optional background
// thread, and the statistics printed at exit.
#include <cerrno>
#include <ctime>
#include <pthread.h>

#include "backend/background_thread.h"
#include "backend/page_heap.h"
#include "central/central_cache.h"
#include "frontend/thread_cache.h"
#include "platform/options.h"
#include "profile/sampler.h"
#include "strata/strata.h"

using namespace strata::detail;


extern "C" size_t strata_release_free_memory(void) {
  ensure_initialized();
  std::size_t released = 0;
  if (ThreadCache* cache = current_cache(false)) released += flush_thread_cache(cache);
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) released += g_central[cls].park_free_units();
  return released + g_page_heap.decommit_free(0, 0);
}

extern "C" int strata_option_set(strata_option option, long value) {
  ensure_initialized();
  auto as_bool = [value](bool& target) {
    if (value != 0 && value != 1) return EINVAL;
    target = value == 1;
    return 0;
  };
  switch (option) {
    case STRATA_OPTION_THREAD_CACHE_BYTES:
      if (value < (64L << 10)) return EINVAL;
      g_options.thread_cache_bytes = static_cast<std::size_t>(value);
      if (ThreadCache* cache = current_cache(false)) cache->max_kept_bytes = g_options.thread_cache_bytes;
      return 0;
    case STRATA_OPTION_DECAY_MS:
      if (value < 0) return EINVAL;
      g_options.decay_ms = static_cast<std::uint64_t>(value);
      g_page_heap.set_decay(g_options.decay_ms * 1000000ull);
      return 0;
    case STRATA_OPTION_BACKGROUND_THREAD: {
      int rc = as_bool(g_options.background_thread);
      if (rc == 0) start_background_thread_if_wanted();
      return rc;
    }
    case STRATA_OPTION_HUGE_PAGES:
      return as_bool(g_options.huge_pages);
    case STRATA_OPTION_CHECK:
      // Thread caches are shaped for one mode when they are created.
      if ((value == 1) != g_options.check) return value == 0 || value == 1 ? EBUSY : EINVAL;
      return 0;
    case STRATA_OPTION_VERBOSE:
      return as_bool(g_options.verbose);
    case STRATA_OPTION_SHOW_STATS:
      return as_bool(g_options.show_stats);
    case STRATA_OPTION_PROFILE_SAMPLE:
      // Threads pick a new value up at their next sampling point (at once
      // when sampling was off: they look again every 1 GiB, see sampler.cpp).
      if (value < 0 || value > (1L << 40)) return EINVAL;
      __atomic_store_n(&g_options.profile_sample, static_cast<std::uint64_t>(value), __ATOMIC_RELAXED);
      t_bytes_until_sample = 0;  // the calling thread draws its next point now
      return 0;
  }
  return EINVAL;
}

extern "C" long strata_option_get(strata_option option) {
  ensure_initialized();
  switch (option) {
    case STRATA_OPTION_THREAD_CACHE_BYTES: return static_cast<long>(g_options.thread_cache_bytes);
    case STRATA_OPTION_DECAY_MS: return static_cast<long>(g_options.decay_ms);
    case STRATA_OPTION_BACKGROUND_THREAD: return g_options.background_thread;
    case STRATA_OPTION_HUGE_PAGES: return g_options.huge_pages;
    case STRATA_OPTION_CHECK: return g_options.check;
    case STRATA_OPTION_VERBOSE: return g_options.verbose;
    case STRATA_OPTION_SHOW_STATS: return g_options.show_stats;
    case STRATA_OPTION_PROFILE_SAMPLE: return static_cast<long>(__atomic_load_n(&g_options.profile_sample, __ATOMIC_RELAXED));
  }
  return -1;
}

// STRATA_SHOW_STATS=1: the table at exit of any program using strata.
__attribute__((destructor)) static void print_stats_at_exit() {
  if (g_options.show_stats) strata_print_stats(nullptr, nullptr);
}
