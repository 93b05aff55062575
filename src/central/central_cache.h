// The central cache: the middle tier. One per size class, each with a lock
// of its own, holding the spans of that class that no thread owns:
//   - spans given up by threads that exited (or by a fork child's vanished
//     threads), still holding live blocks;
//   - spans whose blocks come back from threads that do not own them.
// A thread that needs a span of the class adopts one from here (batch of
// blocks ready to carve) before asking the page heap for a fresh one.
// Blocks freed to an unowned span arrive in batches (one lock acquisition per
// batch, from a thread's outbox); a span whose blocks have all come back
// goes to the page heap.
//
// Locking: mutex_ guards every field here and every owner-only field of the
// spans whose owner is nullptr. It is never held while taking the page heap
// lock (empty spans are collected and released after unlocking).
#pragma once

#include <cstddef>

#include "core/free_list.h"
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

  // Takes spans a thread gives up. `spans` holds spans of this class that
  // `previous_owner` owned; each becomes unowned (or goes to the page heap
  // when it has no block out).
  void abandon(SpanList& spans) noexcept;

  // Frees `blocks[0, count)`, blocks of this class. Blocks whose span was
  // adopted meanwhile are moved to the front of the array for the caller to
  // send on; returns how many.
  std::uint32_t receive(void** blocks, std::uint32_t count) noexcept;

  // One block for a thread that has no cache (during its own exit).
  void* allocate_one(std::size_t cls) noexcept;

  CentralStats stats() noexcept;
  Mutex& mutex() noexcept { return mutex_; }

 private:
  Mutex mutex_;
  SpanList partial_;   // unowned spans with at least one free block
  std::size_t spans_ = 0;
  std::size_t blocks_out_ = 0;  // sum of `allocated` over unowned spans
};

extern STRATA_INTERNAL CentralCache g_central[kNumClasses];

// Takes `count` blocks out of a span (free list first, then never-used
// memory) into `out`; returns how many it took. Caller owns the span.
std::uint32_t take_blocks(Span* span, std::uint32_t count, BlockChain& out) noexcept;

// Puts a block back into its span. Caller owns the span. Returns true when
// the span had no free block before (it must be filed as partial again).
bool return_block(Span* span, void* block) noexcept;

// Makes `owner` (nullptr: the central cache) the owner of a small span, in
// the span and in the page map's owner tags.
void set_owner(Span* span, ThreadCache* owner) noexcept;

// Prepares a fresh span from the page heap (allocated in state kSmall) for
// class `cls`.
void init_small_span(Span* span, std::size_t cls, ThreadCache* owner) noexcept;

}  // namespace strata::detail
