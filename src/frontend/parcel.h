// A parcel: up to 64 blocks freed by one thread for one destination (a
// thread, or the central cache of a class), as an array of pointers.
//
// Why an array and not a chain threaded through the blocks: a remote free
// then never writes to the block (its cache line stays with the thread that
// last used it), and the owner that receives the parcel reads the pointers
// from a few consecutive lines instead of following one cold link per block.
// The blocks are written once, by their owner, when they join its list.
//
// Parcels are metadata (MetadataPool over mmap, never malloc). A thread
// keeps up to kMaxSpares drained parcels for its own next batches. Beyond
// that, and when it has none, parcels move between the thread and a shared
// depot kBatch at a time, one lock per batch (per 1,024 remote frees): in
// a steady exchange between threads, or from a consumer's outbox to a
// producer's inbox, a parcel's round trip would otherwise take the shared
// lock twice for every 64 blocks (measured in docs/design.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/mutex.h"

namespace strata::detail {

class ThreadCache;

struct Parcel {
  static constexpr std::uint32_t kCapacity = 64;
  static constexpr std::uint32_t kBatch = 16;              // parcels per visit to the depot
  static constexpr std::uint32_t kMaxSpares = 2 * kBatch;  // 18 KiB per thread at most

  Parcel() noexcept {}  // the array needs no zeroing

  std::uintptr_t next = 0;  // next inbox item (inbox.h), or next spare
  Parcel* next_batch = nullptr;  // in the depot: the next batch (this is a batch's first parcel)
  std::uint32_t batch_size = 0;  // in the depot: parcels in the batch this one starts
  std::uint32_t count = 0;
  // Bytes of its blocks larger than Outbox::kUncountedSize: its share of the
  // outbox's byte bound (frontend/outbox.h).
  std::uint32_t counted_bytes = 0;
  void* blocks[kCapacity];
};

// A parcel for `cache` to fill: one of its spares, else one of a batch
// from the depot (the rest become its spares), else a new one; nullptr when
// the OS refuses memory.
Parcel* acquire_parcel(ThreadCache* cache) noexcept;

// An emptied parcel: kept as a spare by `cache` (may be nullptr; then it
// goes to the depot alone); a cache with kMaxSpares gives kBatch of them to
// the depot.
void release_parcel(ThreadCache* cache, Parcel* parcel) noexcept;

// Gives all of `cache`'s spares to the depot as one batch (thread exit).
void release_spare_parcels(ThreadCache* cache) noexcept;

// Bytes mapped for parcels (statistics); the depot's and the pool's locks,
// taken in this order (fork handlers).
std::size_t parcel_metadata_bytes() noexcept;
Mutex& parcel_depot_mutex() noexcept;
Mutex& parcel_pool_mutex() noexcept;

}  // namespace strata::detail
