#include "frontend/parcel.h"

#include "backend/metadata_pool.h"
#include "frontend/thread_cache.h"

namespace strata::detail {

namespace {

constinit MetadataPool<Parcel> g_parcel_pool;

// Emptied parcels no thread keeps, in batches: a stack of chains (linked by
// `next`, each chain's first parcel holding its length and the next chain).
// Parcels never go back to the pool (nor the pool's memory to the OS), as
// before the depot: what the depot holds is bounded by what the threads
// once had in flight at the same time.
class ParcelDepot {
 public:
  // Takes a whole batch: its first parcel, with the rest linked after it.
  Parcel* take(std::uint32_t& size) noexcept {
    LockGuard guard(mutex_);
    Parcel* first = top_;
    if (first == nullptr) return nullptr;
    top_ = first->next_batch;
    size = first->batch_size;
    first->next_batch = nullptr;
    first->batch_size = 0;
    return first;
  }

  // Puts a chain of `size` parcels (linked by `next`, the last one's 0).
  void put(Parcel* first, std::uint32_t size) noexcept {
    first->batch_size = size;
    LockGuard guard(mutex_);
    first->next_batch = top_;
    top_ = first;
  }

  Mutex& mutex() noexcept { return mutex_; }

 private:
  Mutex mutex_;
  Parcel* top_ = nullptr;
};

constinit ParcelDepot g_depot;

Parcel* next_of(const Parcel* parcel) noexcept { return reinterpret_cast<Parcel*>(parcel->next); }

}  // namespace

Parcel* acquire_parcel(ThreadCache* cache) noexcept {
  if (cache == nullptr) {  // no cache to keep a batch's rest: it goes back
    std::uint32_t size = 0;
    Parcel* first = g_depot.take(size);
    if (first == nullptr) return g_parcel_pool.create();
    if (size > 1) g_depot.put(next_of(first), size - 1);
    first->next = 0;
    return first;
  }
  if (cache->spare_parcels == nullptr) {
    std::uint32_t size = 0;
    cache->spare_parcels = g_depot.take(size);
    cache->spare_parcel_count = size;
    if (cache->spare_parcels == nullptr) return g_parcel_pool.create();
  }
  Parcel* parcel = cache->spare_parcels;
  cache->spare_parcels = next_of(parcel);
  --cache->spare_parcel_count;
  parcel->next = 0;
  return parcel;
}

void release_parcel(ThreadCache* cache, Parcel* parcel) noexcept {
  parcel->count = 0;
  parcel->counted_bytes = 0;
  if (cache == nullptr) {
    parcel->next = 0;
    return g_depot.put(parcel, 1);
  }
  parcel->next = reinterpret_cast<std::uintptr_t>(cache->spare_parcels);
  cache->spare_parcels = parcel;
  if (++cache->spare_parcel_count <= Parcel::kMaxSpares) return;
  // Full: the kBatch most recently kept go to the depot as one chain.
  Parcel* last = parcel;
  for (std::uint32_t i = 1; i < Parcel::kBatch; ++i) last = next_of(last);
  cache->spare_parcels = next_of(last);
  cache->spare_parcel_count -= Parcel::kBatch;
  last->next = 0;
  g_depot.put(parcel, Parcel::kBatch);
}

void release_spare_parcels(ThreadCache* cache) noexcept {
  if (cache->spare_parcels != nullptr) g_depot.put(cache->spare_parcels, cache->spare_parcel_count);
  cache->spare_parcels = nullptr;
  cache->spare_parcel_count = 0;
}

std::size_t parcel_metadata_bytes() noexcept { return g_parcel_pool.raw().mapped_bytes(); }
Mutex& parcel_depot_mutex() noexcept { return g_depot.mutex(); }
Mutex& parcel_pool_mutex() noexcept { return g_parcel_pool.raw().mutex(); }

}  // namespace strata::detail
