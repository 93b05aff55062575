// What the profiler knows: the live samples and, per call site, totals of
// what was ever sampled there.
//
//  - Stacks are interned: one StackTrace per distinct call stack, from a
//    metadata pool, found through an index that grows with them
//    (pointer_index.h: up to kStackSlots). Never freed: they name
//    allocated-space totals.
//  - SiteCounters: one per (stack, power-of-two size range), from a
//    metadata pool (they never move: a Sample points at its site), found
//    through a second index (up to kSiteSlots). In-use and allocated counts
//    and bytes, as sampled, and as estimated: each sample adds its weight
//    (the allocations it stands for, from the bytes the countdown counted
//    for it) to the estimated objects and weight x requested size to the
//    estimated bytes. The
//    estimates are unbiased for the requested bytes even though small
//    requests are counted by their class size; profiles are written from
//    them (profile_writer.h).
//  - Sample: one per live sampled block (from a metadata pool), in a doubly
//    linked list; the block's Span points at it.
// One mutex guards all of it; it is taken once per sample, per free of a
// sampled block, and for the length of a profile dump. Nothing here calls
// malloc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/constants.h"
#include "platform/mutex.h"
#include "profile/pointer_index.h"
#include "profile/stack_capture.h"

namespace strata::detail {

struct StackTrace {
  std::uint64_t hash = 0;
  std::uint32_t depth = 0;
  void* frames[kMaxStackFrames] = {};
  // Scratch for reports (under the store's lock).
  double report_bytes = 0;
  double report_objects = 0;
};

struct SiteCounters {
  std::uint64_t hash = 0;             // of (stack, size_range), for the index
  const StackTrace* stack = nullptr;
  std::uint32_t size_range = 0;       // floor(log2(requested size))
  std::uint64_t live_count = 0;       // samples alive now
  std::uint64_t live_bytes = 0;       // their requested bytes
  std::uint64_t total_count = 0;      // samples ever taken here
  std::uint64_t total_bytes = 0;
  double live_objects = 0;            // estimated, unsampled
  double live_estimate = 0;           // estimated requested bytes in use
  double total_objects = 0;
  double total_estimate = 0;
};

struct Sample {
  Sample* prev = nullptr;
  Sample* next = nullptr;
  SiteCounters* site = nullptr;
  void* block = nullptr;
  std::size_t requested_size = 0;
  std::size_t alignment = 0;      // requested alignment, 0 when none was asked
  std::size_t usable_size = 0;    // what the block would have had unsampled
  double weight = 1;              // allocations this sample stands for
  int thread_id = 0;              // gettid of the allocating thread
};

// The allocations one sample stands for, when the countdown counted
// `counted_bytes` for it at the interval in force now.
double sample_weight(std::size_t counted_bytes) noexcept;

struct SampleStoreStats {
  std::size_t live_samples = 0;
  std::size_t live_requested_bytes = 0;
  std::size_t total_samples = 0;
  std::size_t stacks = 0;
  std::size_t sites = 0;
  std::size_t dropped_stacks = 0;  // samples counted at the overflow site (tables full)
  std::size_t metadata_bytes = 0;
};

class SampleStore {
 public:
  static constexpr std::size_t kStackSlots = std::size_t{1} << 15;
  static constexpr std::size_t kSiteSlots = std::size_t{1} << 16;

  // Records a sample; nullptr when the OS refuses memory for the record.
  Sample* record(void* const* frames, std::uint32_t depth, void* block, std::size_t requested_size,
                 std::size_t alignment, std::size_t usable_size, double weight, int thread_id) noexcept;

  // Forgets a live sample (its block is being freed).
  void forget(Sample* sample) noexcept;

  SampleStoreStats stats() noexcept;

  // Iteration for the profile writers, with mutex() held by the caller
  // (who also holds a ProfilerReentryGuard: nothing it calls may wait for
  // this lock through a sampled allocation).
  template <class Visit>
  void for_each_site_locked(Visit&& visit) noexcept {
    sites_.for_each(visit);
    if (overflow_site_.total_count != 0) visit(overflow_site_);
  }
  template <class Visit>
  void for_each_stack_locked(Visit&& visit) noexcept {
    stacks_.for_each(visit);
    if (overflow_site_.total_count != 0) visit(overflow_stack_);
  }
  template <class Visit>
  void for_each_live_sample_locked(Visit&& visit) noexcept {
    for (Sample* s = live_; s != nullptr; s = s->next) visit(*s);
  }

  Mutex& mutex() noexcept { return mutex_; }
  void lock_for_fork() noexcept;
  void unlock_after_fork_parent() noexcept;
  void reset_after_fork_child() noexcept;

 private:
  StackTrace* intern_locked(void* const* frames, std::uint32_t depth) noexcept;
  SiteCounters* site_locked(const StackTrace* stack, std::uint32_t size_range) noexcept;

  Mutex mutex_;
  PointerIndex<StackTrace, kStackSlots> stacks_;
  PointerIndex<SiteCounters, kSiteSlots> sites_;
  Sample* live_ = nullptr;
  std::size_t live_count_ = 0;
  std::size_t live_bytes_ = 0;
  std::size_t total_samples_ = 0;
  std::size_t dropped_ = 0;
  StackTrace overflow_stack_;
  SiteCounters overflow_site_;
};

extern STRATA_INTERNAL SampleStore g_sample_store;

}  // namespace strata::detail
