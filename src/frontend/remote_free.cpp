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
  std::size_t bytes = 0;
  for (std::uint32_t i = 0; i < parcel->count; ++i) {
    --cache->outbox.pending_blocks[parcel->classes[i]];
    bytes += class_size(parcel->classes[i]);
  }
  cache->outbox.pending_bytes -= bytes;
  slot.parcel = nullptr;
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

void add_to_parcel(Outbox& outbox, OutboxSlot& slot, void* block, std::size_t cls) noexcept {
  Parcel& parcel = *slot.parcel;
  parcel.classes[parcel.count] = static_cast<std::uint8_t>(cls);
  parcel.blocks[parcel.count] = block;
  ++parcel.count;
  ++outbox.pending_blocks[cls];
  outbox.pending_bytes += class_size(cls);
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

// Everything but the common case: no cache, no open parcel for this
// destination, or a parcel this block fills (or a byte bound it reaches).
__attribute__((noinline)) void remote_free_slow(ThreadCache* cache, void* block, Span* span,
                                                Destination destination) noexcept {
  if (cache == nullptr) {
    g_uncached_remote_frees.fetch_add(1, std::memory_order_relaxed);  // beside a lock or a CAS
    return deliver_block(nullptr, destination, block);
  }
  ++cache->stats.remote_frees;
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
    if (parcel == nullptr) return deliver_block(cache, destination, block);
    slot.parcel = parcel;
    slot.destination = destination;
  }
  std::size_t cls = span->size_class;
  add_to_parcel(outbox, slot, block, cls);
  if (slot.parcel->count == Parcel::kCapacity)
    send_slot(cache, slot);
  else if (outbox.pending_bytes >= Outbox::kTotalBytes)
    flush_outbox(cache);
}

}  // namespace

// The common case, kept short (no call, so no registers to save): the slot
// already holds a parcel for this destination, and this block neither
// fills it nor takes the outbox to its byte bound. Anything else takes
// remote_free_slow.
void remote_free(ThreadCache* cache, void* block, Span* span) noexcept {
  Destination destination = destination_of(span);
  if (cache != nullptr) {
    Outbox& outbox = cache->outbox;
    OutboxSlot& slot = outbox.slots[Outbox::slot_index(destination)];
    std::size_t cls = span->size_class;
    if (slot.parcel != nullptr && slot.destination == destination &&
        slot.parcel->count + 1 < Parcel::kCapacity &&
        outbox.pending_bytes + class_size(cls) < Outbox::kTotalBytes) {
      ++cache->stats.remote_frees;
      add_to_parcel(outbox, slot, block, cls);
      return;
    }
  }
  remote_free_slow(cache, block, span, destination);
}

void flush_outbox(ThreadCache* cache) noexcept {
  for (OutboxSlot& slot : cache->outbox.slots)
    if (slot.parcel != nullptr) send_slot(cache, slot);
}

}  // namespace strata::detail
