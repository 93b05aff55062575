// Helpers of the unit tests that look inside a thread cache's spans.
#pragma once

#include <cstdint>

#include "core/span.h"
#include "frontend/thread_cache.h"

namespace strata_test {

// Free bits set in a span.
inline std::uint32_t free_bits_set(const strata::detail::Span* span) {
  std::uint32_t n = 0;
  for (std::size_t w = 0; w < strata::detail::kFreeWords; ++w)
    n += static_cast<std::uint32_t>(__builtin_popcountll(span->free_bits[w]));
  return n;
}

// Calls visit(span) for every span `cache` owns (current, partial, asleep).
template <class Visit>
void for_each_owned_span(strata::detail::ThreadCache* cache, Visit&& visit) {
  for (std::size_t cls = 1; cls < strata::detail::kNumClasses; ++cls) {
    if (cache->current[cls]) visit(cache->current[cls]);
    for (strata::detail::Span* s = cache->partial[cls].head; s; s = s->next) visit(s);
    for (strata::detail::Span* s = cache->sleeping[cls].head; s; s = s->next) visit(s);
  }
}

}  // namespace strata_test
