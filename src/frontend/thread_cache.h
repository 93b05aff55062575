// The thread cache: the top tier. One per thread, reached through an
// initial-exec thread_local pointer; a free list per size class; no lock and
// no atomic read-modify-write on the fast path.
//
// A thread cache also *owns* spans: the spans it carved its blocks from.
// Blocks of an owned span, freed by the owning thread, go straight onto its
// free list (the fast path below). Blocks freed by any other thread travel
// back to the owner in batches through its Inbox (frontend/remote_free.h).
// So a free list only ever holds blocks of spans its thread owns, and only
// the owner ever touches an owned span's free list and counts.
//
// Fast paths (inline here) and slow paths (thread_cache.cpp) pair up:
//   allocate          -> allocate_slow   (list empty: inbox, owned spans,
//                                         central cache, page heap)
//   deallocate        -> deallocate_slow (not ours: remote, large, invalid)
//                     -> list_too_long   (over the list's length limit)
//
// "Not initialised yet" looks like "cache empty": a new thread's pointer
// starts at an empty static cache whose lists are empty and which owns no
// span, so both fast paths fall into their slow paths without an extra test.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/free_list.h"
#include "core/page_map.h"
#include "core/size_classes.h"
#include "core/span.h"
#include "frontend/inbox.h"
#include "frontend/outbox.h"

namespace strata::detail {

struct FreeList {
  void* head = nullptr;
  std::uint32_t length = 0;
  std::uint32_t max_length = 0;  // slow start: grows on refills (seed 001)
};

struct ThreadCacheStats {
  std::uint64_t allocs_slow = 0;       // slow-path allocations
  std::uint64_t frees_slow = 0;
  std::uint64_t remote_frees = 0;      // blocks sent to other owners
  std::uint64_t remote_received = 0;   // blocks received through the inbox
  std::uint64_t batches_sent = 0;
  std::uint64_t spans_adopted = 0;
  std::uint64_t spans_new = 0;
};

class alignas(64) ThreadCache {
 public:
  // --- hot: the free lists, first in the object ----------------------------
  FreeList lists[kNumClasses];

  // --- cold ----------------------------------------------------------------
  SpanList partial[kNumClasses];  // owned spans with free blocks
  SpanList full[kNumClasses];     // owned spans without
  Outbox outbox;
  std::size_t capacity_bytes = 0;  // sum of max_length * size over classes
  std::size_t max_bytes = 0;
  ThreadCacheStats stats;
  ThreadCache* registry_next = nullptr;
  enum class Life : std::uint8_t { kStatic, kAlive, kDead } life = Life::kStatic;
  Inbox inbox;
};

// The calling thread's cache (or the empty/dead static cache).
extern thread_local ThreadCache* t_cache;

void* allocate_slow(std::size_t cls) noexcept;
void deallocate_slow(void* block, Span* span) noexcept;
void list_too_long(ThreadCache* cache, std::size_t cls) noexcept;

// Fast path of every small malloc.
inline void* allocate_small(std::size_t cls) noexcept {
  FreeList& list = t_cache->lists[cls];
  void* block = list.head;
  if (__builtin_expect(block == nullptr, 0)) return allocate_slow(cls);
  list.head = list_next(block);
  --list.length;
  return block;
}

// Fast path of every free: a block of a span this thread owns.
inline void deallocate(void* block) noexcept {
  Span* span = g_page_map.lookup(block);
  ThreadCache* cache = t_cache;
  if (__builtin_expect(span == nullptr || span->owner.load(std::memory_order_relaxed) != cache, 0))
    return deallocate_slow(block, span);
  FreeList& list = cache->lists[span->size_class];
  list_set_next(block, list.head);
  list.head = block;
  if (__builtin_expect(++list.length > list.max_length, 0)) list_too_long(cache, span->size_class);
}

// The calling thread's live cache, created on first use; nullptr for a
// thread past its exit (its TLS destructor ran) or when the OS refuses memory.
ThreadCache* current_cache() noexcept;

// Gives everything a cache holds back: cached blocks to their spans, owned
// spans to the central cache, the outbox to its destinations (thread exit).
void release_thread_cache(ThreadCache* cache) noexcept;

// Returns the cached blocks of one class beyond `keep` to their spans.
void shrink_list(ThreadCache* cache, std::size_t cls, std::uint32_t keep) noexcept;

// Sends the outbox's batches now.
void flush_outbox(ThreadCache* cache) noexcept;

// Drains the inbox into the free lists.
void drain_inbox(ThreadCache* cache) noexcept;

// Visits every registered cache (statistics), with the registry lock held.
void visit_caches(void (*visit)(ThreadCache*, void*), void* context) noexcept;

// Process-wide setup (secret key, thread exit hook, fork handlers).
void ensure_initialized() noexcept;

// Fork support.
void fork_prepare() noexcept;
void fork_parent() noexcept;
void fork_child() noexcept;

}  // namespace strata::detail
