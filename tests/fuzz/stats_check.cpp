#include "stats_check.hpp"

#include "block_ledger.hpp"
#include "block_model.hpp"
#include "engine_view.hpp"
#include "operations.hpp"

#include <strata/strata.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace strata_fuzz {

namespace {

// What the statistics must say, from the ledger.
struct Expected {
  std::uint64_t small_bytes = 0;   // class sizes of blocks in small spans
  std::uint64_t large_bytes = 0;   // whole spans of large and sampled blocks
  std::uint64_t large_spans = 0;
  std::uint64_t blocks[kNumClasses] = {};
  std::uint64_t samples = 0;
  std::uint64_t sampled_bytes = 0;  // their requests, as heap profiling recorded them
};

// Prints what disagrees, then strata's whole report, and stops.
[[noreturn]] void stats_violation(const char* what, std::uint64_t first, const char* relation, std::uint64_t second,
                                  std::size_t cls = 0) {
  std::fprintf(stderr, "MODEL VIOLATION: statistics: %s", what);
  if (cls != 0) std::fprintf(stderr, " of class %zu", cls);
  std::fprintf(stderr, ": %llu %s %llu\n", static_cast<unsigned long long>(first), relation,
               static_cast<unsigned long long>(second));
  strata_print_stats(nullptr, nullptr);
  std::abort();
}

void expect_equal(const char* what, std::uint64_t strata_says, std::uint64_t model_says, std::size_t cls = 0) {
  if (strata_says != model_says) stats_violation(what, strata_says, "(strata) instead of", model_says, cls);
}

void expect_at_most(const char* what, std::uint64_t value, std::uint64_t bound) {
  if (value > bound) stats_violation(what, value, "above", bound);
}

Expected expected_from_ledger() {
  Expected e;
  ledger().for_each([&e](const void* p, const LedgerEntry& entry) {
    BlockPlace place = place_of(p);
    std::size_t usable = strata_usable_size(p);
    if (place.small) {
      std::size_t size = class_block_size(place.size_class);
      if (usable != size) model_violation("usable size is not the block's class size", p, entry.request, usable);
      e.small_bytes += size;
      ++e.blocks[place.size_class];
      return;
    }
    // A large block, or a sample: a span of its own, counted whole
    // (docs/configuration.md: large_in_use_bytes).
    e.large_bytes += place.span_bytes;
    ++e.large_spans;
    if (place.sample == nullptr) {
      if (usable != place.span_bytes) model_violation("usable size of a large block is not its span", p, entry.request, usable);
      return;
    }
    // A sample reports the usable size the block would have had unsampled,
    // and the request of the call that made it.
    if (place.sample_block != p) model_violation("a sample's record names another block", p, entry.request, 0);
    if (usable != place.sample_usable) model_violation("usable size of a sample is not its record's", p, entry.request, usable);
    if (usable < entry.request || usable > place.span_bytes)
      model_violation("a sample's usable size is outside its request and span", p, entry.request, usable);
    if (place.sample_requested != entry.recorded_request)
      model_violation("a sample records another request than the program's", p, entry.recorded_request,
                      place.sample_requested);
    ++e.samples;
    e.sampled_bytes += place.sample_requested;
  });
  return e;
}

// Counters that only ever grow, from the previous check.
struct Monotonic {
  std::uint64_t remote_frees = 0, remote_batches = 0, os_reservations = 0, decommit_calls = 0,
                profile_samples_total = 0;
};

void check_monotonic(const strata_stats_t& s) {
  static Monotonic last;  // the previous check's (any input: strata's counters are process-wide)
  expect_at_most("remote_frees went down", last.remote_frees, s.remote_frees);
  expect_at_most("remote_batches went down", last.remote_batches, s.remote_batches);
  expect_at_most("os_reservations went down", last.os_reservations, s.os_reservations);
  expect_at_most("decommit_calls went down", last.decommit_calls, s.decommit_calls);
  expect_at_most("profile_samples_total went down", last.profile_samples_total, s.profile_samples_total);
  last = Monotonic{s.remote_frees, s.remote_batches, s.os_reservations, s.decommit_calls, s.profile_samples_total};
}

}  // namespace

void check_statistics() {
  static strata_stats_t s;  // 3 KiB, as strata's own print functions keep it
  strata_stats(&s);
  const Expected e = expected_from_ledger();
  const CacheHoldings caches = inspect_caches();
  const SpanHoldings spans = inspect_spans();

  // Blocks the program holds: exact (the threads are quiet).
  expect_equal("in_use_bytes", s.in_use_bytes, e.small_bytes + e.large_bytes);
  expect_equal("large_in_use_bytes", s.large_in_use_bytes, e.large_bytes);
  expect_equal("profile_samples", s.profile_samples, e.samples);
  expect_equal("profile_sampled_bytes", s.profile_sampled_bytes, e.sampled_bytes);
  expect_at_most("profile_samples above profile_samples_total", s.profile_samples, s.profile_samples_total);

  // Small spans, class by class: each block of a span is in use (the
  // ledger), cached on an allocation list, in transit to its owner, or free
  // in its span; the last three are counted by walking the lists, outboxes,
  // inboxes and spans (engine_view.hpp), not taken from the counters that
  // strata_stats adds up, so together they check the spans' countdowns.
  std::uint64_t small_spans = 0, small_span_bytes = 0, block_bytes = 0, cached_bytes = 0, transit_bytes = 0,
                free_bytes = 0;
  for (std::size_t c = 1; c < kNumClasses; ++c) {
    const strata_class_stats& k = s.classes[c];
    const std::uint64_t size = class_block_size(c);
    auto expect = [c](const char* what, std::uint64_t strata_says, std::uint64_t model_says) {
      expect_equal(what, strata_says, model_says, c);
    };
    expect("block_size", k.block_size, size);
    expect("blocks_in_use (model: the ledger's blocks)", k.blocks_in_use, e.blocks[c]);
    expect("spans (model: the spans walked)", k.spans, spans.spans[c]);
    expect("blocks_cached (model: the allocation lists walked)", k.blocks_cached, caches.listed[c]);
    expect("blocks_free_in_spans (model: the spans' free blocks walked)", k.blocks_free_in_spans,
           spans.free_blocks[c]);
    const std::uint64_t capacity = spans.blocks[c];
    expect("blocks of its spans (model: in use + cached + in transit + free, each walked)", capacity,
           e.blocks[c] + caches.listed[c] + caches.in_transit[c] + spans.free_blocks[c]);
    small_spans += k.spans;
    small_span_bytes += spans.bytes[c];
    block_bytes += capacity * size;
    cached_bytes += k.blocks_cached * size;
    transit_bytes += caches.in_transit[c] * size;
    free_bytes += k.blocks_free_in_spans * size;
  }
  expect_equal("spans_in_use", s.spans_in_use, small_spans + e.large_spans);
  expect_equal("small_span_bytes", s.small_span_bytes, small_span_bytes);
  expect_equal("thread_cache_bytes", s.thread_cache_bytes, cached_bytes);
  expect_equal("in_transit_bytes", s.in_transit_bytes, transit_bytes);
  expect_equal("span_free_bytes", s.span_free_bytes, free_bytes);
  // Blocks leave at most an eighth of a span unused (core/size_classes.h).
  expect_at_most("tail waste of small spans over 1/8", s.small_span_bytes - block_bytes, s.small_span_bytes / 8);

  // Pages: every mapped byte is in a small span, a large one, free or given
  // back (docs/configuration.md's accounting identity).
  expect_equal("mapped_bytes against its parts", s.mapped_bytes,
               s.small_span_bytes + s.large_in_use_bytes + s.page_heap_free_bytes + s.decommitted_bytes);
  expect_at_most("parked_bytes above small_span_bytes", s.parked_bytes, s.small_span_bytes);
  // Blocks in use lie in backed pages: fragmentation stays in [0, 1].
  expect_at_most("in_use_bytes above backed memory", s.in_use_bytes,
                 s.mapped_bytes - s.decommitted_bytes - s.parked_bytes);
  if (!(s.fragmentation >= 0.0 && s.fragmentation <= 1.0))
    stats_violation("fragmentation (in millionths) outside [0, 1]", static_cast<std::uint64_t>(s.fragmentation * 1e6),
                    "not in", 1000000);

  // Threads: a cache per live thread that got one; the fuzzer runs kThreads.
  expect_equal("threads against the live caches", s.threads, caches.live_caches);
  expect_at_most("threads above the fuzzer's threads", s.threads, kThreads);
  expect_at_most("remote_batches above remote_frees", s.remote_batches, s.remote_frees);
  check_monotonic(s);
}

}  // namespace strata_fuzz
