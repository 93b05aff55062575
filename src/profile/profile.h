// Heap profiling (issue 12): which code holds the memory, sampled.
//
// Tier: between backend and central. The profile uses the page heap (a
// sampled block is a span of its own) and metadata pools over mmap; central,
// frontend and api call it. Its settings are in g_options (platform/options.h).
//
// How a sample happens (docs/profiling.md has the whole story):
//   1. every thread counts allocated bytes down from an exponentially
//      distributed interval (mean STRATA_PROFILE_SAMPLE bytes), on its slow
//      paths only: a thread cache counts a whole allocation word when it
//      takes one, and cuts the word short where a sampling point falls, so
//      that the word runs dry at the sampled allocation (the fast paths
//      count nothing);
//   2. the allocation that crosses zero is served by allocate_sampled: a span
//      of its own from the page heap, with the call stack recorded;
//   3. its free finds the span's page map owner tag 0, takes the large-block
//      branch of deallocate_slow, which calls release_sampled.
//
// The interface for the allocator, piece by piece:
//   sampler.h        next_interval, sampling_point_reached, the countdown
//   sampled_block.h  allocate_sampled, release_sampled, sampled_usable_size
//   sample_store.h   the live samples and per-site totals (statistics)
//   profile_writer.h strata_profile_dump and the profile written at exit
//   below            fork handlers
#pragma once

#include "profile/sampled_block.h"
#include "profile/sampler.h"

namespace strata::detail {

// Fork handlers: the profile's locks, taken before the allocator's own in
// fork_prepare (the profile never holds one of its locks while it takes an
// allocator lock, nor the other way round).
void profile_fork_prepare() noexcept;
void profile_fork_parent() noexcept;
void profile_fork_child() noexcept;

}  // namespace strata::detail
