#include "engine_view.hpp"

#include "block_model.hpp"

#include <strata/strata.h>

#include "core/constants.h"
#include "core/free_list.h"
#include "core/page_map.h"
#include "core/span.h"
#include "backend/page_heap.h"
#include "frontend/inbox.h"
#include "frontend/parcel.h"
#include "frontend/thread_cache.h"
#include "profile/sample_store.h"

namespace strata_fuzz {

using namespace strata::detail;

BlockPlace place_of(const void* p) {
  BlockPlace place;
  const Span* span = g_page_map.lookup(p);
  if (span == nullptr || !span->contains(p)) model_violation("a live block has no span", p, 0, 0);
  if (span->state == SpanState::kSmall) {
    place.small = true;
    place.size_class = span->size_class;
    if (place.size_class == 0 || place.size_class >= kNumClasses)
      model_violation("a live block's span has no size class", p, 0, place.size_class);
    return place;
  }
  if (span->state != SpanState::kLarge || span->start() != p)
    model_violation("a live block is neither in a small span nor a large span's start", p, 0,
                    static_cast<std::size_t>(span->state));
  place.span_bytes = span->bytes();
  if (const Sample* sample = span->sample) {
    place.sample = sample;
    place.sample_requested = sample->requested_size;
    place.sample_usable = sample->usable_size;
    place.sample_block = sample->block;
  }
  return place;
}

namespace {

void inspect_cache(ThreadCache* cache, void* context) {
  auto& holdings = *static_cast<CacheHoldings*>(context);
  if (cache->life == ThreadCache::Life::kAlive) ++holdings.live_caches;
  std::size_t kept = 0;

  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    const AllocWord& word = cache->words[cls];
    const Span* current = cache->current[cls];
    const std::size_t capacity = current != nullptr ? current->capacity : 0;
    std::uint64_t length = static_cast<std::uint64_t>(__builtin_popcountll(word.bits));
    if (length != 0) {
      if (current == nullptr) model_violation("an allocation word without a current span", cache, cls, length);
      if (word.size != class_size(cls)) model_violation("an allocation word of the wrong size", cache, word.size, cls);
      std::uint64_t highest = 63 - static_cast<std::uint64_t>(__builtin_clzll(word.bits));
      void* first = reinterpret_cast<void*>(word.base + std::uint64_t(__builtin_ctzll(word.bits)) * word.size);
      void* last = reinterpret_cast<void*>(word.base + highest * word.size);
      if (g_page_map.lookup(first) != current || g_page_map.lookup(last) != current ||
          cache->words[cls].span_word * 64 + highest >= capacity)
        model_violation("an allocation word reaches past its current span", first, class_size(cls), cls);
      // Its blocks are out of the span: their bits there are clear.
      if ((current->free_bits[cache->words[cls].span_word] & word.bits) != 0)
        model_violation("a block is both on an allocation word and free in its span", first, class_size(cls), cls);
    }
    holdings.listed[cls] += length;
    holdings.listed_bytes += length * class_size(cls);

    // Kept empty spans (filed at the back of the class's partial list):
    // no block out, and never the current span.
    for (const Span* s = cache->partial[cls].head; s != nullptr; s = s->next) {
      if (!s->kept_empty) continue;
      if (s->countdown != 0 || s->sleeping || s == current)
        model_violation("a kept empty span has blocks out", s->start(), s->bytes(), s->countdown);
      kept += s->bytes();
    }
  }
  if (kept != cache->kept_empty_bytes)
    model_violation("kept empty spans do not add up to kept_empty_bytes", cache, kept, cache->kept_empty_bytes);

  // The spans it owns, per class (current, listed, asleep), against the
  // count that picks short or long spans.
  std::size_t owned[kNumClasses] = {};
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    if (cache->current[cls] != nullptr) ++owned[cls];
    for (const Span* s = cache->partial[cls].head; s != nullptr; s = s->next) ++owned[cls];
    for (const Span* s = cache->sleeping[cls].head; s != nullptr; s = s->next) {
      if (s->owner_class != cls) model_violation("a sleeping span is on another class's list", cache, cls, s->owner_class);
      ++owned[cls];
    }
  }
  for (std::size_t cls = 1; cls < kNumClasses; ++cls)
    if (owned[cls] != cache->owned_spans[cls])
      model_violation("a cache's owned_spans is not the spans it holds", cache, cls, owned[cls]);
  if (kept > cache->max_kept_bytes * kBurstKeptFactor)
    model_violation("kept empty spans over the thread's burst bound", cache, kept, cache->max_kept_bytes);
  if (cache->life == ThreadCache::Life::kAlive &&
      cache->max_kept_bytes != static_cast<std::size_t>(strata_option_get(STRATA_OPTION_THREAD_CACHE_BYTES)))
    model_violation("a thread's kept-span bound is not STRATA_THREAD_CACHE_BYTES", cache, cache->max_kept_bytes, 0);

  // The outbox: its parcels against its counters.
  std::size_t counted_bytes = 0, all_bytes = 0;
  std::uint32_t open = 0;
  for (const OutboxSlot& slot : cache->outbox.slots) {
    if (slot.parcel == nullptr) continue;
    ++open;
    std::size_t parcel_counted = 0;
    for (std::uint32_t i = 0; i < slot.parcel->count; ++i) {
      Span* span = g_page_map.lookup(slot.parcel->blocks[i]);
      if (span == nullptr || span->state != SpanState::kSmall)
        model_violation("an outbox parcel holds a block of no small span", slot.parcel->blocks[i], 0, 0);
      std::size_t size = class_size(span->size_class);
      ++holdings.in_transit[span->size_class];
      all_bytes += size;
      if (size > Outbox::kUncountedSize) parcel_counted += size;
    }
    if (parcel_counted != slot.parcel->counted_bytes)
      model_violation("a parcel's counted_bytes is not what its large blocks hold", slot.parcel, parcel_counted,
                      slot.parcel->counted_bytes);
    if (slot.parcel->count >= Parcel::kCapacity) model_violation("a full parcel still in the outbox", slot.parcel, 0, 0);
    counted_bytes += parcel_counted;
  }
  if (counted_bytes != cache->outbox.counted_bytes)
    model_violation("outbox counted_bytes is not what its parcels hold", cache, counted_bytes,
                    cache->outbox.counted_bytes);
  if (open != cache->outbox.open_parcels)
    model_violation("outbox open_parcels is not its slots holding a parcel", cache, open, cache->outbox.open_parcels);
  if (counted_bytes >= Outbox::kTotalBytes) model_violation("outbox over its 1 MiB bound", cache, counted_bytes, 0);
  // The remembered destination names the slot that holds its parcel.
  if (const Destination last = cache->outbox.last_destination; last != 0) {
    const OutboxSlot& slot = cache->outbox.slots[Outbox::slot_index(last)];
    if (slot.destination != last || slot.parcel != cache->outbox.last_parcel)
      model_violation("the outbox's remembered destination is not its slot's parcel", cache, last, 0);
  }
  if (all_bytes >= Outbox::kTotalBytes + Outbox::kUncountedBound)
    model_violation("outbox over its 3 MiB bound in all", cache, all_bytes, 0);

  // The inbox: parcels and single blocks other threads sent, not drained yet.
  std::size_t items = 0;
  for (InboxItem item = cache->inbox.peek_head(); item != 0; item = item_next(item)) {
    if (++items > (std::size_t{1} << 24)) model_violation("inbox does not end", cache, items, 0);
    auto count = [&](void* block) {
      Span* span = g_page_map.lookup(block);
      if (span == nullptr || span->state != SpanState::kSmall)
        model_violation("an inbox holds a block of no small span", block, 0, 0);
      ++holdings.in_transit[span->size_class];
    };
    if (item_is_block(item)) {
      count(item_block(item));
    } else {
      const Parcel* parcel = item_parcel(item);
      for (std::uint32_t i = 0; i < parcel->count; ++i) count(parcel->blocks[i]);
    }
  }
}

void inspect_span(const Span* span, void* context) {
  auto& holdings = *static_cast<SpanHoldings*>(context);
  const std::size_t cls = span->size_class;
  if (cls == 0 || cls >= kNumClasses) model_violation("a small span without a class", span->start(), span->bytes(), cls);
  const std::size_t size = class_size(cls);
  const SizeClassInfo& info = class_info(cls);
  if (span->page_count != info.span_pages && span->page_count != info.long_pages)
    model_violation("a small span neither short nor long for its class", span->start(), size, span->page_count);
  if (span->capacity != blocks_in_span(cls, span->page_count))
    model_violation("a span's capacity is not its length's", span->start(), size, span->capacity);
  ++holdings.spans[cls];
  holdings.blocks[cls] += span->capacity;
  holdings.bytes[cls] += span->bytes();
  std::uint64_t free = 0;
  for (std::size_t w = 0; w < kFreeWords; ++w) free += static_cast<std::uint64_t>(__builtin_popcountll(span->free_bits[w]));
  if (free > span->capacity) model_violation("a span has more free bits than blocks", span->start(), size, free);
  for (std::size_t i = span->capacity; i < kFreeWords * 64; ++i)
    if ((span->free_bits[i / 64] >> (i % 64)) & 1) model_violation("a free bit past a span's last block", span->start(), size, i);
  holdings.free_blocks[cls] += free;
}

}  // namespace

CacheHoldings inspect_caches() {
  CacheHoldings holdings;
  visit_caches(inspect_cache, &holdings);
  return holdings;
}

SpanHoldings inspect_spans() {
  SpanHoldings holdings;
  g_page_heap.visit_small_spans(inspect_span, &holdings);
  return holdings;
}

std::size_t class_block_size(std::size_t cls) { return class_size(cls); }

}  // namespace strata_fuzz
