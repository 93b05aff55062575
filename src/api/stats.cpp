// strata_stats and strata_print_stats: counters of every tier, added up on
// request. Per-thread counters are written by their owner only and read here
// with relaxed atomic loads: a close snapshot while threads run, exact when
// they are quiet.
#include <cstring>

#include "platform/options.h"
#include "api/text_sink.h"
#include "backend/page_heap.h"
#include "central/central_cache.h"
#include "core/page_map.h"
#include "frontend/parcel.h"
#include "frontend/remote_free.h"
#include "frontend/thread_cache.h"
#include "platform/os.h"
#include "profile/sample_store.h"
#include "strata/strata.h"

using namespace strata::detail;

// The public per-class array (strata.h) has one entry per class.
static_assert(STRATA_NUM_SIZE_CLASSES == kNumClasses, "STRATA_NUM_SIZE_CLASSES must match core/size_classes.h");

namespace {

template <class T>
T peek(const T& field) noexcept {
  return __atomic_load_n(&field, __ATOMIC_RELAXED);
}

struct Totals {
  std::uint64_t out[kNumClasses] = {};       // blocks out of spans (thread-owned and unowned)
  std::uint64_t free[kNumClasses] = {};      // free blocks inside spans (their bits)
  std::uint64_t spans[kNumClasses] = {};
  std::uint64_t cached[kNumClasses] = {};    // on allocation words
  std::uint64_t transit[kNumClasses] = {};   // in outboxes and inboxes
  std::uint64_t parked_bytes = 0;
  std::uint64_t max_inbox_items = 0;         // see add_inbox
  std::size_t threads = 0;
  std::uint64_t remote_frees = 0;
  std::uint64_t remote_batches = 0;
};

// Every small span: its counters are read while their owners may change
// them (relaxed loads), so the sums are exact only while threads are quiet.
void add_span(const Span* span, void* context) {
  auto* totals = static_cast<Totals*>(context);
  std::size_t cls = peek(span->size_class);
  if (cls == 0 || cls >= kNumClasses) return;
  const std::uint32_t capacity = peek(span->capacity);
  std::uint32_t countdown = peek(span->countdown);
  std::uint32_t out =
      peek(span->sleeping) == kAsleep ? capacity - (size_class_build::wake_frees_for(capacity) - countdown) : countdown;
  if (out > capacity) out = capacity;
  totals->out[cls] += out;
  totals->free[cls] += capacity - out;
  totals->spans[cls] += 1;
  std::uint64_t units = peek(span->parked_units);
  totals->parked_bytes += static_cast<std::uint64_t>(__builtin_popcountll(units)) << peek(span->unit_shift);
}

// One block on its way to its owner, counted in its class (parcels carry
// no classes: the remote free path stays a store and an increment).
void add_transit(const void* block, Totals* totals) {
  if (Span* span = g_page_map.lookup(block)) {
    std::size_t cls = peek(span->size_class);
    if (cls < kNumClasses) ++totals->transit[cls];
  }
}

void add_parcel(const Parcel* parcel, Totals* totals) {
  std::uint32_t count = peek(parcel->count);
  for (std::uint32_t i = 0; i < count && i < Parcel::kCapacity; ++i) add_transit(peek(parcel->blocks[i]), totals);
}

// Blocks waiting in an inbox: the parcels are metadata, never unmapped, so a
// walk that races with their owner reads mapped memory; it is bounded, so
// that it ends even then. The bound is what a well-formed list can hold
// (each parcel that exists and each block small spans hold, at most once),
// never a fixed count: an idle owner's inbox may hold thousands of parcels,
// and the blocks past a fixed bound would count as in use.
void add_inbox(const Inbox& inbox, Totals* totals) {
  InboxItem item = inbox.peek_head();
  for (std::uint64_t items = 0; item != 0 && items < totals->max_inbox_items; ++items) {
    if (item_is_block(item)) {
      add_transit(item_block(item), totals);
      item = reinterpret_cast<InboxItem>(list_next(item_block(item)));
    } else {
      const Parcel* parcel = item_parcel(item);
      add_parcel(parcel, totals);
      item = peek(parcel->next);
    }
  }
}

void add_cache(ThreadCache* cache, void* context) {
  auto* totals = static_cast<Totals*>(context);
  if (cache->life == ThreadCache::Life::kAlive) ++totals->threads;
  totals->remote_frees += peek(cache->stats.remote_frees);
  totals->remote_batches += peek(cache->stats.batches_sent);
  for (std::size_t cls = 1; cls < kNumClasses; ++cls)
    totals->cached[cls] += count_bits(peek(cache->words[cls].bits)) + peek(cache->recent[cls].count);
  for (const OutboxSlot& slot : cache->outbox.slots)
    if (const Parcel* parcel = peek(slot.parcel)) add_parcel(parcel, totals);
  add_inbox(cache->inbox, totals);
}

std::uint64_t saturating_sub(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

}  // namespace

extern "C" void strata_stats(strata_stats_t* out) {
  if (out == nullptr) return;
  ensure_initialized();
  std::memset(out, 0, sizeof(*out));
  PageHeapStats heap = g_page_heap.stats();
  static Totals totals;  // too large for small thread stacks; guarded below
  static Mutex totals_mutex;
  LockGuard guard(totals_mutex);
  totals = Totals{};
  totals.max_inbox_items = parcel_metadata_bytes() / sizeof(Parcel) + heap.small_span_bytes / class_size(1) + 1;
  visit_caches(add_cache, &totals);
  g_page_heap.visit_small_spans(add_span, &totals);

  out->mapped_bytes = heap.mapped_bytes;
  out->resident_bytes = os_resident_bytes();
  out->small_span_bytes = heap.small_span_bytes;
  out->large_in_use_bytes = saturating_sub(heap.in_use_bytes, heap.small_span_bytes);
  out->page_heap_free_bytes = heap.free_bytes - heap.decommitted_bytes;
  out->decommitted_bytes = heap.decommitted_bytes + heap.fresh_bytes;  // neither is backed
  SampleStoreStats profile = g_sample_store.stats();
  out->metadata_bytes = span_metadata_bytes() + thread_cache_metadata_bytes() + parcel_metadata_bytes() +
                        g_page_map.leaf_bytes() + profile.metadata_bytes;
  out->profile_sampled_bytes = profile.live_requested_bytes;
  out->profile_samples = profile.live_samples;
  out->profile_samples_total = profile.total_samples;
  out->threads = totals.threads;
  out->spans_in_use = heap.in_use_spans;
  out->free_spans = heap.free_spans;
  out->os_reservations = heap.reservations;
  out->decommit_calls = heap.decommit_calls;
  std::uint64_t uncached = g_uncached_remote_frees.load(std::memory_order_relaxed);
  out->remote_frees = totals.remote_frees + uncached;
  out->remote_batches = totals.remote_batches + uncached;
  out->page_heap_lock_contended = heap.lock_contended;
  out->parked_bytes = totals.parked_bytes;

  std::uint64_t small_in_use = 0;
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    CentralStats central = g_central[cls].stats();
    out->central_lock_contended += central.lock_contended;
    std::uint64_t size = class_size(cls);
    strata_class_stats& c = out->classes[cls];
    c.block_size = size;
    c.spans = totals.spans[cls];
    c.blocks_cached = totals.cached[cls];
    c.blocks_in_use = saturating_sub(totals.out[cls], totals.cached[cls] + totals.transit[cls]);
    c.blocks_free_in_spans = totals.free[cls];
    small_in_use += c.blocks_in_use * size;
    out->thread_cache_bytes += c.blocks_cached * size;
    out->in_transit_bytes += totals.transit[cls] * size;
    out->span_free_bytes += c.blocks_free_in_spans * size;
  }
  out->in_use_bytes = small_in_use + out->large_in_use_bytes;
  std::uint64_t backed = saturating_sub(heap.mapped_bytes, out->decommitted_bytes + totals.parked_bytes);
  out->fragmentation =
      backed == 0 ? 0.0 : 1.0 - static_cast<double>(out->in_use_bytes) / static_cast<double>(backed);
}

namespace {

void print_table(TextSink& o, const strata_stats_t& s) {
  o.text("strata statistics\n");
  auto row = [&o](const char* name, std::uint64_t bytes, const char* note) {
    o.text("  ").text(name).pad_to(26).size(static_cast<double>(bytes), 12).text("   ").text(note).text("\n");
  };
  row("mapped", s.mapped_bytes, "address space reserved from the OS");
  row("resident (process)", s.resident_bytes, "physical memory of the whole process");
  row("in use", s.in_use_bytes, "blocks the program holds");
  row("  large blocks", s.large_in_use_bytes, "spans of their own (over 32 KiB, sampled)");
  row("small spans", s.small_span_bytes, "pages cut into size classes");
  row("thread caches", s.thread_cache_bytes, "free blocks cached per thread");
  row("in transit", s.in_transit_bytes, "freed blocks on their way to their owner");
  row("free in spans", s.span_free_bytes, "free blocks inside small spans");
  row("page heap free", s.page_heap_free_bytes, "free pages still backed");
  row("not backed", s.decommitted_bytes, "free pages given back (madvise) or never touched");
  row("parked", s.parked_bytes, "pages of partly used spans given back (madvise)");
  row("metadata", s.metadata_bytes, "spans, thread caches, page map");
  o.text("  threads ").number(s.threads).text(", spans in use ").number(s.spans_in_use)
      .text(", free spans ").number(s.free_spans).text(", reservations ").number(s.os_reservations)
      .text(", madvise calls ").number(s.decommit_calls).text("\n");
  o.text("  remote frees ").number(s.remote_frees).text(" in ").number(s.remote_batches)
      .text(" batches; lock contention: page heap ").number(s.page_heap_lock_contended)
      .text(", central ").number(s.central_lock_contended).text("\n");
  o.text("  fragmentation ").fixed(s.fragmentation * 100.0, 1).text(" % of backed memory not in use\n");
  o.text("  heap profile: ").number(s.profile_samples).text(" live samples (")
      .size(static_cast<double>(s.profile_sampled_bytes)).text(" requested), ").number(s.profile_samples_total)
      .text(" samples in all\n");
  o.text("  class  block size   in use   cached  free in spans  spans\n");
  for (std::size_t cls = 1; cls < STRATA_NUM_SIZE_CLASSES; ++cls) {
    const strata_class_stats& c = s.classes[cls];
    if (c.spans == 0 && c.blocks_in_use == 0) continue;
    o.number(cls, 7).number(c.block_size, 12).number(c.blocks_in_use, 9)
        .number(c.blocks_cached, 9).number(c.blocks_free_in_spans, 15).number(c.spans, 7).text("\n");
  }
}

void print_json(TextSink& o, const strata_stats_t& s) {
  auto field = [&o](const char* name, std::uint64_t value, bool first = false) {
    if (!first) o.text(",");
    o.text("\"").text(name).text("\":").number(value);
  };
  o.text("{");
  field("mapped_bytes", s.mapped_bytes, true);
  field("resident_bytes", s.resident_bytes);
  field("in_use_bytes", s.in_use_bytes);
  field("large_in_use_bytes", s.large_in_use_bytes);
  field("small_span_bytes", s.small_span_bytes);
  field("thread_cache_bytes", s.thread_cache_bytes);
  field("in_transit_bytes", s.in_transit_bytes);
  field("span_free_bytes", s.span_free_bytes);
  field("page_heap_free_bytes", s.page_heap_free_bytes);
  field("decommitted_bytes", s.decommitted_bytes);
  field("parked_bytes", s.parked_bytes);
  field("metadata_bytes", s.metadata_bytes);
  field("threads", s.threads);
  field("spans_in_use", s.spans_in_use);
  field("free_spans", s.free_spans);
  field("os_reservations", s.os_reservations);
  field("decommit_calls", s.decommit_calls);
  field("remote_frees", s.remote_frees);
  field("remote_batches", s.remote_batches);
  field("page_heap_lock_contended", s.page_heap_lock_contended);
  field("central_lock_contended", s.central_lock_contended);
  field("profile_sampled_bytes", s.profile_sampled_bytes);
  field("profile_samples", s.profile_samples);
  field("profile_samples_total", s.profile_samples_total);
  o.text(",\"fragmentation\":").fixed(s.fragmentation, 4);
  o.text(",\"classes\":[");
  bool first = true;
  for (std::size_t cls = 1; cls < STRATA_NUM_SIZE_CLASSES; ++cls) {
    const strata_class_stats& c = s.classes[cls];
    if (c.spans == 0 && c.blocks_in_use == 0) continue;
    o.text(first ? "{" : ",{");
    first = false;
    field("class", cls, true);
    field("block_size", c.block_size);
    field("blocks_in_use", c.blocks_in_use);
    field("blocks_cached", c.blocks_cached);
    field("blocks_free_in_spans", c.blocks_free_in_spans);
    field("spans", c.spans);
    o.text("}");
  }
  o.text("]}\n");
}

strata_stats_t g_print_snapshot;  // static: the struct is large for a thread stack
Mutex g_print_mutex;

}  // namespace

extern "C" void strata_print_stats(strata_write_fn write, void* context) {
  LockGuard guard(g_print_mutex);
  strata_stats(&g_print_snapshot);
  TextSink sink(write, context);
  print_table(sink, g_print_snapshot);
  print_json(sink, g_print_snapshot);
}

extern "C" void strata_print_stats_json(strata_write_fn write, void* context) {
  LockGuard guard(g_print_mutex);
  strata_stats(&g_print_snapshot);
  TextSink sink(write, context);
  print_json(sink, g_print_snapshot);
}
