// Slow paths of the thread cache: allocation lists, the spans a thread owns,
// young threads, thread creation and exit, fork handling.
#include "frontend/thread_cache.h"

#include <cerrno>
#include <cstddef>
#include <pthread.h>

#include "backend/background_thread.h"
#include "backend/metadata_pool.h"
#include "backend/page_heap.h"
#include "central/central_cache.h"
#include "core/diagnostics.h"
#include "core/ownership.h"
#include "frontend/misuse.h"
#include "frontend/remote_free.h"
#include "platform/options.h"
#include "profile/profile.h"

namespace strata::detail {

namespace {

// A thread stays young (no cache, no spans of its own: one block at a time
// from the central cache) until it has made this many small allocations: a
// thread that holds a few blocks then sleeps (thread-per-connection servers)
// costs no span of its own, and a busy thread pays the central lock only
// this many times.
constexpr std::uint32_t kYoungAllocations = 256;
// ... or this many frees of blocks other threads own: without a cache each
// of those is pushed on its own onto the owner's inbox (an atomic, and a
// chain of cold blocks for the owner to follow), where a cache sends
// parcels of 64 (a consumer thread that never allocates must not stay
// young). Its frees of the central cache's blocks do not count: a young
// thread's own malloc/free pairs, counted as allocations.
constexpr std::uint32_t kYoungRemoteFrees = 64;

// A thread that has taken fewer spans than this is not busy yet: carving
// stays within one OS page (carve_quota).
constexpr std::uint32_t kBusySpans = 64;
// A class over kOwnSpanOver bytes gets a span in a thread only after
// the thread asked for it this many times; until then each block is a span
// of its own (allocate_paged_block).
constexpr std::uint8_t kPagedRequests = 32;
constexpr std::size_t kOwnSpanOver = 2048;

// Allocation slow paths between two housekeeping visits (each reads the
// clock twice): every slow path hands out a whole list, so this is at most a
// few thousand mallocs, and span events visit too.
constexpr std::int32_t kSlowPathsPerHousekeeping = 8;

static_assert(sizeof(ThreadCache) % 4096 == 0, "pool objects must stay page-aligned");
static_assert(offsetof(ThreadCache, lists) == kListsOffset, "list offsets assume this layout");
static_assert(offsetof(ThreadCache, inbox) + sizeof(Inbox) <= 4096, "the hot part fits one OS page");

constinit ThreadCache g_empty_cache;  // new threads: empty lists, owns nothing
constinit ThreadCache g_dead_cache;   // threads past their exit hook

constinit Mutex g_registry_mutex;     // guards the registry and cache lifecycle
constinit ThreadCache* g_registry = nullptr;
constinit ThreadCache* g_dead = nullptr;  // LIFO of caches whose thread exited
constinit MetadataPool<ThreadCache> g_cache_pool;
pthread_key_t g_exit_key;

}  // namespace

std::size_t g_fast_size_limit = 0;

// initial-exec: one %fs-relative load, no __tls_get_addr call.
// t_cache is what the fast paths use; t_live_cache is the thread's own cache
// (nullptr while the thread is young, &g_dead_cache after its exit). In
// checking mode threads stay young for good, so every call is checked.
constinit thread_local ThreadCache* t_cache __attribute__((tls_model("initial-exec"))) = &g_empty_cache;
namespace {
constinit thread_local ThreadCache* t_live_cache __attribute__((tls_model("initial-exec"))) = nullptr;
constinit thread_local std::uint32_t t_young_allocations __attribute__((tls_model("initial-exec"))) = 0;
constinit thread_local std::uint32_t t_young_remote_frees __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace

// --- the spans a cache owns -------------------------------------------------------

namespace {

// An awake span with no block out: kept for reuse while the thread's burst
// bound allows (a burst of frees followed by a burst of mallocs then never
// touches the page heap), else given back.
void span_emptied(ThreadCache* cache, Span* span) noexcept {
  std::size_t cls = span->size_class;
  if (cache->kept_empty_bytes + span->bytes() <= cache->max_kept_bytes * kBurstKeptFactor) {
    recycle_empty_span(span, cache->key);
    span->kept_empty = true;
    span->used_epoch = cache->scavenge_epoch;  // idle from now
    span->idle_since = monotonic_ns();         // for the surplus over max_kept_bytes
    cache->kept_empty_bytes += span->bytes();
    cache->partial[cls].remove(span);
    cache->partial[cls].push_back(span);  // spans with live blocks are used first
    return;
  }
  verify_empty_span(span, cache->key);
  cache->partial[cls].remove(span);
  g_page_heap.deallocate(span);
}

// Takes a kept empty span back into use.
void unkeep(ThreadCache* cache, Span* span) noexcept {
  if (!span->kept_empty) return;
  span->kept_empty = false;
  cache->kept_empty_bytes -= span->bytes();
}

// The next span to allocate class `cls` from: an owned one with free blocks
// (fullest first: the front of the list), an unowned one, a fresh one.
// An empty span this thread keeps for another class of the same span length
// (a burst of one mix of sizes freed, then another allocated: the pages
// serve again without a visit to the page heap). Made over for `cls`: the
// owner tags stay (same owner), the blocks start over as never used.
Span* reuse_kept_span_of_another_class(ThreadCache* cache, std::size_t cls) noexcept {
  if (cache->kept_empty_bytes == 0) return nullptr;
  const std::uint32_t pages = class_info(cls).span_pages;
  for (std::size_t other = 1; other < kNumClasses; ++other) {
    if (other == cls || class_info(other).span_pages != pages) continue;
    Span* span = cache->partial[other].tail;
    if (span == nullptr || !span->kept_empty) continue;
    unkeep(cache, span);
    cache->partial[other].remove(span);
    verify_empty_span(span, cache->key);  // its recycled blocks' marks mean nothing in the new class
    format_small_span(span, cls);
    return span;
  }
  return nullptr;
}

Span* next_span(ThreadCache* cache, std::size_t cls) noexcept {
  SpanList& partial = cache->partial[cls];
  if (!partial.empty()) {
    // Spans with live blocks first (the front); among the empty ones kept
    // at the back, the one emptied last: its blocks are the likeliest to
    // be in the caches, and the oldest age out (release_idle_surplus). The
    // first emptied would cycle a small working set through every span a
    // burst left (1 KiB blocks, 100 at a time after a burst of 100,000:
    // 18.6 against 10.5 ns per pair).
    Span* span = partial.head->kept_empty ? partial.tail : partial.head;
    partial.remove(span);
    unkeep(cache, span);
    return span;
  }
  if (Span* span = reuse_kept_span_of_another_class(cache, cls)) return span;
  if (Span* span = g_central[cls].adopt(cache)) {
    ++cache->stats.spans_adopted;
    ++cache->spans_taken;
    return span;
  }
  Span* span = g_page_heap.allocate(class_info(cls).span_pages, 1, SpanState::kSmall);
  if (span == nullptr) return nullptr;
  init_small_span(span, cls, cache);
  ++cache->stats.spans_new;
  ++cache->spans_taken;
  return span;
}

// How many never-used blocks to carve: up to `want`; none past the OS page
// the first one starts in (at least one) while the span has not been
// carved yet, or while the thread has taken few spans. Carving writes into
// every block it hands the list, so a page it touches becomes resident: a
// class a program uses a few times should cost the pages its blocks lie in,
// not a batch's worth (most of the classes of a short program, such as
// python starting up, stay in that state). A thread that took many spans is
// busy and gets whole batches (fewer slow paths).
std::uint32_t carve_quota(const ThreadCache* cache, const Span* span, std::uint32_t want) noexcept {
  constexpr std::uintptr_t kOsPage = 4096;
  // Recycled blocks: their pages are resident already; all of them at once,
  // as one list taken from the span would be.
  if (span->carve_next < span->marked_end) {
    std::uintptr_t recycled = (span->marked_end - span->carve_next) / class_size(span->size_class);
    return recycled > want ? static_cast<std::uint32_t>(recycled) : want;
  }
  if (span->carve_next != reinterpret_cast<std::uintptr_t>(span->start()) && cache->spans_taken >= kBusySpans)
    return want;
  std::uintptr_t size = class_size(span->size_class);
  std::uintptr_t page_end = (span->carve_next & ~(kOsPage - 1)) + kOsPage;
  std::uintptr_t fits = page_end > span->carve_next ? (page_end - span->carve_next + size - 1) / size : 1;
  if (fits < 1) fits = 1;
  return fits < want ? static_cast<std::uint32_t>(fits) : want;
}

// Makes the class's allocation list non-empty from the current span: its
// own free list (O(1)), topped up with never-used blocks carved from it
// when the list is short, else its parked blocks. A span whose list is too
// short to be worth a slow path (fewer blocks than wake_frees, nothing to
// carve) sleeps while other spans have more, and the next span becomes
// current. False when the OS refuses memory.
bool refill(ThreadCache* cache, std::size_t cls) noexcept {
  AllocList& list = cache->lists[cls];
  const SizeClassInfo& info = class_info(cls);
  for (;;) {
    Span* span = cache->current[cls];
    if (span != nullptr) {
      std::uint32_t listed = span->listed_mark - span->countdown;
      bool can_carve = span->carve_next < span->carve_end;
      if (!can_carve && span->parked_blocks != 0) {
        unpark_blocks(span, cache->key);
        continue;
      }
      if (can_carve || listed >= info.wake_frees || (listed != 0 && cache->partial[cls].empty())) {
        std::uint32_t count = 0;
        void* head = nullptr;
        if (listed != 0) {
          head = take_free_list(span, count);
          ++cache->stats.lists_taken;
        }
        if (count < info.batch && can_carve) {
          std::uint32_t carved = 0;
          head = carve_blocks(span, carve_quota(cache, span, info.batch - count), cache->key, carved, head);
          count += carved;
        }
        list.head = head;
        list.avail = count;
        span->used_epoch = cache->scavenge_epoch;
        return true;
      }
      sleep_span(span);
      cache->sleeping.push(span);
      cache->current[cls] = nullptr;
    }
    span = next_span(cache, cls);
    if (span == nullptr) return false;
    cache->current[cls] = span;
  }
}

// --- heap profiling: counting allocation lists ---------------------------------------

// Blocks [keep, end) of the class's list go back to the current span: the
// list ends before the sampled allocation.
void cut_list(ThreadCache* cache, std::size_t cls, std::uint64_t keep) noexcept {
  AllocList& list = cache->lists[cls];
  Span* span = cache->current[cls];
  void* rest = list.head;
  void* last_kept = nullptr;
  for (std::uint64_t i = 0; i < keep; ++i) {
    last_kept = rest;
    rest = list_next(rest);
  }
  if (last_kept != nullptr) list_set_next(last_kept, nullptr);
  else list.head = nullptr;
  list.avail = static_cast<std::int64_t>(keep);
  while (rest != nullptr) {
    void* next = list_next(rest);
    push_block(span, rest, cache->key);  // the current span: an empty countdown needs no action
    rest = next;
  }
}

// Counts a list the slow path just formed against the sampling countdown
// (profile/sampler.h), in O(1) unless a sampling point falls inside it: then
// the list is cut before the block at that point, and the malloc that finds
// it empty is the sampled one (sample_pending). Every block handed out by
// the fast path was counted here: frees never refill these lists.
void count_for_sampling(ThreadCache* cache, std::size_t cls) noexcept {
  const std::uint64_t size = class_size(cls);
  const std::uint64_t blocks = static_cast<std::uint64_t>(cache->lists[cls].avail);
  std::uint64_t counted = 0;
  while (counted < blocks) {
    std::int64_t left = t_bytes_until_sample;
    std::uint64_t rest = (blocks - counted) * size;
    if (left >= 0 && static_cast<std::uint64_t>(left) >= rest) {
      t_bytes_until_sample = left - static_cast<std::int64_t>(rest);
      return;
    }
    // The point falls in the block after the `before` ones that fit.
    std::uint64_t before = left <= 0 ? 0 : static_cast<std::uint64_t>(left) / size;
    t_bytes_until_sample = left - static_cast<std::int64_t>(before * size);
    if (sampling_point_in(size)) {
      cut_list(cache, cls, counted + before);
      cache->sample_pending[cls >> 6] |= std::uint64_t{1} << (cls & 63);
      return;
    }
    counted += before + 1;  // not sampled (profiling off, a new thread arming): count on
  }
}

bool take_sample_pending(ThreadCache* cache, std::size_t cls) noexcept {
  std::uint64_t bit = std::uint64_t{1} << (cls & 63);
  if ((cache->sample_pending[cls >> 6] & bit) == 0) return false;
  cache->sample_pending[cls >> 6] &= ~bit;
  return true;
}

// Puts the blocks still on the allocation list back on the current span's
// list (thread exit, flushes).
void return_alloc_list(ThreadCache* cache, std::size_t cls) noexcept {
  AllocList& list = cache->lists[cls];
  Span* span = cache->current[cls];
  void* block = list.head;
  list.head = nullptr;
  list.avail = 0;
  std::uint32_t budget = span != nullptr ? span->capacity : 0;
  while (block != nullptr && budget-- != 0) {
    void* next = list_next(block);
    push_block(span, block, cache->key);  // the span's countdown may reach 0: the caller looks
    block = next;
  }
}

// Files the current span as an ordinary partial span (or empty one).
void retire_current(ThreadCache* cache, std::size_t cls) noexcept {
  Span* span = cache->current[cls];
  if (span == nullptr) return;
  cache->current[cls] = nullptr;
  cache->partial[cls].push(span);
  if (span->countdown == 0) span_emptied(cache, span);
}

}  // namespace

void span_countdown_hit(ThreadCache* cache, Span* span) noexcept {
  std::size_t cls = span->size_class;
  if (span->sleeping) {
    // Enough of a full span's blocks came back: it serves allocations again.
    wake_span(span);
    cache->sleeping.remove(span);
    cache->partial[cls].push(span);
    return;
  }
  // Every block came back. The current span stays current (its list feeds
  // the next allocation, most recently freed first: one span's blocks are
  // few enough that their order costs nothing); any other goes.
  if (span == cache->current[cls]) return;
  span_emptied(cache, span);
  // A program that only frees still gives memory back on time.
  if (--cache->slow_until_housekeeping < 0) {
    cache->slow_until_housekeeping = kSlowPathsPerHousekeeping;
    housekeeping(cache);
  }
}

// --- receiving blocks other threads freed -------------------------------------------

namespace {

// One block of the inbox. Its page's owner tag says whether we still own the
// span (the sender may have looked before the span changed hands).
void receive_block(ThreadCache* cache, void* block) noexcept {
  ++cache->stats.remote_received;
  PageMap::EntryRef entry = g_page_map.entry_ref(block);  // one lookup for the tag and the span
  Span* span = entry.span();
  if (entry.owner_tag() != owner_tag_for(cache)) return remote_free(cache, block, span);
  // Freed by another thread: already free here? (The drain writes the block
  // now anyway and has asked for its line ahead, so reading its mark costs
  // little; the free fast path, whose blocks are often cold, does not read.)
  if (has_free_mark(block, cache->key)) confirm_not_free(cache, span, block);
  free_owned(cache, span, block);
}

}  // namespace

void drain_inbox(ThreadCache* cache) noexcept {
  InboxItem item = cache->inbox.take_all();
  while (item != 0) {
    InboxItem next = item_next(item);
    if (item_is_block(item)) {
      receive_block(cache, item_block(item));
    } else {
      Parcel* parcel = item_parcel(item);
      for (std::uint32_t i = 0; i < parcel->count; ++i) {
        // The blocks are cold: ask for their lines well ahead, for writing.
        if (i + 8 < parcel->count) __builtin_prefetch(parcel->blocks[i + 8], 1);
        receive_block(cache, parcel->blocks[i]);
      }
      release_parcel(cache, parcel);
    }
    item = next;
  }
}

// --- housekeeping: memory goes back on time -------------------------------------------

namespace {

// Once per decay period, at the end of an epoch (an epoch lasts at least a
// period): empty spans kept through the whole epoch (kept before it began) go
// to the page heap with the time they were kept (so its next decay run
// returns their pages), and
// partly used spans that fed no allocation list in it give back the pages
// that hold no live block.
void scavenge(ThreadCache* cache, std::uint64_t now) noexcept {
  std::uint64_t period = g_options.decay_ms * 1000000ull;
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    SpanList& spans = cache->partial[cls];
    for (Span* span = spans.tail; span != nullptr && span->kept_empty;) {
      Span* before = span->prev;
      if (span->used_epoch < cache->scavenge_epoch) {  // kept a whole period
        unkeep(cache, span);
        spans.remove(span);
        verify_empty_span(span, cache->key);
        g_page_heap.deallocate(span, span->idle_since);  // aged already: decays at the next run
      }
      span = before;
    }
    // Spans that fed no allocation list for a whole period: their pages
    // without a live block go back (a span in use keeps its pages).
    for (Span* span = spans.head; span != nullptr && !span->kept_empty; span = span->next)
      if (span->used_epoch < cache->scavenge_epoch)
        cache->stats.parked_bytes += park_free_units(span, cache->key);
    g_central[cls].release_kept_if_idle(now, period);
  }
  flush_outbox(cache);
}

// Kept empty spans beyond max_kept_bytes that have been empty for a decay
// period go to the page heap with that age, so its next decay run returns
// their pages (checked four times per period: pages a burst left go back
// 1.25-1.5 periods after it, as the page heap's own free pages do). Within
// max_kept_bytes, kept spans wait for the end of an epoch (scavenge).
void release_idle_surplus(ThreadCache* cache, std::uint64_t now, std::uint64_t period) noexcept {
  for (std::size_t cls = 1; cls < kNumClasses && cache->kept_empty_bytes > cache->max_kept_bytes; ++cls) {
    SpanList& spans = cache->partial[cls];
    for (Span* span = spans.tail; span != nullptr && span->kept_empty;) {
      Span* before = span->prev;
      if (now - span->idle_since >= period) {
        unkeep(cache, span);
        spans.remove(span);
        verify_empty_span(span, cache->key);
        g_page_heap.deallocate(span, span->idle_since);
        if (cache->kept_empty_bytes <= cache->max_kept_bytes) break;
      }
      span = before;
    }
  }
}

}  // namespace

void housekeeping(ThreadCache* cache) noexcept {
  g_page_heap.maybe_decay();
  std::uint64_t now = monotonic_ns();
  std::uint64_t period = g_options.decay_ms * 1000000ull;
  if (cache->kept_empty_bytes > cache->max_kept_bytes && now >= cache->next_surplus_check_ns) {
    release_idle_surplus(cache, now, period);
    cache->next_surplus_check_ns = now + period / 4;
  }
  if (now < cache->next_scavenge_ns) return;
  if (cache->next_scavenge_ns != 0) scavenge(cache, now);
  ++cache->scavenge_epoch;
  cache->next_scavenge_ns = now + (period != 0 ? period : 1000000000ull);
}

std::size_t flush_thread_cache(ThreadCache* cache) noexcept {
  flush_outbox(cache);
  drain_inbox(cache);
  std::size_t released = 0;
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    if (cache->current[cls] != nullptr) {
      return_alloc_list(cache, cls);
      retire_current(cache, cls);
    }
    SpanList& spans = cache->partial[cls];
    for (Span* span = spans.head; span != nullptr;) {
      Span* next = span->next;
      if (span->countdown == 0) {
        verify_empty_span(span, cache->key);
        unkeep(cache, span);
        spans.remove(span);
        g_page_heap.deallocate(span);
      } else {
        std::size_t parked = park_free_units(span, cache->key);
        cache->stats.parked_bytes += parked;
        released += parked;
      }
      span = next;
    }
  }
  flush_outbox(cache);
  return released;
}

// --- slow paths -----------------------------------------------------------------

namespace {

// A thread without spans of its own: one block from the central cache,
// counted on its own for heap profiling.
void* allocate_from_central(std::size_t cls, std::size_t size, CallSite site, std::size_t alignment) noexcept {
  std::size_t block_size = class_size(cls);
  if (sampling_point_in(block_size)) {
    if (void* block = allocate_sampled(size, alignment, block_size, block_size, site)) return block;
  }
  void* block = g_central[cls].allocate_one(cls);
  if (block == nullptr) errno = ENOMEM;
  return block;
}

// A block over kOwnSpanOver bytes of a class the thread has asked for
// fewer than kPagedRequests times (or of a young thread): a span of its own
// from the page heap, as every block over 32 KiB is. Freed, its pages
// coalesce with their neighbours and serve the next request of any size,
// where a class span (16 blocks: 36-1,024 KiB for these classes) would stay
// with the thread for its own blocks: a short program that allocates
// buffers of dozens of sizes a few times each (python starting up), or a
// short-lived thread that allocates a few large blocks, held a span per
// size. A class the thread keeps asking for soon gets its span and the
// classes' speed.
void* allocate_paged_block(std::size_t size, CallSite site) noexcept {
  std::size_t pages = (size + kPageSize - 1) >> kPageShift;
  if (sampling_point_in(size)) {  // page heap requests count their own bytes
    if (void* block = allocate_sampled(size, 0, pages << kPageShift, size, site)) return block;
  }
  Span* span = g_page_heap.allocate(pages);
  if (span == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  span->pages_zero = false;
  return span->start();
}

ThreadCache* create_cache() noexcept;

}  // namespace

__attribute__((noinline)) void* allocate_slow_from_entry(std::size_t cls, std::size_t size) noexcept {
  return allocate_slow(cls, size, STRATA_CALL_SITE);
}

void* allocate_slow(std::size_t cls, std::size_t size, CallSite site, std::size_t alignment) noexcept {
  ThreadCache* cache = t_live_cache;
  if (cache == nullptr) {
    ensure_initialized();
    if (++t_young_allocations <= kYoungAllocations || g_options.check) {
      if (class_size(cls) > kOwnSpanOver && !g_options.check) return allocate_paged_block(size, site);
      return allocate_from_central(cls, size, site, alignment);
    }
    cache = create_cache();
    if (cache == nullptr) return allocate_from_central(cls, size, site, alignment);
  }
  if (cache == &g_dead_cache) return allocate_from_central(cls, size, site, alignment);
  ++cache->stats.allocs_slow;
  // The list ran dry where heap profiling cut it: this is the sampled one.
  if (take_sample_pending(cache, cls)) {
    std::size_t block_size = class_size(cls);
    if (void* block = allocate_sampled(size, alignment, block_size, block_size, site)) return block;
  }
  if (class_size(cls) > kOwnSpanOver && cache->paged_requests[cls] < kPagedRequests) {
    ++cache->paged_requests[cls];
    return allocate_paged_block(size, site);
  }
  if (--cache->slow_until_housekeeping < 0) {
    cache->slow_until_housekeeping = kSlowPathsPerHousekeeping;
    housekeeping(cache);
  }
  if (cache->outbox.pending_bytes != 0) flush_outbox(cache);
  if (!cache->inbox.empty()) drain_inbox(cache);
  AllocList& list = cache->lists[cls];
  if (!refill(cache, cls)) {
    list.avail = 0;
    errno = ENOMEM;
    return nullptr;
  }
  count_for_sampling(cache, cls);
  if (list.head == nullptr && take_sample_pending(cache, cls)) {
    // The sampling point fell on this very allocation.
    std::size_t block_size = class_size(cls);
    if (void* block = allocate_sampled(size, alignment, block_size, block_size, site)) return block;
    if (!refill(cache, cls)) {  // no memory for the sample: serve it unsampled
      list.avail = 0;
      errno = ENOMEM;
      return nullptr;
    }
  }
  void* block = list.head;
  if (!take_free_mark(block, cache->key)) unmarked_free_block(block);
  list.head = list_next(block);
  --list.avail;
  return block;
}

void unmarked_free_block(void* block) noexcept { report_unmarked_free_block(block); }

namespace {

// Every other free that misses the fast path: NULL, large blocks, the
// calling thread's young or dead state, blocks of unowned spans, checking
// mode, and every kind of misuse.
__attribute__((noinline)) void deallocate_general(void* block) noexcept {
  if (block == nullptr) return;
  Span* span = g_page_map.lookup(block);
  if (span == nullptr || !span->contains(block))
    report_misuse(block, "free of a pointer strata never returned");
  if (span->state != SpanState::kSmall && span->state != SpanState::kLarge)
    report_misuse(block, "double free (block of a free span)");
  if (span->state == SpanState::kLarge) {
    if (block != span->start()) report_misuse(block, "free of an interior pointer");
    if (span->sample != nullptr) release_sampled(span);  // heap profiling
    return g_page_heap.deallocate(span);
  }
  std::size_t offset = static_cast<std::size_t>(static_cast<char*>(block) -
                                                static_cast<char*>(span->start()));
  if (!is_block_start(offset, span->size_class)) report_misuse(block, "free of an interior pointer");
  if (g_options.check) checked_free(block, span);
  ThreadCache* cache = current_cache(false);
  if (cache == nullptr && t_live_cache == nullptr && span->owner.load(std::memory_order_relaxed) != nullptr &&
      ++t_young_remote_frees > kYoungRemoteFrees && !g_options.check && initialized())
    cache = create_cache();
  if (cache != nullptr && span->owner.load(std::memory_order_relaxed) == cache) {
    ++cache->stats.frees_slow;
    return free_owned(cache, span, block);
  }
  remote_free(cache, block, span);
}

}  // namespace

void deallocate_slow(void* block) noexcept {
  // The common case first: a block of a span another thread owns (its
  // page's owner tag is set), freed by a thread with a cache. A set tag
  // already says what deallocate_general establishes one check at a time
  // (a span strata made, covering the block, small, owned by a thread);
  // what is left to check is the state (a tag read while a double free
  // races with the span's release) and the block's start.
  ThreadCache* cache = t_cache;
  PageMap::EntryRef entry = g_page_map.entry_ref(block);
  if (entry.owner_tag() != 0 && cache->life == ThreadCache::Life::kAlive) {
    Span* span = entry.span();
    std::size_t offset = static_cast<std::size_t>(static_cast<char*>(block) -
                                                  static_cast<char*>(span->start()));
    if (__builtin_expect(span->state == SpanState::kSmall && offset < span->bytes() &&
                             is_block_start(offset, span->size_class),
                         1))
      return remote_free(cache, block, span);
  }
  return deallocate_general(block);
}

// --- thread life ------------------------------------------------------------------

namespace {

void on_thread_exit(void* argument) noexcept {
  auto* cache = static_cast<ThreadCache*>(argument);
  release_thread_cache(cache);
  t_cache = &g_dead_cache;
  t_live_cache = &g_dead_cache;
  LockGuard guard(g_registry_mutex);
  cache->life = ThreadCache::Life::kDead;
  cache->dead_next = g_dead;
  g_dead = cache;
}

ThreadCache* create_cache() noexcept {
  ensure_initialized();
  ThreadCache* cache = nullptr;
  {
    LockGuard guard(g_registry_mutex);
    if (g_dead != nullptr) {  // O(1): thread churn reuses caches, never grows the registry
      cache = g_dead;
      g_dead = cache->dead_next;
      cache->dead_next = nullptr;
    }
    if (cache == nullptr) {
      cache = g_cache_pool.create();
      if (cache == nullptr) return nullptr;
      cache->registry_next = g_registry;
      g_registry = cache;
    }
    cache->life = ThreadCache::Life::kAlive;
  }
  cache->key = g_list_key;
  cache->max_kept_bytes = g_options.thread_cache_bytes;
  cache->kept_empty_bytes = 0;
  cache->next_scavenge_ns = 0;
  cache->spans_taken = 0;  // a reused cache: this thread has taken none yet
  for (std::uint8_t& asked : cache->paged_requests) asked = 0;
  if (cache->scavenge_epoch == 0) cache->scavenge_epoch = 1;  // spans unused for a whole epoch give pages back
  cache->sample_pending[0] = cache->sample_pending[1] = 0;
  t_live_cache = cache;
  t_cache = cache;
  drain_inbox(cache);  // a reused cache may have mail for spans now owned elsewhere
  flush_outbox(cache);
  pthread_setspecific(g_exit_key, cache);
  return cache;
}

}  // namespace

ThreadCache* current_cache(bool create) noexcept {
  ThreadCache* cache = t_live_cache;
  if (__builtin_expect(cache != nullptr, 1)) return cache == &g_dead_cache ? nullptr : cache;
  if (!create || g_options.check) return nullptr;
  return create_cache();
}

void release_thread_cache(ThreadCache* cache) noexcept {
  flush_outbox(cache);
  drain_inbox(cache);
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    if (cache->current[cls] != nullptr) {
      return_alloc_list(cache, cls);
      cache->partial[cls].push(cache->current[cls]);
      cache->current[cls] = nullptr;
    }
  }
  // Every span goes: awake ones as they are, sleeping ones woken first (the
  // central cache counts blocks out), kept empty ones to the page heap
  // through abandon (no block out).
  while (Span* span = cache->sleeping.pop()) {
    wake_span(span);
    cache->partial[span->size_class].push(span);
  }
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    for (Span* span = cache->partial[cls].head; span != nullptr; span = span->next) span->kept_empty = false;
    g_central[cls].abandon(cache->partial[cls]);
  }
  cache->kept_empty_bytes = 0;
  // Anything sent to us from now on finds the spans unowned, or is routed by
  // the next thread that takes this cache over.
  drain_inbox(cache);
  flush_outbox(cache);
  release_spare_parcels(cache);
}

std::size_t thread_cache_metadata_bytes() noexcept { return g_cache_pool.raw().mapped_bytes(); }

void visit_caches(void (*visit)(ThreadCache*, void*), void* context) noexcept {
  LockGuard guard(g_registry_mutex);
  for (ThreadCache* c = g_registry; c != nullptr; c = c->registry_next) visit(c, context);
}

// --- process set-up and fork ------------------------------------------------------

namespace {
constinit Mutex g_init_mutex;
std::atomic<int> g_init_state{0};  // 0 none, 2 ready
// Set while this thread initializes: pthread_key_create and pthread_atfork
// may allocate and come back here, and must not wait for themselves.
constinit thread_local bool t_initializing __attribute__((tls_model("initial-exec"))) = false;
}  // namespace

bool initialized() noexcept { return g_init_state.load(std::memory_order_acquire) == 2; }

void ensure_initialized() noexcept {
  if (__builtin_expect(g_init_state.load(std::memory_order_acquire) == 2, 1)) return;
  if (t_initializing) return;  // nested call from the set-up below
  {
    // Every other thread waits here until the set-up is complete: one that
    // went on earlier would register its cache under g_exit_key before the
    // key exists, i.e. under key 0, another library's key (ASan's), whose
    // destructor then receives a ThreadCache* at thread exit.
    LockGuard guard(g_init_mutex);
    if (g_init_state.load(std::memory_order_relaxed) == 2) return;
    t_initializing = true;
    load_options();
    g_page_heap.set_decay(g_options.decay_ms * 1000000ull);
    g_list_key = os_random_u64() | 1;
    if (!g_options.check) __atomic_store_n(&g_fast_size_limit, 1025, __ATOMIC_RELAXED);
    pthread_key_create(&g_exit_key, on_thread_exit);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    g_init_state.store(2, std::memory_order_release);
    t_initializing = false;
  }
  start_background_thread_if_wanted();
}

void fork_prepare() noexcept {
  profile_fork_prepare();
  g_init_mutex.lock();
  g_registry_mutex.lock();
  for (CentralCache& central : g_central) central.mutex().lock();
  g_page_heap.mutex().lock();
  span_pool_mutex().lock();
  parcel_pool_mutex().lock();
  g_cache_pool.raw().mutex().lock();
}

void fork_parent() noexcept {
  g_cache_pool.raw().mutex().unlock();
  parcel_pool_mutex().unlock();
  span_pool_mutex().unlock();
  g_page_heap.mutex().unlock();
  for (CentralCache& central : g_central) central.mutex().unlock();
  g_registry_mutex.unlock();
  g_init_mutex.unlock();
  profile_fork_parent();
}

void fork_child() noexcept {
  g_cache_pool.raw().mutex().reset_after_fork();
  parcel_pool_mutex().reset_after_fork();
  span_pool_mutex().reset_after_fork();
  g_page_heap.mutex().reset_after_fork();
  for (CentralCache& central : g_central) central.mutex().reset_after_fork();
  g_registry_mutex.reset_after_fork();
  g_init_mutex.reset_after_fork();
  profile_fork_child();
  background_thread_after_fork_child();
  // The other threads are gone. Their caches keep what they held (a bounded
  // amount): their lists may have been mid-update when fork struck, so they
  // are not walked. Their spans stay owned; blocks freed here wait in their
  // inboxes. Marked kStatic so that they are never handed to a new thread.
  ThreadCache* self = t_live_cache;
  for (ThreadCache* c = g_registry; c != nullptr; c = c->registry_next)
    if (c != self && c->life == ThreadCache::Life::kAlive) c->life = ThreadCache::Life::kStatic;
}

}  // namespace strata::detail
