#include "frontend/remote_free.h"

#include "central/central_cache.h"
#include "core/page_map.h"
#include "frontend/thread_cache.h"

namespace strata::detail {

namespace {

Destination destination_of(Span* span) noexcept {
  ThreadCache* owner = span->owner.load(std::memory_order_acquire);
  return owner != nullptr ? reinterpret_cast<Destination>(owner)
                          : central_destination(span->size_class);
}

void send_slot(ThreadCache* cache, OutboxSlot& slot) noexcept {
  BlockChain chain = slot.chain;
  void* block = chain.head;
  for (std::uint32_t i = 0; i < chain.count; ++i, block = list_next(block))
    --cache->outbox.pending_blocks[g_page_map.lookup(block)->size_class];
  cache->outbox.pending_bytes -= slot.bytes;
  slot.chain = BlockChain{};
  slot.bytes = 0;
  deliver(cache, slot.destination, chain);
}

}  // namespace

void deliver(ThreadCache* cache, Destination destination, BlockChain chain) noexcept {
  if (chain.empty()) return;
  if (!is_central(destination)) {
    reinterpret_cast<ThreadCache*>(destination)->inbox.push_chain(chain.head, chain.tail);
    if (cache) ++cache->stats.batches_sent;
    return;
  }
  BlockChain forward;
  g_central[destination >> 1].receive(chain, forward);
  // Spans adopted by a thread between our look and the central lock.
  void* block = forward.head;
  for (std::uint32_t i = 0; i < forward.count; ++i) {
    void* next = list_next(block);
    remote_free(cache, block, g_page_map.lookup(block));
    block = next;
  }
}

void remote_free(ThreadCache* cache, void* block, Span* span) noexcept {
  Destination destination = destination_of(span);
  if (cache == nullptr) {
    BlockChain one;
    one.push(block);
    deliver(nullptr, destination, one);
    return;
  }
  ++cache->stats.remote_frees;
  Outbox& outbox = cache->outbox;
  OutboxSlot& slot = outbox.slots[Outbox::slot_index(destination)];
  // A loop, not an if: sending to the central cache may forward blocks of
  // spans adopted meanwhile, and those re-enter remote_free and may land in
  // this very slot under their new owner. Labelling them with our
  // destination would send them to a central cache of another class, which
  // would then touch a span under the wrong lock.
  while (slot.destination != destination && !slot.chain.empty()) send_slot(cache, slot);
  slot.destination = destination;
  slot.chain.push(block);
  ++outbox.pending_blocks[span->size_class];
  std::size_t size = class_size(span->size_class);
  slot.bytes += size;
  outbox.pending_bytes += size;
  if (slot.chain.count >= Outbox::kBatchBlocks || slot.bytes >= Outbox::kBatchBytes)
    send_slot(cache, slot);
  else if (outbox.pending_bytes >= Outbox::kTotalBytes)
    flush_outbox(cache);
}

void flush_outbox(ThreadCache* cache) noexcept {
  for (OutboxSlot& slot : cache->outbox.slots)
    if (!slot.chain.empty()) send_slot(cache, slot);
}

}  // namespace strata::detail
