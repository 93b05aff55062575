// The thread cache: the top tier. One per thread, reached through an
// initial-exec thread_local pointer; no lock and no atomic read-modify-write
// on the fast paths.
//
// A thread cache *owns* spans, and the free blocks of an owned span are bits
// in that span (free-list sharding, as in mimalloc, with the lists kept as
// bitmaps outside the blocks, as in jemalloc's slabs): a free sets the
// block's bit in its span, whatever the span, so a burst of frees never
// overflows anything and never touches a block. Allocation takes the next
// bit of the class's *allocation word*: a word of free bits the slow path
// took from one span (the class's current span) in O(1). Blocks freed by
// any other thread travel back to the owner in parcels through its Inbox
// (frontend/remote_free.h), and set their bits when the owner drains it.
//
// Fast paths (inline here) and slow paths (thread_cache.cpp) pair up:
//   allocate   -> allocate_slow      (allocation word used up: a listing
//                                     class's recent block, the current
//                                     span's next word, other spans,
//                                     central cache, page heap)
//   deallocate -> free_to_recent_list (ours, of a listing class:
//                                     frontend/recent_blocks.h)
//              -> deallocate_slow    (not ours: remote, large, invalid)
//              -> span_countdown_hit (the span became empty, or a sleeping
//                                     span collected enough frees to wake)
//              -> block_freed_twice  (its bit was set already)
//
// "Not initialised yet" looks like "allocation word empty": a new thread's
// pointer starts at an empty static cache whose words are empty and which
// owns no span, so both fast paths fall into their slow paths without an
// extra test. A thread gets a cache of its own only once it proves busy;
// until then (a *young* thread) it allocates one block at a time from the
// central cache, which costs a lock per call but no memory per thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/hot_settings.h"
#include "core/ownership.h"
#include "core/page_map.h"
#include "core/size_classes.h"
#include "core/span.h"
#include "core/span_blocks.h"
#include "frontend/inbox.h"
#include "frontend/outbox.h"
#include "profile/stack_capture.h"

namespace strata::detail {

// The blocks malloc hands out next, for one class: free bits taken from one
// word of the class's current span, block i at `base + i * size`. The fast
// path takes the lowest bit (a static empty cache shared by threads without
// a cache of their own is never written); the word's blocks are in address
// order, so a run of mallocs walks up through the span.
struct AllocWord {
  std::uint64_t bits = 0;
  std::uintptr_t base = 0;
  std::uint64_t size = 0;        // the class's block size (set when the cache is made)
  std::uint32_t span_word = 0;   // which word of the current span the bits came from
  std::uint32_t unused_ = 0;     // 32 bytes: the slow path finds the class with a shift
};
static_assert(sizeof(AllocWord) == 32, "class_of_offset shifts by 5");
static_assert(kNumClasses <= 64, "ThreadCache::long_wanted has a bit per class");

// A class's recently freed blocks, newest first, threaded through the
// blocks (frontend/recent_blocks.h): used only while the class is *listing*
// (ThreadCache::listing), and empty otherwise.
struct RecentList {
  void* head = nullptr;
  std::uint32_t count = 0;
  std::uint32_t fills = 0;  // times the list reached its limit in the thread's current window
  std::uint64_t multiple_test = 0;  // the class's (is_block_start), on the line the free writes
  // The class's bit of ThreadCache::sample_pending, on the line
  // take_recent reads (and the size of an AllocWord: a word's offset finds
  // its list too).
  std::uint64_t sample_pending = 0;
};
static_assert(sizeof(RecentList) == sizeof(AllocWord), "recent_at indexes lists by word offset");

struct ThreadCacheStats {
  std::uint64_t frees_slow = 0;
  std::uint64_t remote_frees = 0;      // blocks sent to other owners
  std::uint64_t remote_received = 0;   // blocks received through the inbox
  std::uint64_t batches_sent = 0;
  std::uint64_t spans_adopted = 0;
  std::uint64_t spans_new = 0;
  std::uint64_t words_taken = 0;       // allocation words taken from spans in O(1)
  std::uint64_t parked_bytes = 0;      // pages of partly used spans given back
};

// 4096-aligned, the first OS page holding what every thread touches (the
// fast paths' allocation words, the outbox, the inbox), the later pages what only a
// thread owning spans touches.
class alignas(4096) ThreadCache {
 public:
  // --- page 1: hot ---------------------------------------------------------
  // Puts every allocation word's fast-path fields at 8-31 mod 32 of a page
  // (kWordsOffset): never where a block whose size is a multiple of 32
  // starts.
  std::uint64_t word_pad = 0;
  AllocWord words[kNumClasses];
  Outbox outbox;
  Parcel* spare_parcels = nullptr;  // drained parcels kept for our own next batches
  std::uint32_t spare_parcel_count = 0;
  enum class Life : std::uint8_t { kStatic, kAlive, kDead } life = Life::kStatic;
  std::int32_t slow_until_housekeeping = 0;  // allocation slow paths until the next visit
  ThreadCacheStats stats;
  Inbox inbox;

  // --- later pages: the spans this cache owns ------------------------------
  Span* current[kNumClasses] = {};  // the span the allocation word comes from
  SpanList partial[kNumClasses];    // owned awake spans with free blocks (empty ones at the back)
  SpanList sleeping[kNumClasses];   // owned spans asleep since they were nearly full (oldest at the back)
  // Empty spans kept for reuse: up to kBurstKeptFactor * max_kept_bytes
  // (STRATA_THREAD_CACHE_BYTES) while a burst lasts, at most max_kept_bytes
  // of them once idle for a decay period (release_idle_surplus).
  std::uint32_t spans_taken = 0;     // from the page heap or the central cache since this thread began
  // Pages the page heap set aside for this thread's new spans when it grew
  // for them (PageHeap::allocate_small): given back at every scavenge, at
  // exit and on strata_release_free_memory.
  Span* runway = nullptr;
  std::size_t kept_empty_bytes = 0;
  std::size_t max_kept_bytes = 0;
  std::uint64_t next_scavenge_ns = 0;
  std::uint64_t next_surplus_check_ns = 0;
  std::uint32_t scavenge_epoch = 0;  // 1 + scavenges so far (set at creation: the static caches stay in .bss)
  std::uint8_t paged_requests[kNumClasses] = {};  // blocks over 2 KiB served as spans of their own, per class
  std::uint16_t owned_spans[kNumClasses] = {};    // spans of the class this cache owns now (picks short or long spans)
  std::uint64_t long_wanted = 0;  // bit per class: its spans are long (a short one emptied while the thread held several)
  std::uint64_t sample_pending[2] = {0, 0};  // bit per class: its word runs dry at a sampled allocation
  // Listing (frontend/recent_blocks.h): the classes whose spans' pages
  // carry listing tags (the thread's frees of their blocks go to
  // free_to_recent_list), those of them that list now (such a free pushes
  // the block onto recent[cls]; the others set its bit: a burst turned the
  // class back), whether the thread lists, and what decides it.
  std::uint64_t tagged = 0;
  std::uint64_t listing = 0;
  RecentList recent[kNumClasses];
  bool lists = false;
  std::uint32_t window = 0;  // words taken in the window << 16 | their blocks
  ThreadCache* registry_next = nullptr;  // every cache ever made
  ThreadCache* dead_next = nullptr;      // caches of exited threads, for reuse
};

// How many times STRATA_THREAD_CACHE_BYTES of empty spans a thread may keep
// during a burst (64 MiB by default): a program that frees tens of
// megabytes and then allocates them again reuses its spans without a visit
// to the page heap for each.
constexpr std::size_t kBurstKeptFactor = 16;

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
// Its arguments come in the order the fast path holds them in (the size in
// the first argument register already): no moves before the jump.
void* allocate_slow_from_entry(std::size_t size, std::uintptr_t offset) noexcept;
// The same for callers that hold the call site already (operator new's slow
// half, the aligned and realloc paths): the current span's next word first,
// as malloc's slow entry does, then allocate_slow.
void* allocate_slow_taking_word(std::size_t cls, std::size_t size, CallSite site, std::size_t alignment) noexcept;
// `entry` is the page map entry of the block's page, which the fast path
// has read already (passed in two registers: no second lookup).
void deallocate_slow(void* block, PageMap::EntryRef entry, ThreadCache* cache) noexcept;
// A block of a listing class of ours, `cls`: onto the class's recent list
// (frontend/recent_blocks.h). Its arguments in the registers the fast path
// holds them in.
void free_to_recent_list(void* block, PageMap::EntryRef entry, ThreadCache* cache, std::uintptr_t cls) noexcept;
void span_countdown_hit(ThreadCache* cache, Span* span) noexcept;

// Byte offset of class `cls`'s allocation word inside a ThreadCache, and back.
// 8, not 0, because of 4K aliasing: a load whose address bits 0-11 match a
// store still in flight waits for that store, as if it read its data. The
// cache is page-aligned and so are spans; at offset 0 the 1 KiB class's word
// sat at 1,024, where every fourth 1 KiB block starts, and a program that
// writes a block's first word and then mallocs again stalled on one malloc in
// four (longest when that store misses the cache: bursts of 1,600-6,400 such
// blocks ran 0.81-0.91x the time once it moved; docs/design.md, *2026-12-07
// (session 22)*). At 8 mod 32, no block whose size is a multiple of 32 starts
// inside the fields the fast path loads (bits, base, size); a program's
// first write to a block is most often there.
inline constexpr std::uintptr_t kWordsOffset = 8;
inline constexpr std::uintptr_t word_offset(std::size_t cls) noexcept {
  return kWordsOffset + cls * sizeof(AllocWord);
}
static_assert(kWordsOffset < sizeof(AllocWord), "class_of_offset rounds the offset down");
inline constexpr std::size_t class_of_offset(std::uintptr_t offset) noexcept {
  return offset / sizeof(AllocWord);  // a shift: 32-byte words
}

inline AllocWord& word_at(ThreadCache* cache, std::uintptr_t offset) noexcept {
  return *reinterpret_cast<AllocWord*>(reinterpret_cast<char*>(cache) + offset);
}

// Finds and clears the lowest set bit of `bits`: false when there is none.
// On x86-64 `bsf` finds the bit and its zero flag is the empty test, `btr`
// clears it: 3 instructions, the branch included.
inline bool take_lowest_bit(std::uint64_t& bits, std::uint64_t& index) noexcept {
#if defined(__x86_64__)
  asm goto("bsfq %[bits], %[index]\n\tje %l[empty]" : [index] "=r"(index) : [bits] "r"(bits) : "cc" : empty);
  asm("btrq %[index], %[bits]" : [bits] "+r"(bits) : [index] "r"(index) : "cc");
  return true;
empty:
  return false;
#else
  if (bits == 0) return false;
  index = static_cast<std::uint64_t>(__builtin_ctzll(bits));
  bits &= bits - 1;
  return true;
#endif
}

// The lowest block of an allocation word whose bits are `bits`, taken;
// nullptr when the word is empty.
inline void* take_lowest_block(AllocWord& word, std::uint64_t bits) noexcept {
  std::uint64_t index;
  if (__builtin_expect(!take_lowest_bit(bits, index), 0)) return nullptr;
  word.bits = bits;
  return reinterpret_cast<void*>(word.base + index * word.size);
}

// The next block of the calling thread's allocation word at `offset` =
// word_offset(class), taken; nullptr when the word is empty.
inline void* take_word_block(std::uintptr_t offset) noexcept {
  AllocWord& word = word_at(t_cache, offset);
  return take_lowest_block(word, word.bits);
}

// Fast path of every small malloc; `size` is the request (only the slow
// path looks at it, and at the call site, which is evaluated there: in
// malloc, the program's). `slow` is where an empty word jumps to, with the
// size and the offset in the registers they came in: malloc's slow entry,
// or operator new's (which throws where malloc returns null).
template <auto slow = allocate_slow_from_entry>
inline void* allocate_at(std::size_t size, std::uintptr_t offset) noexcept(noexcept(slow(size, offset))) {
  // The word's fields addressed as cache + offset + field, so that each
  // access folds the offset into its address (no add to form the pointer).
  char* cache = reinterpret_cast<char*>(t_cache);
  auto field = [&cache, offset](std::size_t at) -> std::uint64_t& {
    return *reinterpret_cast<std::uint64_t*>(cache + offset + at);
  };
  std::uint64_t bits = field(offsetof(AllocWord, bits));
  std::uint64_t index;
  if (__builtin_expect(!take_lowest_bit(bits, index), 0)) return slow(size, offset);
  asm("" : "+r"(cache));  // keeps GCC from forming cache + offset once in a register
  field(offsetof(AllocWord, bits)) = bits;
  return reinterpret_cast<void*>(field(offsetof(AllocWord, base)) + index * field(offsetof(AllocWord, size)));
}

// The same for callers that already hold the call site (and maybe ask for
// an alignment the class has).
inline void* allocate_at(std::size_t size, std::uintptr_t offset, CallSite site, std::size_t alignment = 0) noexcept {
  void* block = take_word_block(offset);
  if (__builtin_expect(block == nullptr, 0)) return allocate_slow_taking_word(class_of_offset(offset), size, site, alignment);
  return block;
}

// Gives a block of a span `cache` owns back to the span (its bit). The
// slow paths leave by jumps: no stack frame on the fast path.
inline void free_owned(ThreadCache* cache, Span* span, void* block) noexcept {
  if (__builtin_expect(set_free_bit(span, block), 0) && STRATA_CHECK_DOUBLE_FREE) return block_freed_twice(block);
  if (__builtin_expect(count_block_back(span->countdown), 0)) return span_countdown_hit(cache, span);
}

// Fast path of every free: a block of a span this thread owns. The page's
// owner tag is the owning cache's address: anything else (another owner, no
// owner, a large or free span, a pointer strata never returned, NULL) takes
// the slow path.
inline void deallocate_at(PageMap::EntryRef entry, ThreadCache* cache, void* block) noexcept {
  // Plain loads (so that the compare takes its operand from memory): the
  // entry of a block this thread owns was written by this thread or before
  // the block was handed to it.
  if (__builtin_expect(entry.owner_tag() != reinterpret_cast<std::uintptr_t>(cache), 0)) {
    // Ours still if the tag is our address plus a class: a listing class
    // (frontend/recent_blocks.h). The tag is read again, through a copy of
    // the entry the compiler cannot see through: the compare above then
    // takes it from memory, one instruction less on the bit path.
    PageMap::EntryRef again = entry;
    asm("" : "+r"(again.leaf));
    const std::uintptr_t cls = again.owner_tag() - reinterpret_cast<std::uintptr_t>(cache);
    if (__builtin_expect(cls - 1 < kTagClassBits, 1)) return free_to_recent_list(block, entry, cache, cls);
    return deallocate_slow(block, entry, cache);
  }
  free_owned(cache, entry.span(), block);
}

// The same through the radix page map (core/page_map.h: when the OS refused
// the flat one's reservation), out of line.
void deallocate_radix(void* block) noexcept;

// free's entry: the block's page map entry read from the flat arrays (its
// address from the block's alone), then deallocate_at.
inline void deallocate(void* block) noexcept {
  const char* flat = g_page_map.flat_base();
  if (__builtin_expect(flat == nullptr, 0)) return deallocate_radix(block);
  deallocate_at(PageMap::flat_entry_ref(flat, block), t_cache, block);
}

// The calling thread's live cache, created on first use; nullptr for a
// thread past its exit (its TLS destructor ran), for a young thread (when
// `create` is false) or when the OS refuses memory.
ThreadCache* current_cache(bool create = true) noexcept;

// Gives everything a cache holds back: allocation words to their spans,
// owned spans to the central cache, the outbox to its destinations (thread
// exit).
void release_thread_cache(ThreadCache* cache) noexcept;

// Gives back what the calling thread can: allocation words to their spans,
// empty spans to the page heap, unused pages of its partly used spans to
// the OS, the outbox to its destinations (strata_release_free_memory).
std::size_t flush_thread_cache(ThreadCache* cache) noexcept;

// Every slow path: the page heap's decay when due, then the thread's own
// scavenging when a decay period has passed.
void housekeeping(ThreadCache* cache) noexcept;

// Sends the outbox's batches now.
void flush_outbox(ThreadCache* cache) noexcept;

// Drains the inbox: blocks of our spans set their bits (blocks of
// spans we no longer own are sent on).
void drain_inbox(ThreadCache* cache) noexcept;

// Bytes mapped for ThreadCache objects.
std::size_t thread_cache_metadata_bytes() noexcept;

// Visits every registered cache (statistics), with the registry lock held.
void visit_caches(void (*visit)(ThreadCache*, void*), void* context) noexcept;

// Process-wide setup (secret key, thread exit hook; the fork handlers once
// the process has a second thread).
void ensure_initialized() noexcept;
bool initialized() noexcept;

// Fork support: the handlers, and whether they are registered yet.
bool fork_handlers_registered() noexcept;
void fork_prepare() noexcept;
void fork_parent() noexcept;
void fork_child() noexcept;

}  // namespace strata::detail
