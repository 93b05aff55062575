// What the statistics check asks the engine directly, because no public
// function tells it: where a live block lives (a small span of which class,
// a large span of how many bytes, a heap-profiling sample), what each
// thread cache holds (allocation lists, kept empty spans, outbox, inbox)
// and what each small span holds free, walked block by block. Everything is read while the simulated threads are quiet
// (they take turns), so plain reads see a settled engine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/size_classes.h"

namespace strata::detail {
struct Sample;
}

namespace strata_fuzz {

using strata::detail::kNumClasses;

struct BlockPlace {
  bool small = false;          // a block of a size-class span
  std::size_t size_class = 0;  // small: its class
  std::size_t span_bytes = 0;  // large (and sampled): the bytes of its span
  const strata::detail::Sample* sample = nullptr;  // heap profiling's record, if sampled
  std::size_t sample_requested = 0;   // the record's request and usable size
  std::size_t sample_usable = 0;
  const void* sample_block = nullptr;
};

// Where the live block `p` is; a model violation if strata has no such block.
BlockPlace place_of(const void* p);

// What the thread caches hold, walked (not read from their counters).
struct CacheHoldings {
  std::size_t live_caches = 0;                // caches of live threads
  std::uint64_t listed[kNumClasses] = {};     // blocks on allocation lists, by class
  std::uint64_t listed_bytes = 0;
  std::uint64_t in_transit[kNumClasses] = {}; // freed blocks in outboxes and inboxes, by class
};

// Walks every thread cache and checks its bounds on the way (a model
// violation on the first one broken):
//  - an allocation list holds exactly `avail` blocks, all of the class's
//    current span, so at most one span's worth;
//  - kept empty spans add up to `kept_empty_bytes`, which stays within the
//    thread's burst bound (kBurstKeptFactor x STRATA_THREAD_CACHE_BYTES);
//  - the outbox's parcels hold exactly what its counters say, under the
//    1 MiB that makes it flush.
CacheHoldings inspect_caches();

// The small spans, each walked: how many of each class, and their free
// blocks (own free list, never-used range, parked blocks), counted one by
// one rather than derived from the span's countdown.
// A class's spans are short or long (core/size_classes.h): their blocks and
// bytes are summed span by span, each span's length checked against the
// class table.
struct SpanHoldings {
  std::uint64_t spans[kNumClasses] = {};
  std::uint64_t blocks[kNumClasses] = {};
  std::uint64_t bytes[kNumClasses] = {};
  std::uint64_t free_blocks[kNumClasses] = {};
};
SpanHoldings inspect_spans();

std::size_t class_block_size(std::size_t cls);

}  // namespace strata_fuzz
