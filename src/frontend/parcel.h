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
// keeps up to kMaxSpares drained parcels for its own next batches; the rest
// go back to the shared pool (one lock per parcel, i.e. per 64 frees).
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/mutex.h"

namespace strata::detail {

class ThreadCache;

struct Parcel {
  static constexpr std::uint32_t kCapacity = 64;
  static constexpr std::uint32_t kMaxSpares = 16;  // 8.3 KiB per thread at most

  Parcel() noexcept {}  // the array needs no zeroing

  std::uintptr_t next = 0;  // next inbox item (inbox.h), or next spare
  std::uint32_t count = 0;
  // Bytes of its blocks larger than Outbox::kUncountedSize: its share of the
  // outbox's byte bound (frontend/outbox.h).
  std::uint32_t counted_bytes = 0;
  void* blocks[kCapacity];
};

// A parcel for `cache` to fill: one of its spares, else one from the shared
// pool; nullptr when the OS refuses memory.
Parcel* acquire_parcel(ThreadCache* cache) noexcept;

// An emptied parcel: kept as a spare by `cache` (may be nullptr), or pooled.
void release_parcel(ThreadCache* cache, Parcel* parcel) noexcept;

// Gives all of `cache`'s spares back to the shared pool (thread exit).
void release_spare_parcels(ThreadCache* cache) noexcept;

// Bytes mapped for parcels (statistics); the pool's lock (fork handlers).
std::size_t parcel_metadata_bytes() noexcept;
Mutex& parcel_pool_mutex() noexcept;

}  // namespace strata::detail
