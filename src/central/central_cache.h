// The central cache: the middle tier. One per size class, each with a lock
// of its own, holding the spans of that class that no thread owns:
//   - spans given up by threads that exited (or by a fork child's vanished
//     threads), still holding live blocks;
//   - spans that serve threads without spans of their own: young threads
//     (until they prove busy, frontend/thread_cache.h) and threads past
//     their exit.
// A thread that needs a span of the class adopts one from here before asking
// the page heap for a fresh one. Blocks freed to an unowned span arrive in
// batches (one lock acquisition per parcel from a thread's outbox); a span
// whose blocks have all come back goes to the page heap.
//
// Locking: mutex_ guards every field here and every owner-only field of the
// spans whose owner is nullptr. It is never held while taking the page heap
// lock (empty spans are collected and released after unlocking).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/size_classes.h"
#include "core/span.h"
#include "platform/mutex.h"

namespace strata::detail {

class ThreadCache;

struct CentralStats {
  std::size_t spans = 0;          // unowned spans of this class
  std::size_t free_blocks = 0;    // free blocks in them
  std::size_t blocks_out = 0;     // blocks of them in use (or travelling back)
  unsigned long lock_contended = 0;
};

class CentralCache {
 public:
  // Hands an unowned span with free blocks to `owner`, or nullptr.
  Span* adopt(ThreadCache* owner) noexcept;

  // Takes spans a thread gives up (awake, not kept empty). Each becomes
  // unowned, or goes to the page heap when no block of it is out.
  void abandon(SpanList& spans) noexcept;

  // Frees `blocks[0, count)`, blocks of this class. Blocks whose span was
  // adopted meanwhile are moved to the front of the array for the caller to
  // send on; returns how many.
  std::uint32_t receive(void** blocks, std::uint32_t count) noexcept;

  // One block, for a thread without spans of its own (young or exiting);
  // nullptr when the OS refuses memory.
  void* allocate_one(std::size_t cls) noexcept;

  // Is `block` free in `span`, an unowned span of this class?
  // (Checking mode's double-free confirmation.)
  bool holds_free_block(Span* span, const void* block) noexcept;

  // Gives back unused pages of unowned spans, and the kept empty span
  // (release on request).
  std::size_t park_free_units() noexcept;

  // Gives the kept empty span to the page heap once it has been idle for
  // `period_ns` (decay); never waits for the lock.
  void release_kept_if_idle(std::uint64_t now_ns, std::uint64_t period_ns) noexcept;

  CentralStats stats() noexcept;
  Mutex& mutex() noexcept { return mutex_; }

 private:
  // Takes the lowest free block out of an unowned span of this class.
  // Caller holds mutex_.
  void* take_one_locked(Span* span) noexcept;

  // Files a block back into its unowned span; the span goes to `empty` when
  // every block came back. Caller holds mutex_.
  void return_block_locked(Span* span, void* block, SpanList& empty) noexcept;

  // Spans of at most this many pages may be kept empty: a young thread's
  // malloc/free of one block then does not take a span from the page heap
  // and give it back each time.
  static constexpr std::size_t kMaxKeptPages = 8;

  // mutex_ held for a scope, publishing partial_listed_ as it lets go.
  class Locked;
  // Sets partial_listed_ from partial_; caller holds mutex_, about to let go.
  void publish_listed() noexcept { partial_listed_.store(!partial_.empty(), std::memory_order_relaxed); }

  Mutex mutex_;
  SpanList partial_;   // unowned spans with at least one free block
  // Whether partial_ held a span when mutex_ was last let go: read without
  // the lock by adopt, so that a thread taking a new span does not lock a
  // class with nothing to adopt (most classes of most programs). A stale
  // answer only makes that one span come from the page heap instead.
  std::atomic<bool> partial_listed_{false};
  Span* kept_empty_ = nullptr;  // one empty span stays (in partial_) until idle for a decay period
  std::size_t spans_ = 0;
  std::size_t blocks_out_ = 0;  // sum of blocks out over unowned spans
};

extern STRATA_INTERNAL CentralCache g_central[kNumClasses];

// Prepares a fresh span from the page heap (allocated in state kSmall) for
// class `cls`, owned by `owner` (nullptr: the central cache).
void init_small_span(Span* span, std::size_t cls, ThreadCache* owner) noexcept;

}  // namespace strata::detail
