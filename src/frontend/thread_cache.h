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

// The fast paths touch only `head` and `room` (= max_length - length), so a
// free tests its limit with one decrement and a sign check.
struct FreeList {
  void* head = nullptr;
  std::int32_t room = 0;         // max_length - length; negative: over the limit
  std::uint32_t max_length = 0;  // slow start: grows on refills (seed 001)

  std::uint32_t length() const noexcept {
    return static_cast<std::uint32_t>(static_cast<std::int64_t>(max_length) - room);
  }
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

// 2048-aligned: the low 11 bits of its address carry a list's byte offset
// in page map owner tags (core/page_map.h), so the free fast path gets its
// list's address from the tag with one XOR.
class alignas(2048) ThreadCache {
 public:
  // --- hot: the list key and the free lists, first in the object -----------
  std::uintptr_t key = 0;  // == g_list_key, kept here to save a load per op
  // Frees until the next housekeeping visit (decay of free pages, idle list
  // scavenging): a program that only ever hits the fast paths still returns
  // memory on time. Two instructions per free; one clock read per 256 frees.
  std::int32_t frees_until_housekeeping = 0;
  std::int32_t unused_ = 0;
  FreeList lists[kNumClasses];

  // --- cold ----------------------------------------------------------------
  SpanList partial[kNumClasses];  // owned spans with free blocks
  SpanList full[kNumClasses];     // owned spans without
  Outbox outbox;
  Parcel* spare_parcels = nullptr;  // drained parcels kept for our own next batches
  std::uint32_t spare_parcel_count = 0;
  std::size_t capacity_bytes = 0;  // sum of max_length * size over classes
  std::size_t max_bytes = 0;
  // Idle scavenging: lists with no slow path in a whole decay period give
  // half their blocks back (a list the fast path alone keeps busy refills
  // once; an idle one empties in a few periods).
  std::uint64_t touched[2] = {0, 0};  // bit per class: a slow path this period
  std::uint64_t next_scavenge_ns = 0;
  ThreadCacheStats stats;
  // Blocks out of the spans this cache owns, per class (in use by the
  // program, in this cache's lists, or travelling back). Owner-written;
  // statistics read them with relaxed atomic loads.
  std::uint64_t blocks_out[kNumClasses] = {};
  ThreadCache* registry_next = nullptr;  // every cache ever made
  ThreadCache* dead_next = nullptr;      // caches of exited threads, for reuse
  enum class Life : std::uint8_t { kStatic, kAlive, kDead } life = Life::kStatic;
  Inbox inbox;
};

// The calling thread's cache (or the empty/dead static cache).
extern constinit thread_local ThreadCache* t_cache __attribute__((tls_model("initial-exec")));

void* allocate_slow(std::size_t cls) noexcept;
void deallocate_slow(void* block) noexcept;
void list_too_long(ThreadCache* cache, std::size_t cls) noexcept;
// Every slow path, and every 256th fast free: the page heap's decay when
// due, then idle-list scavenging when due.
void housekeeping(ThreadCache* cache) noexcept;

// Byte offset of class `cls`'s free list inside a ThreadCache, and back.
inline constexpr std::uintptr_t kListsOffset = 16;
inline constexpr std::uintptr_t list_offset(std::size_t cls) noexcept {
  return kListsOffset + cls * sizeof(FreeList);
}
inline constexpr std::size_t class_of_offset(std::uintptr_t offset) noexcept {
  return (offset - kListsOffset) / sizeof(FreeList);
}
static_assert(list_offset(kNumClasses) <= 2048, "list offsets must fit below the cache alignment");

inline FreeList& list_at(ThreadCache* cache, std::uintptr_t offset) noexcept {
  return *reinterpret_cast<FreeList*>(reinterpret_cast<char*>(cache) + offset);
}

// Fast path of every small malloc; `offset` = list_offset(class).
inline void* allocate_at(std::uintptr_t offset) noexcept {
  ThreadCache* cache = t_cache;
  FreeList& list = list_at(cache, offset);
  void* block = list.head;
  if (__builtin_expect(block == nullptr, 0)) return allocate_slow(class_of_offset(offset));
  list.head = reinterpret_cast<void*>(encode_link(static_cast<FreeBlock*>(block)->encoded_next, cache->key));
  ++list.room;
  return block;
}

inline void* allocate_small(std::size_t cls) noexcept { return allocate_at(list_offset(cls)); }

// Links `block` in as the list's head (`key`: the cache's copy of g_list_key).
inline void list_push(FreeList& list, void* block, std::uintptr_t key) noexcept {
  static_cast<FreeBlock*>(block)->encoded_next = encode_link(reinterpret_cast<std::uintptr_t>(list.head), key);
  list.head = block;
}

// Pushes a block of a span `cache` owns on the list at `offset`; the list's
// limit and the housekeeping countdown send it to the slow paths.
inline void push_owned(ThreadCache* cache, std::uintptr_t offset, void* block) noexcept {
  FreeList& list = list_at(cache, offset);
  list_push(list, block, cache->key);
  if (__builtin_expect(--list.room < 0, 0)) return list_too_long(cache, class_of_offset(offset));
  if (__builtin_expect(--cache->frees_until_housekeeping < 0, 0)) housekeeping(cache);
}

// Fast path of every free: a block of a span this thread owns. The page's
// owner tag is (owning cache | list offset): XOR with our cache leaves the
// offset when we own the span, and a value >= 2048 otherwise (another owner,
// a large or free span, a pointer strata never returned, NULL).
inline void deallocate(void* block) noexcept {
  ThreadCache* cache = t_cache;
  std::uintptr_t offset = g_page_map.owner_tag(block) ^ reinterpret_cast<std::uintptr_t>(cache);
  if (__builtin_expect(offset >= 2048, 0)) return deallocate_slow(block);
  push_owned(cache, offset, block);
}

// The owner tag of pages of a span `owner` owns (0 when no thread owns it).
inline std::uintptr_t owner_tag_for(ThreadCache* owner, std::size_t cls) noexcept {
  return owner == nullptr ? 0 : reinterpret_cast<std::uintptr_t>(owner) | list_offset(cls);
}

// The calling thread's live cache, created on first use; nullptr for a
// thread past its exit (its TLS destructor ran) or when the OS refuses memory.
ThreadCache* current_cache() noexcept;

// Gives everything a cache holds back: cached blocks to their spans, owned
// spans to the central cache, the outbox to its destinations (thread exit).
void release_thread_cache(ThreadCache* cache) noexcept;

// Returns the cached blocks of one class beyond `keep` to their spans.
void shrink_list(ThreadCache* cache, std::size_t cls, std::uint32_t keep) noexcept;

// Gives back half of every list idle for a decay period.
void scavenge_if_due(ThreadCache* cache) noexcept;

// Empties the calling thread's lists and outbox (strata_release_free_memory).
void flush_thread_cache(ThreadCache* cache) noexcept;

// Sends the outbox's batches now.
void flush_outbox(ThreadCache* cache) noexcept;

// Drains the inbox into the free lists (blocks of spans we no longer own
// are sent on).
void drain_inbox(ThreadCache* cache) noexcept;

// Bytes mapped for ThreadCache objects.
std::size_t thread_cache_metadata_bytes() noexcept;

// Visits every registered cache (statistics), with the registry lock held.
void visit_caches(void (*visit)(ThreadCache*, void*), void* context) noexcept;

// Process-wide setup (secret key, thread exit hook, fork handlers).
void ensure_initialized() noexcept;

// Fork support.
void fork_prepare() noexcept;
void fork_parent() noexcept;
void fork_child() noexcept;

}  // namespace strata::detail
