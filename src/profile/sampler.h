// The sampling decision: byte-weighted Poisson sampling.
//
// Sampling points fall on the stream of allocated bytes as a Poisson process
// of mean interval R = STRATA_PROFILE_SAMPLE: the gaps between points are
// exponentially distributed. An allocation is sampled when at least one point
// falls inside its bytes, which happens with probability 1 - exp(-size / R):
// every byte has the same chance, so dividing by that probability gives
// unbiased estimates (this is what the pprof tools do with heap_v2 profiles).
// By memorylessness, the next gap can be drawn afresh from the end of a
// sampled allocation.
//
// Each thread keeps a countdown of bytes to the next point, and its own
// random generator (seeded once per thread, no lock, no system call).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/constants.h"

namespace strata::detail {

// A thread's random state for interval draws (xorshift64*; 0 = not seeded).
struct SamplerState {
  std::uint64_t random = 0;
};

// One exponentially distributed interval of mean `mean_bytes` (> 0), in
// bytes; advances `state`. No allocation, no system call, no libm.
std::int64_t next_interval(SamplerState& state, std::uint64_t mean_bytes) noexcept;

// Bytes the calling thread may still allocate before its next sampling
// point. Starts at 0 in a new thread: the first allocation arms it.
extern constinit thread_local std::int64_t t_bytes_until_sample __attribute__((tls_model("initial-exec")));

// The countdown step: true when `size` more bytes cross the next sampling
// point (or the countdown of a new thread must be armed). Every allocation
// is counted exactly once, on a slow path: a thread cache counts a whole
// allocation word when it takes one (frees never put blocks back on those
// words, they go to their spans), the rest one by one. A sample records the
// bytes counted for it (allocate_sampled's counted_bytes), from which its
// weight follows.
inline bool sampling_countdown_crossed(std::size_t size) noexcept {
  // Unsigned arithmetic: a request near SIZE_MAX (which fails anyway) must
  // not overflow a signed subtraction. Compiles to one subtract.
  auto left = static_cast<std::int64_t>(static_cast<std::uint64_t>(t_bytes_until_sample) - size);
  t_bytes_until_sample = left;
  return left < 0;
}

// Takes back a countdown step for a request that cannot be served anyway
// (larger than any address space).
inline void sampling_countdown_undo(std::size_t size) noexcept {
  t_bytes_until_sample = static_cast<std::int64_t>(static_cast<std::uint64_t>(t_bytes_until_sample) + size);
}

// Called when the countdown went below zero for an allocation of `size`
// bytes (already subtracted): re-arms the countdown and says whether this
// allocation is to be sampled. False while sampling is off, inside the
// profiler itself (a nested allocation), or when a new thread's first draw
// leaves room for the allocation.
bool sampling_point_reached(std::size_t size) noexcept;

// One allocation counted on its own (a page heap request, a young thread's
// block): true when it is to be sampled.
inline bool sampling_point_in(std::size_t counted_bytes) noexcept {
  return sampling_countdown_crossed(counted_bytes) && sampling_point_reached(counted_bytes);
}

// The mean interval samples are taken with now (0 = off), and the one the
// recorded samples were taken with (the last non-zero value: what a profile
// must be unsampled with).
std::uint64_t sampling_interval() noexcept;
std::uint64_t sampling_interval_of_samples() noexcept;

// While a thread is inside the profiler (recording, writing a profile), its
// own allocations are never sampled: the profiler may be re-entered through
// malloc (e.g. by the unwinder) and must not wait for its own lock.
class ProfilerReentryGuard {
 public:
  ProfilerReentryGuard() noexcept;
  ~ProfilerReentryGuard();
  ProfilerReentryGuard(const ProfilerReentryGuard&) = delete;
  ProfilerReentryGuard& operator=(const ProfilerReentryGuard&) = delete;
  bool entered_twice() const noexcept { return nested_; }

 private:
  bool nested_;
};

// The calling thread's id (gettid), cached per thread.
int current_thread_id() noexcept;

// Fork child: the surviving thread's cached id is the parent's.
void sampler_after_fork_child() noexcept;

}  // namespace strata::detail
