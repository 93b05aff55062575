#include "frontend/parcel.h"

#include "backend/metadata_pool.h"
#include "frontend/thread_cache.h"

namespace strata::detail {

namespace {
constinit MetadataPool<Parcel> g_parcel_pool;
}

Parcel* acquire_parcel(ThreadCache* cache) noexcept {
  if (cache != nullptr && cache->spare_parcels != nullptr) {
    Parcel* parcel = cache->spare_parcels;
    cache->spare_parcels = reinterpret_cast<Parcel*>(parcel->next);
    --cache->spare_parcel_count;
    parcel->next = 0;
    return parcel;
  }
  return g_parcel_pool.create();
}

void release_parcel(ThreadCache* cache, Parcel* parcel) noexcept {
  parcel->count = 0;
  parcel->counted_bytes = 0;
  if (cache != nullptr && cache->spare_parcel_count < Parcel::kMaxSpares) {
    parcel->next = reinterpret_cast<std::uintptr_t>(cache->spare_parcels);
    cache->spare_parcels = parcel;
    ++cache->spare_parcel_count;
    return;
  }
  g_parcel_pool.destroy(parcel);
}

void release_spare_parcels(ThreadCache* cache) noexcept {
  while (Parcel* parcel = cache->spare_parcels) {
    cache->spare_parcels = reinterpret_cast<Parcel*>(parcel->next);
    g_parcel_pool.destroy(parcel);
  }
  cache->spare_parcel_count = 0;
}

std::size_t parcel_metadata_bytes() noexcept { return g_parcel_pool.raw().mapped_bytes(); }
Mutex& parcel_pool_mutex() noexcept { return g_parcel_pool.raw().mutex(); }

}  // namespace strata::detail
