// The page heap: the bottom tier. Hands out spans of whole pages, takes them
// back, splits and coalesces them, and gets memory from the OS in large,
// 2 MiB-aligned reservations (never one system call per malloc).
//
// Free spans are kept
//   - by length, one LIFO list per length for 1..128 pages, with a bitmap of
//     non-empty lists so that "smallest list >= n" is two bit scans;
//   - above 128 pages in a treap ordered by (length, address): best fit,
//     lowest address first, O(log n) for a heap of any size.
// A returned span merges with free neighbours at both ends (found through the
// page map: a free span maps its first and last page).
//
// The untouched rest of the newest reservation is not a free span: it joins
// the free structures a request at a time, only when no free span fits.
// Filed whole, it merged with the spans freed around it (reservations often
// lie next to each other), and the lowest-address-first rule then walked a
// program's second pass over a large heap through never-touched pages before
// the touched ones above them (100,000 blocks of 1 KiB allocated and freed
// in order, twice: 130 MiB resident for 98 MiB live; now 105; glibc 103).
//
// With huge pages on (STRATA_HUGE_PAGES=1) every free span goes to the
// treap: best fit, lowest address first, for all lengths, so the heap fills
// the lowest 2 MiB huge page before it touches the next and the resident
// set does not balloon (O(log n) instead of O(1) per span, which is per
// span of blocks, not per malloc).
//
// Locking: one mutex for the whole page heap. Small-class traffic reaches it
// once per span (tens to thousands of blocks), large blocks once per
// malloc/free; docs/design.md discusses what that means at 64+ cores.
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>

#include "core/span.h"
#include "platform/mutex.h"

namespace strata::detail {

struct PageHeapStats {
  std::size_t mapped_bytes = 0;       // reserved from the OS, ever (never unmapped)
  std::size_t free_bytes = 0;         // in free spans (including decommitted)
  std::size_t fresh_bytes = 0;        // the newest reservation's never-used rest
  std::size_t decommitted_bytes = 0;  // free and given back to the OS
  std::size_t in_use_spans = 0;
  std::size_t in_use_bytes = 0;       // pages of spans handed out (small and large)
  std::size_t small_span_bytes = 0;   // of which cut into size classes
  std::size_t free_spans = 0;
  std::size_t reservations = 0;       // mmap calls for heap memory
  std::size_t decommit_calls = 0;     // madvise calls
  std::size_t runway_bytes = 0;       // free pages set aside in threads' runways (in free_bytes too)
  unsigned long lock_contended = 0;
};

class PageHeap {
 public:
  static constexpr std::size_t kMaxListPages = 128;
  // A thread's runway for its new spans (256 KiB; allocate_small).
  static constexpr std::size_t kRunwayPages = 32;

  // A span of exactly `pages` pages whose start is aligned to `align_pages`
  // pages (a power of two), every page mapped to it, in `state` (kLarge or
  // kSmall: set under the lock, since coalescing reads neighbours' states),
  // or nullptr when the OS refuses memory.
  Span* allocate(std::size_t pages, std::size_t align_pages = 1,
                 SpanState state = SpanState::kLarge) noexcept;

  // A kSmall span of `pages` pages for a thread whose runway is `runway`
  // (nullptr: none yet). Resident free pages that fit come first (reused,
  // as by allocate); otherwise the span is cut from the front of the
  // runway, and when the runway is short it goes back free and a new one
  // (max(kRunwayPages, 4 * pages)) is cut from free pages never touched or
  // from pages the heap grows by. Threads that grow at once so keep their
  // spans apart, each in address order, and a runway holds no resident page
  // unused (unless growth merged fresh pages with a free run below them).
  Span* allocate_small(std::size_t pages, Span*& runway) noexcept;

  // Gives a thread's runway back as free pages (nullptr: nothing to do).
  void release_runway(Span*& runway) noexcept;

  // Takes back a span in use (kSmall or kLarge): coalesces and files it.
  // `free_since`: when its pages became free, for decay (0: now; a thread's
  // kept empty span has been free since it was kept).
  void deallocate(Span* span, std::uint64_t free_since = 0) noexcept;

  // Grows a large span in place to `pages` when the pages right after it are
  // free; true on success.
  bool try_grow(Span* span, std::size_t pages) noexcept;

  // Gives the tail of a large span beyond `pages` back.
  void shrink(Span* span, std::size_t pages) noexcept;

  // Returns free pages to the OS: those free for at least `min_age_ns`
  // (0: all), visiting at most `max_spans` free spans (0: no bound).
  // Returns the bytes decommitted. Takes the lock.
  std::size_t decommit_free(std::uint64_t now_ns, std::uint64_t min_age_ns,
                            std::size_t max_spans = 0) noexcept;

  // The decay policy: free pages go back to the OS once free for `decay_ns`
  // (0: at once). Checked, at bounded cost, whenever the heap is used; also
  // callable from the thread caches' slow paths (maybe_decay).
  void set_decay(std::uint64_t decay_ns) noexcept;
  void maybe_decay() noexcept;  // cheap when nothing is due; never blocks on the lock

  PageHeapStats stats() noexcept;

  // Calls `visit` for every small span in use, with the lock held (the set
  // cannot change meanwhile; the spans' own counters may).
  void visit_small_spans(void (*visit)(const Span*, void*), void* context) noexcept;

  Mutex& mutex() noexcept { return mutex_; }

  // Checks every invariant of the free structures (tests, debug builds).
  // Returns nullptr when all hold, or a description of the first violation.
  const char* validate() noexcept;

 private:
  Span* allocate_locked(std::size_t pages, std::size_t align_pages, SpanState state) noexcept;
  // A filed free span of at least pages + align_pages - 1 pages: unfiled, cut
  // (the unused front and tail filed free again) and handed out.
  Span* take_free_locked(Span* span, std::size_t pages, std::size_t align_pages, SpanState state) noexcept;
  Span* hand_out_locked(Span* span, SpanState state) noexcept;  // cut to size, detached: in use now
  Span* take_runway_locked(std::size_t pages) noexcept;
  void release_runway_locked(Span*& runway) noexcept;
  void count_runway_locked(const Span* span, int sign) noexcept;
  Span* find_free_locked(std::size_t pages) noexcept;
  Span* grow_locked(std::size_t pages) noexcept;      // from the fresh rest, reserving when short
  bool reserve_locked(std::size_t pages) noexcept;    // a new reservation becomes the fresh rest
  bool release_fresh_locked(std::size_t pages) noexcept;  // the rest's next pages become a free span
  void insert_free_locked(Span* span, std::uint64_t free_since = 0) noexcept;   // coalesces, then files
  void file_free_locked(Span* span) noexcept;     // files without coalescing
  void unfile_free_locked(Span* span) noexcept;
  Span* split_front_locked(Span* span, std::size_t pages) noexcept;  // returns the rest
  void map_ends_locked(Span* span) noexcept;   // its first and last page map to it (a free span's rule)
  void map_whole_locked(Span* span) noexcept;
  void decay_push_locked(Span* span) noexcept;
  void decay_remove_locked(Span* span) noexcept;
  void decommit_locked(Span* span) noexcept;
  std::size_t decay_locked(std::uint64_t now_ns, std::uint64_t min_age_ns, std::size_t max_spans) noexcept;
  void after_change_locked() noexcept;  // runs the decay when due
  void link_small_locked(Span* span) noexcept;
  void unlink_small_locked(Span* span) noexcept;

  Mutex mutex_;
  SpanList lists_[kMaxListPages + 1];
  std::uint64_t nonempty_[3] = {0, 0, 0};  // bit n: lists_[n] has spans
  Span* large_root_ = nullptr;              // treap of spans > kMaxListPages
  PageHeapStats stats_;
  std::size_t next_growth_bytes_ = kReservationBytes;
  PageId fresh_first_ = 0;      // the newest reservation's never-used rest:
  std::size_t fresh_pages_ = 0;  // not a free span, not in the page map
  std::atomic<std::size_t> small_span_bytes_{0};
  std::size_t runway_bytes_ = 0;           // detached in threads' runways
  std::size_t runway_unbacked_bytes_ = 0;  // of which never touched or given back
  Span* small_spans_ = nullptr;  // every small span in use (small_next/small_prev)
  Span* decay_head_ = nullptr;  // committed free spans, oldest first (roughly)
  Span* decay_tail_ = nullptr;
  std::atomic<std::uint64_t> decay_ns_{1000000000ull};
  std::atomic<std::uint64_t> next_decay_at_ns_{0};
};

extern STRATA_INTERNAL PageHeap g_page_heap;

// CLOCK_MONOTONIC_COARSE in nanoseconds (platform/os.h: vDSO, no system call).
std::uint64_t monotonic_ns() noexcept;

// Span metadata objects.
Span* new_span() noexcept;
void delete_span(Span* span) noexcept;
std::size_t span_metadata_bytes() noexcept;
Mutex& span_pool_mutex() noexcept;

}  // namespace strata::detail
