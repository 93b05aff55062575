// Slow paths of the thread cache, thread creation and exit, fork handling.
#include "frontend/thread_cache.h"

#include <cerrno>
#include <cstddef>
#include <pthread.h>

#include "api/options.h"
#include "api/checked.h"
#include "api/diagnostics.h"
#include "backend/metadata_pool.h"
#include "backend/page_heap.h"
#include "central/central_cache.h"
#include "frontend/remote_free.h"
#include "profile/profile.h"

namespace strata::detail {

namespace {

// Longest a free list may grow (TCMalloc's kMaxDynamicFreeListLength).
constexpr std::uint32_t kMaxListLength = 8192;

// Fast-path frees between two housekeeping visits.
constexpr std::int32_t kFreesPerHousekeeping = 256;

static_assert(sizeof(ThreadCache) % 2048 == 0, "pool objects must stay 2048-aligned for owner tags");
static_assert(offsetof(ThreadCache, lists) == kListsOffset, "list offsets assume this layout");

constinit ThreadCache g_empty_cache;  // new threads: empty lists, owns nothing
constinit ThreadCache g_dead_cache;   // threads past their exit hook

constinit Mutex g_registry_mutex;     // guards the registry and cache lifecycle
constinit ThreadCache* g_registry = nullptr;
constinit ThreadCache* g_dead = nullptr;  // LIFO of caches whose thread exited
constinit MetadataPool<ThreadCache> g_cache_pool;
pthread_key_t g_exit_key;

}  // namespace

// initial-exec: one %fs-relative load, no __tls_get_addr call.
// t_cache is what the fast paths use; t_live_cache is the thread's own cache
// (nullptr before its first slow path, &g_dead_cache after its exit). They
// differ only in checking mode, where t_cache stays at the empty cache so
// that every malloc and free takes the checked slow path.
constinit thread_local ThreadCache* t_cache __attribute__((tls_model("initial-exec"))) = &g_empty_cache;
namespace {
thread_local ThreadCache* t_live_cache __attribute__((tls_model("initial-exec"))) = nullptr;
}

// --- per-list maintenance ------------------------------------------------------

namespace {

// A block of a span `cache` owns goes back into its span; a span that was
// full becomes partial again.
void return_owned_block(ThreadCache* cache, std::size_t cls, Span* span, void* block) noexcept {
  --cache->blocks_out[cls];
  if (return_block(span, block)) {
    cache->full[cls].remove(span);
    cache->partial[cls].push(span);
  }
}

}  // namespace

void shrink_list(ThreadCache* cache, std::size_t cls, std::uint32_t keep) noexcept {
  FreeList& list = cache->lists[cls];
  SpanList empty;
  while (list.length() > keep && list.head != nullptr) {
    void* block = list.head;
    list.head = list_next(block);
    ++list.room;
    Span* span = g_page_map.lookup(block);
    return_owned_block(cache, cls, span, block);
    if (span->allocated == 0 && cache->partial[cls].length > 1) {
      // All blocks are back: the pages can serve anyone. The last partial
      // span stays, so a list that breathes does not churn the page heap.
      cache->partial[cls].remove(span);
      empty.push(span);
    }
  }
  if (list.head == nullptr) list.room = static_cast<std::int32_t>(list.max_length);
  while (Span* span = empty.pop()) g_page_heap.deallocate(span);
}

namespace {

// Halves every other list's limit, giving their blocks back, until the cache
// fits its byte bound again (TCMalloc's steal, done wholesale).
void make_room(ThreadCache* cache, std::size_t growing_cls) noexcept {
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    FreeList& list = cache->lists[cls];
    if (cls == growing_cls || list.max_length <= 1) continue;
    std::uint32_t new_max = list.max_length / 2;
    cache->capacity_bytes -= std::size_t{list.max_length - new_max} * class_size(cls);
    list.room -= static_cast<std::int32_t>(list.max_length - new_max);
    list.max_length = new_max;
    if (list.length() > new_max) shrink_list(cache, cls, new_max);
  }
}

void grow_limit(ThreadCache* cache, std::size_t cls, std::uint32_t step) noexcept {
  FreeList& list = cache->lists[cls];
  if (list.max_length >= kMaxListLength || g_options.check) return;
  if (list.max_length + step > kMaxListLength) step = kMaxListLength - list.max_length;
  std::size_t delta = std::size_t{step} * class_size(cls);
  if (cache->capacity_bytes + delta > cache->max_bytes) {
    make_room(cache, cls);
    if (cache->capacity_bytes + delta > cache->max_bytes) return;
  }
  list.max_length += step;
  list.room += static_cast<std::int32_t>(step);
  cache->capacity_bytes += delta;
}

// Takes up to `want` blocks of class `cls` from spans the cache owns, adopts
// or creates spans as needed; puts them on the free list.
void refill(ThreadCache* cache, std::size_t cls) noexcept {
  const SizeClassInfo& info = class_info(cls);
  FreeList& list = cache->lists[cls];
  std::uint32_t want = list.max_length < info.batch ? list.max_length : info.batch;
  if (want == 0) want = 1;
  BlockChain chain;
  while (chain.count < want) {
    Span* span = cache->partial[cls].head;
    if (span == nullptr) {
      span = g_central[cls].adopt(cache);
      if (span != nullptr) {
        ++cache->stats.spans_adopted;
        cache->blocks_out[cls] += span->allocated;
      } else {
        span = g_page_heap.allocate(info.span_pages, 1, SpanState::kSmall);
        if (span == nullptr) break;  // out of memory: serve what we have
        init_small_span(span, cls, cache);
        ++cache->stats.spans_new;
      }
      cache->partial[cls].push(span);
    }
    cache->blocks_out[cls] += take_blocks(span, want - chain.count, chain);
    if (!span->has_free_blocks()) {
      cache->partial[cls].remove(span);
      cache->full[cls].push(span);
    }
  }
  if (chain.empty()) return;
  list_set_next(chain.tail, list.head);
  list.head = chain.head;
  list.room -= static_cast<std::int32_t>(chain.count);
  // Slow start (seed 001, TCMalloc): every time a list runs dry its limit
  // grows, by one up to the batch size, then by a batch (up to 8192 blocks
  // and within the thread's byte bound).
  grow_limit(cache, cls, list.max_length < info.batch ? 1 : info.batch);
}

// One block of the inbox. Its page's owner tag says, without touching the
// span, whether we still own the span and which list the block joins (as on
// the free fast path); the sender may have looked before the span changed
// hands.
void receive_block(ThreadCache* cache, void* block) noexcept {
  ++cache->stats.remote_received;
  std::uintptr_t offset = g_page_map.owner_tag(block) ^ reinterpret_cast<std::uintptr_t>(cache);
  if (offset >= 2048) return remote_free(cache, block, g_page_map.lookup(block));
  if (g_options.check) check_small_free(block, g_page_map.lookup(block));  // freed twice by other threads?
  FreeList& list = list_at(cache, offset);
  if (list.room > 0) {
    list_push(list, block, cache->key);
    --list.room;
    return;
  }
  return_owned_block(cache, class_of_offset(offset), g_page_map.lookup(block), block);
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
        // The blocks are cold: ask for a few lines ahead, for writing.
        if (i + 4 < parcel->count) __builtin_prefetch(parcel->blocks[i + 4], 1);
        receive_block(cache, parcel->blocks[i]);
      }
      release_parcel(cache, parcel);
    }
    item = next;
  }
}

// --- slow paths -----------------------------------------------------------------

namespace {
inline void mark_touched(ThreadCache* cache, std::size_t cls) noexcept {
  cache->touched[cls >> 6] |= std::uint64_t{1} << (cls & 63);
}
}  // namespace

void scavenge_if_due(ThreadCache* cache) noexcept {
  std::uint64_t now = monotonic_ns();
  if (now < cache->next_scavenge_ns) return;
  std::uint64_t period = g_options.decay_ms * 1000000ull;
  if (cache->next_scavenge_ns != 0) {
    for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
      bool touched = (cache->touched[cls >> 6] >> (cls & 63)) & 1;
      std::uint32_t length = cache->lists[cls].length();
      if (!touched && length > 0) shrink_list(cache, cls, length / 2);
    }
    flush_outbox(cache);
  }
  cache->touched[0] = cache->touched[1] = 0;
  cache->next_scavenge_ns = now + (period != 0 ? period : 1000000000ull);
}

void housekeeping(ThreadCache* cache) noexcept {
  cache->frees_until_housekeeping = kFreesPerHousekeeping;
  g_page_heap.maybe_decay();
  scavenge_if_due(cache);
}

void flush_thread_cache(ThreadCache* cache) noexcept {
  flush_outbox(cache);
  drain_inbox(cache);
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    shrink_list(cache, cls, 0);
    // shrink_list keeps one empty span per class for a list that breathes;
    // here everything free goes.
    for (Span* span = cache->partial[cls].head; span != nullptr;) {
      Span* next = span->next;
      if (span->allocated == 0) {
        cache->partial[cls].remove(span);
        g_page_heap.deallocate(span);
      }
      span = next;
    }
  }
  flush_outbox(cache);
}

void* allocate_slow(std::size_t cls) noexcept {
  ThreadCache* cache = current_cache();
  if (cache == nullptr) {
    void* block = g_central[cls].allocate_one(cls);
    if (block == nullptr) errno = ENOMEM;
    return block;
  }
  // Checking mode switched on by this very call's initialisation: the
  // request came through the unchecked fast path; serve it checked.
  if (__builtin_expect(g_options.check, 0) && checking()) return checked_allocate(0, class_size(cls));
  ++cache->stats.allocs_slow;
  mark_touched(cache, cls);
  housekeeping(cache);
  if (cache->outbox.pending_bytes != 0) flush_outbox(cache);
  FreeList& list = cache->lists[cls];
  if (list.head == nullptr) drain_inbox(cache);
  if (list.head == nullptr) refill(cache, cls);
  void* block = list.head;
  if (block == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  list.head = list_next(block);
  ++list.room;
  return block;
}

void list_too_long(ThreadCache* cache, std::size_t cls) noexcept {
  mark_touched(cache, cls);
  housekeeping(cache);
  FreeList& list = cache->lists[cls];
  const SizeClassInfo& info = class_info(cls);
  std::uint32_t length = list.length();
  std::uint32_t release = length < info.batch ? length : info.batch;
  shrink_list(cache, cls, length - release);
  if (list.max_length < info.batch) grow_limit(cache, cls, 1);
}

void deallocate_slow(void* block) noexcept {
  if (block == nullptr) return;
  Span* span = g_page_map.lookup(block);
  if (span == nullptr || !span->contains(block))
    return report_bad_free(block, "free of a pointer strata never returned");
  if (span->state != SpanState::kSmall && span->state != SpanState::kLarge)
    return report_bad_free(block, "double free (block of a free span)");
  if (span->state == SpanState::kLarge) {
    if (block != span->start()) return report_bad_free(block, "free of an interior pointer");
    if (span->sample != nullptr) release_sampled(span);  // heap profiling
    return g_page_heap.deallocate(span);
  }
  std::size_t offset = static_cast<std::size_t>(static_cast<char*>(block) -
                                                static_cast<char*>(span->start()));
  if (offset % class_size(span->size_class) != 0)
    return report_bad_free(block, "free of an interior pointer");
  if (g_options.check) checked_release(block, span);
  ThreadCache* cache = current_cache();
  if (cache != nullptr && span->owner.load(std::memory_order_relaxed) == cache) {
    ++cache->stats.frees_slow;
    return push_owned(cache, list_offset(span->size_class), block);
  }
  remote_free(cache, block, span);
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
  cache->frees_until_housekeeping = kFreesPerHousekeeping;
  cache->max_bytes = g_options.thread_cache_bytes;
  cache->capacity_bytes = 0;
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    cache->lists[cls].max_length = g_options.check ? 0 : 1;
    cache->lists[cls].room = static_cast<std::int32_t>(cache->lists[cls].max_length);
    cache->capacity_bytes += cache->lists[cls].max_length * class_size(cls);
  }
  t_live_cache = cache;
  t_cache = g_options.check ? &g_empty_cache : cache;
  drain_inbox(cache);  // a reused cache may have mail for spans now owned elsewhere
  flush_outbox(cache);
  pthread_setspecific(g_exit_key, cache);
  return cache;
}

}  // namespace

ThreadCache* current_cache() noexcept {
  ThreadCache* cache = t_live_cache;
  if (__builtin_expect(cache != nullptr, 1)) return cache == &g_dead_cache ? nullptr : cache;
  return create_cache();
}

void release_thread_cache(ThreadCache* cache) noexcept {
  flush_outbox(cache);
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    shrink_list(cache, cls, 0);
    cache->lists[cls].max_length = 0;
    cache->lists[cls].room = 0;
  }
  cache->capacity_bytes = 0;
  // Mail that arrived so far: with every limit at 0, blocks of our spans go
  // back into their spans, the rest on to their owners.
  drain_inbox(cache);
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    while (Span* s = cache->full[cls].pop()) cache->partial[cls].push(s);
    g_central[cls].abandon(cache->partial[cls]);
    cache->blocks_out[cls] = 0;  // the spans' counts went with them
  }
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
