#include "frontend/remote_free.h"

#include "central/central_cache.h"
#include "core/page_map.h"
#include "frontend/parcel.h"
#include "frontend/thread_cache.h"

namespace strata::detail {

std::atomic<std::uint64_t> g_uncached_remote_frees{0};

namespace {

Destination destination_of(Span* span) noexcept {
  ThreadCache* owner = span->owner.load(std::memory_order_acquire);
  return owner != nullptr ? reinterpret_cast<Destination>(owner)
                          : central_destination(span->size_class);
}

ThreadCache* thread_of(Destination destination) noexcept {
  return reinterpret_cast<ThreadCache*>(destination);
}

// Frees `blocks[0, count)` to the central cache of `destination`, then sends
// on the blocks it gives back (their spans were adopted after the sender
// looked).
void free_to_central(ThreadCache* cache, Destination destination, void** blocks, std::uint32_t count) noexcept {
  std::uint32_t forwarded = g_central[destination >> 1].receive(blocks, count);
  for (std::uint32_t i = 0; i < forwarded; ++i) remote_free(cache, blocks[i], g_page_map.lookup(blocks[i]));
}

void send_slot(ThreadCache* cache, OutboxSlot& slot) noexcept {
  Parcel* parcel = slot.parcel;
  cache->outbox.counted_bytes -= parcel->counted_bytes;
  --cache->outbox.open_parcels;
  cache->stats.remote_frees += parcel->count;
  slot.parcel = nullptr;
  if (cache->outbox.last_parcel == parcel) cache->outbox.last_destination = 0;
  deliver(cache, slot.destination, parcel);
}

// One block on its own: for a thread without a cache, or without memory
// for a parcel.
void deliver_block(ThreadCache* cache, Destination destination, void* block) noexcept {
  if (!is_central(destination)) {
    thread_of(destination)->inbox.push_block(block);
    if (cache) ++cache->stats.batches_sent;
    return;
  }
  void* one[1] = {block};
  free_to_central(cache, destination, one, 1);
}

}  // namespace

void deliver(ThreadCache* cache, Destination destination, Parcel* parcel) noexcept {
  if (!is_central(destination)) {
    thread_of(destination)->inbox.push_parcel(parcel);
    if (cache) ++cache->stats.batches_sent;
    return;
  }
  free_to_central(cache, destination, parcel->blocks, parcel->count);
  release_parcel(cache, parcel);
}

namespace {

// Everything remote_free_slow's common case leaves: no cache, a slot held
// by another destination or empty, a parcel this block fills, the byte
// bound reached.
__attribute__((noinline)) void remote_free_rare(ThreadCache* cache, void* block, std::size_t size_class,
                                                Destination destination) noexcept {
  if (cache == nullptr) {
    g_uncached_remote_frees.fetch_add(1, std::memory_order_relaxed);  // beside a lock or a CAS
    return deliver_block(nullptr, destination, block);
  }
  Outbox& outbox = cache->outbox;
  OutboxSlot& slot = outbox.slots[Outbox::slot_index(destination)];
  // A loop, not an if: sending to the central cache may forward blocks of
  // spans adopted meanwhile, and those re-enter remote_free and may land in
  // this very slot under their new owner. Putting them under our destination
  // would send them to a central cache of another class, which would then
  // touch a span under the wrong lock.
  while (slot.parcel != nullptr && slot.destination != destination) send_slot(cache, slot);
  if (slot.parcel == nullptr) {
    Parcel* parcel = acquire_parcel(cache);
    if (parcel == nullptr) {
      ++cache->stats.remote_frees;
      return deliver_block(cache, destination, block);
    }
    slot.parcel = parcel;
    slot.destination = destination;
    ++outbox.open_parcels;
  }
  outbox.last_destination = destination;
  outbox.last_parcel = slot.parcel;
  Parcel& parcel = *slot.parcel;
  parcel.blocks[parcel.count++] = block;
  if (std::uint32_t size = static_cast<std::uint32_t>(class_size(size_class)); size > Outbox::kUncountedSize) {
    parcel.counted_bytes += size;
    outbox.counted_bytes += size;
  }
  if (parcel.count == Parcel::kCapacity)
    send_slot(cache, slot);
  else if (outbox.counted_bytes >= Outbox::kTotalBytes)
    flush_outbox(cache);
}

}  // namespace

// Its common case is a block over kUncountedSize for an open parcel: the
// store, the increment and the byte count, without a stack frame (the rest
// is a tail call; inline, it cost 20 instructions more per call).
__attribute__((noinline)) void remote_free_slow(ThreadCache* cache, void* block, std::size_t size_class,
                                                Destination destination) noexcept {
  if (cache != nullptr && size_class > Outbox::kLastUncountedClass)
    if (Parcel* parcel = cache->outbox.open_parcel_with_room(destination))
      return remote_free_counted(cache, parcel, block, size_class, destination);
  remote_free_rare(cache, block, size_class, destination);
}

__attribute__((noinline)) void remote_free_counted(ThreadCache* cache, Parcel* parcel, void* block,
                                                   std::size_t size_class, Destination destination) noexcept {
  if (__builtin_expect(cache->outbox.add_counted(parcel, block, size_class), 1)) return;
  remote_free_rare(cache, block, size_class, destination);
}

// The common case first (Outbox::add_to_open_parcel); anything else takes
// remote_free_slow.
void remote_free(ThreadCache* cache, void* block, Span* span) noexcept {
  const Destination destination = destination_of(span);
  if (cache != nullptr && cache->outbox.add_to_open_parcel(block, span->size_class, destination)) return;
  remote_free_slow(cache, block, span->size_class, destination);
}

void flush_outbox(ThreadCache* cache) noexcept {
  for (OutboxSlot& slot : cache->outbox.slots)
    if (slot.parcel != nullptr) send_slot(cache, slot);
}

}  // namespace strata::detail
