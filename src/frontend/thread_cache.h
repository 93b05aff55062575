// The thread cache: the top tier. One per thread, reached through an
// initial-exec thread_local pointer; no lock and no atomic read-modify-write
// on the fast paths.
//
// A thread cache *owns* spans, and the free blocks of an owned span live on
// that span's own free list (free-list sharding, as in mimalloc): a free
// pushes the block onto its span's list, whatever the span, so a burst of
// frees touches each block once and never overflows anything. Allocation
// pops the class's *allocation list*: a whole list the slow path took from
// one span (the class's current span) in O(1), or a run it carved from
// never-used memory. Blocks freed by any other thread travel back to the
// owner in parcels through its Inbox (frontend/remote_free.h), and join
// their span's list when the owner drains it.
//
// Fast paths (inline here) and slow paths (thread_cache.cpp) pair up:
//   allocate   -> allocate_slow      (allocation list used up: the current
//                                     span's list, carving, other spans,
//                                     central cache, page heap)
//   deallocate -> deallocate_slow    (not ours: remote, large, invalid)
//              -> span_countdown_hit (the span became empty, or a sleeping
//                                     span collected enough frees to wake)
//   allocate   -> unmarked_free_block (a block on a list without its free
//                                     mark: freed twice, or written after
//                                     free; frontend/misuse.h)
//
// "Not initialised yet" looks like "allocation list empty": a new thread's
// pointer starts at an empty static cache whose lists are empty and which
// owns no span, so both fast paths fall into their slow paths without an
// extra test. A thread gets a cache of its own only once it proves busy;
// until then (a *young* thread) it allocates one block at a time from the
// central cache, which costs a lock per call but no memory per thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/free_list.h"
#include "core/page_map.h"
#include "core/size_classes.h"
#include "core/span.h"
#include "core/span_blocks.h"
#include "frontend/inbox.h"
#include "frontend/outbox.h"
#include "profile/stack_capture.h"

namespace strata::detail {

// The blocks malloc hands out next, for one class: a list of `avail` blocks
// of the class's current span. The fast path tests the head (a static empty
// cache shared by threads without a cache of their own is never written)
// and counts `avail` down so that statistics know what is cached.
struct AllocList {
  void* head = nullptr;
  std::int64_t avail = 0;
};

struct ThreadCacheStats {
  std::uint64_t allocs_slow = 0;       // slow-path allocations
  std::uint64_t frees_slow = 0;
  std::uint64_t remote_frees = 0;      // blocks sent to other owners
  std::uint64_t remote_received = 0;   // blocks received through the inbox
  std::uint64_t batches_sent = 0;
  std::uint64_t spans_adopted = 0;
  std::uint64_t spans_new = 0;
  std::uint64_t lists_taken = 0;       // allocation lists taken from spans in O(1)
  std::uint64_t parked_bytes = 0;      // pages of partly used spans given back
};

// 4096-aligned, the first OS page holding what every thread touches (the
// fast paths' lists, the outbox, the inbox), the later pages what only a
// thread owning spans touches.
class alignas(4096) ThreadCache {
 public:
  // --- page 1: hot ---------------------------------------------------------
  std::uintptr_t key = 0;  // == g_list_key, kept here to save a load per op
  std::uintptr_t unused_ = 0;
  AllocList lists[kNumClasses];
  Outbox outbox;
  Parcel* spare_parcels = nullptr;  // drained parcels kept for our own next batches
  std::uint32_t spare_parcel_count = 0;
  enum class Life : std::uint8_t { kStatic, kAlive, kDead } life = Life::kStatic;
  std::int32_t slow_until_housekeeping = 0;  // allocation slow paths until the next visit
  ThreadCacheStats stats;
  Inbox inbox;

  // --- later pages: the spans this cache owns ------------------------------
  Span* current[kNumClasses] = {};  // the span the allocation list comes from
  SpanList partial[kNumClasses];    // owned awake spans with free blocks (empty ones at the back)
  SpanList sleeping;                // owned spans asleep since they were full, all classes
  // Empty spans kept for reuse: up to kBurstKeptFactor * max_kept_bytes
  // (STRATA_THREAD_CACHE_BYTES) while a burst lasts, at most max_kept_bytes
  // of them once idle for a decay period (release_idle_surplus).
  std::size_t kept_empty_bytes = 0;
  std::size_t max_kept_bytes = 0;
  std::uint64_t next_scavenge_ns = 0;
  std::uint64_t next_surplus_check_ns = 0;
  std::uint32_t scavenge_epoch = 0;  // 1 + scavenges so far (set at creation: the static caches stay in .bss)
  std::uint32_t spans_taken = 0;     // from the page heap or the central cache since this thread began
  std::uint8_t paged_requests[kNumClasses] = {};  // blocks over 2 KiB served as spans of their own, per class
  std::uint64_t sample_pending[2] = {0, 0};  // bit per class: its list runs dry at a sampled allocation
  ThreadCache* registry_next = nullptr;  // every cache ever made
  ThreadCache* dead_next = nullptr;      // caches of exited threads, for reuse
};

// How many times STRATA_THREAD_CACHE_BYTES of empty spans a thread may keep
// during a burst (64 MiB by default): a program that frees tens of
// megabytes and then allocates them again reuses its spans without a visit
// to the page heap for each.
constexpr std::size_t kBurstKeptFactor = 16;

// Sizes below this take the inline malloc path (api/allocator.h): 0 until
// the process is set up and in checking mode (every malloc then reaches the
// general path, which sets up and checks), 1025 otherwise. A variable limit
// costs the same one compare as a constant one.
extern STRATA_INTERNAL std::size_t g_fast_size_limit;

// The calling thread's cache (or the empty/dead static cache).
extern constinit thread_local ThreadCache* t_cache __attribute__((tls_model("initial-exec")));

// `size` and `alignment` are the program's request, `site` where it called
// the allocator: heap profiling records them when this allocation is the
// sampled one.
void* allocate_slow(std::size_t cls, std::size_t size, CallSite site, std::size_t alignment = 0) noexcept;
// The same, reached by a tail jump from an entry point's inline fast path:
// it takes the call site itself (its return address is then the program's),
// so that the fast path spends nothing on it (reading the return address
// there makes GCC give malloc a stack frame: two instructions).
void* allocate_slow_from_entry(std::size_t cls, std::size_t size) noexcept;
void deallocate_slow(void* block) noexcept;
void span_countdown_hit(ThreadCache* cache, Span* span) noexcept;
[[noreturn]] void unmarked_free_block(void* block) noexcept;

// Byte offset of class `cls`'s allocation list inside a ThreadCache, and back.
inline constexpr std::uintptr_t kListsOffset = 16;
inline constexpr std::uintptr_t list_offset(std::size_t cls) noexcept {
  return kListsOffset + cls * sizeof(AllocList);
}
inline constexpr std::size_t class_of_offset(std::uintptr_t offset) noexcept {
  return (offset - kListsOffset) / sizeof(AllocList);
}

inline AllocList& list_at(ThreadCache* cache, std::uintptr_t offset) noexcept {
  return *reinterpret_cast<AllocList*>(reinterpret_cast<char*>(cache) + offset);
}

// Hands out the head of a non-empty allocation list.
inline void* pop_block(ThreadCache* cache, AllocList& list, void* block) noexcept {
  std::uintptr_t key = cache->key;
  if (__builtin_expect(!take_free_mark(block, key), 0)) unmarked_free_block(block);
  list.head = reinterpret_cast<void*>(encode_link(static_cast<FreeBlock*>(block)->encoded_next, key));
  --list.avail;
  return block;
}

// The head of the calling thread's allocation list at `offset` =
// list_offset(class), taken; nullptr when the list is empty.
inline void* take_listed_block(std::uintptr_t offset) noexcept {
  ThreadCache* cache = t_cache;
  AllocList& list = list_at(cache, offset);
  void* block = list.head;
  if (__builtin_expect(block == nullptr, 0)) return nullptr;
  return pop_block(cache, list, block);
}

// Fast path of every small malloc; `size` is the request (only the slow
// path looks at it, and at the call site, which is evaluated there: in
// malloc, the program's).
inline void* allocate_at(std::size_t size, std::uintptr_t offset) noexcept {
  void* block = take_listed_block(offset);
  if (__builtin_expect(block == nullptr, 0)) return allocate_slow_from_entry(class_of_offset(offset), size);
  return block;
}

// The same for callers that already hold the call site (and maybe ask for
// an alignment the class has).
inline void* allocate_at(std::size_t size, std::uintptr_t offset, CallSite site, std::size_t alignment = 0) noexcept {
  void* block = take_listed_block(offset);
  if (__builtin_expect(block == nullptr, 0)) return allocate_slow(class_of_offset(offset), size, site, alignment);
  return block;
}

// Pushes a block of a span `cache` owns onto the span's list.
inline void free_owned(ThreadCache* cache, Span* span, void* block) noexcept {
  if (__builtin_expect(push_block(span, block, cache->key), 0)) span_countdown_hit(cache, span);
}

// Fast path of every free: a block of a span this thread owns. The page's
// owner tag is the owning cache's address: anything else (another owner, no
// owner, a large or free span, a pointer strata never returned, NULL) takes
// the slow path.
inline void deallocate(void* block) noexcept {
  ThreadCache* cache = t_cache;
  // Plain loads (so that the compare takes its operand from memory): the
  // entry of a block this thread owns was written by this thread or before
  // the block was handed to it.
  PageMap::EntryRef entry = g_page_map.entry_ref(block);
  if (__builtin_expect(entry.owner_tag() != reinterpret_cast<std::uintptr_t>(cache), 0)) return deallocate_slow(block);
  free_owned(cache, entry.span(), block);
}

// The calling thread's live cache, created on first use; nullptr for a
// thread past its exit (its TLS destructor ran), for a young thread (when
// `create` is false) or when the OS refuses memory.
ThreadCache* current_cache(bool create = true) noexcept;

// Gives everything a cache holds back: allocation lists to their spans,
// owned spans to the central cache, the outbox to its destinations (thread
// exit).
void release_thread_cache(ThreadCache* cache) noexcept;

// Gives back what the calling thread can: allocation lists to their spans,
// empty spans to the page heap, unused pages of its partly used spans to
// the OS, the outbox to its destinations (strata_release_free_memory).
std::size_t flush_thread_cache(ThreadCache* cache) noexcept;

// Every slow path: the page heap's decay when due, then the thread's own
// scavenging when a decay period has passed.
void housekeeping(ThreadCache* cache) noexcept;

// Sends the outbox's batches now.
void flush_outbox(ThreadCache* cache) noexcept;

// Drains the inbox: blocks of our spans join their spans' lists (blocks of
// spans we no longer own are sent on).
void drain_inbox(ThreadCache* cache) noexcept;

// Bytes mapped for ThreadCache objects.
std::size_t thread_cache_metadata_bytes() noexcept;

// Visits every registered cache (statistics), with the registry lock held.
void visit_caches(void (*visit)(ThreadCache*, void*), void* context) noexcept;

// Process-wide setup (secret key, thread exit hook, fork handlers).
void ensure_initialized() noexcept;
bool initialized() noexcept;

// Fork support.
void fork_prepare() noexcept;
void fork_parent() noexcept;
void fork_child() noexcept;

}  // namespace strata::detail
