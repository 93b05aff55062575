// strata/batch_depot.hpp — the shared tier under per-thread free lists.
//
// A batch_depot owns the chunks of one slot size and trades free slots with
// per-thread caches in batches of `batch_size()` slots, so a thread takes
// the depot's lock once per batch, not once per object (the transfer cache
// of TCMalloc; seed 003's "pool per thread" cure made to share memory).
//
// A free slot is overlaid with a free_node: `next` chains the slots of one
// batch, `next_batch` (meaningful in a batch's first slot only) chains the
// batches. Slots are therefore at least two pointers long.
//
// Locking: every member function takes the spinlock; the critical sections
// are a few pointer moves, except add_chunk, which also allocates.
// Lifetime: the depot is trivially destructible and never frees memory on its
// own; the owner calls release_all() when nothing can use the slots any more.
// Used by synchronized_pool_resource (one depot per size class). The other
// per-thread-cached pools use magazine_depot.hpp (pointer arrays), which
// never reads a free object; batch_size_for() is shared by both.
#ifndef STRATA_BATCH_DEPOT_HPP
#define STRATA_BATCH_DEPOT_HPP

#include <strata/general_memory.hpp>
#include <strata/pool_steps.hpp>
#include <strata/slot_chunks.hpp>
#include <strata/spinlock.hpp>

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <mutex>
#include <new>

namespace strata::detail {

struct free_node {
  free_node* next;
  free_node* next_batch;
};

struct node_chain {
  free_node* head = nullptr;
  std::uint32_t count = 0;
};

// Slots per batch: about 16 KiB of objects, between 8 and 1024 slots.
// Seed 004 uses 4-8 KiB batches (128 x 32 B ... 16 x 512 B); on seed 000's
// new/delete loop (5000 live objects) 16 KiB batches measured 5.5 cycles
// per new+delete against 7.5 with 4 KiB ones, the depot's lock being taken
// four times less often. A thread caches at most two batches (magazines)
// per pool.
constexpr std::uint32_t batch_size_for(std::size_t slot_size) noexcept {
  std::size_t n = 16384 / slot_size;
  return static_cast<std::uint32_t>(n < 8 ? 8 : n > 1024 ? 1024 : n);
}

constexpr std::size_t depot_slot_size(std::size_t object_size, std::size_t alignment) noexcept {
  std::size_t size = object_size < sizeof(free_node) ? sizeof(free_node) : object_size;
  return round_up(size, alignment);
}

constexpr std::size_t depot_slot_align(std::size_t alignment) noexcept {
  return alignment < alignof(free_node) ? alignof(free_node) : alignment;
}

class batch_depot {
 public:
  // object_size/alignment: what callers need; slots are rounded up to hold a
  // free_node. chunk_bytes: target chunk size (a chunk holds >= 1 batch).
  // upstream: where chunks come from; nullptr means the general allocator.
  // max_batch: a cap on batch_size() (pmr's max_blocks_per_chunk).
  constexpr batch_depot(std::size_t object_size, std::size_t alignment, std::size_t chunk_bytes,
                        std::pmr::memory_resource* upstream = nullptr,
                        std::uint32_t max_batch = 1024) noexcept
      : slot_size_(depot_slot_size(object_size, depot_slot_align(alignment))),
        slot_align_(depot_slot_align(alignment)),
        batch_size_(batch_size_for(slot_size_) < max_batch ? batch_size_for(slot_size_)
                                                            : (max_batch == 0 ? 1 : max_batch)),
        chunks_(slot_size_, slot_align_, chunk_size(chunk_bytes, slot_size_, slot_align_, batch_size_), upstream) {}

  batch_depot(const batch_depot&) = delete;
  batch_depot& operator=(const batch_depot&) = delete;

  std::size_t slot_size() const noexcept { return slot_size_; }
  std::size_t slot_align() const noexcept { return slot_align_; }
  std::uint32_t batch_size() const noexcept { return batch_size_; }
  std::pmr::memory_resource* upstream() const noexcept { return chunks_.upstream(); }

  // A chain of 1 to batch_size() free slots: a full batch if there is one,
  // else the loose slots (up to a batch), else fresh slots from a chunk.
  // Freed memory is always preferred to fresh memory. Throws std::bad_alloc
  // (or what the upstream throws) when no memory is left.
  node_chain take_batch() {
    std::lock_guard guard(lock_);
    STRATA_POOL_STEP(depot_take_locked);
    if (free_node* batch = full_batches_) {
      full_batches_ = batch->next_batch;
      return {batch, batch_size_};
    }
    node_chain chain;
    if (loose_ != nullptr) {
      chain.head = loose_;
      free_node* last = loose_;
      chain.count = 1;
      while (chain.count < batch_size_ && last->next != nullptr) {
        last = last->next;
        ++chain.count;
      }
      loose_ = last->next;
      loose_count_ -= chain.count;
      last->next = nullptr;
      return chain;
    }
    free_node** tail = &chain.head;
    while (chain.count < batch_size_) {
      free_node* n;
      try {
        n = carve_locked();
      } catch (...) {
        if (chain.count == 0) throw;
        break;  // out of memory mid-batch: hand out what was carved
      }
      *tail = n;
      tail = &n->next;
      ++chain.count;
    }
    *tail = nullptr;
    return chain;
  }

  // Takes back a chain of exactly batch_size() slots (from take_batch or a full cache).
  void give_batch(free_node* head) noexcept {
    std::lock_guard guard(lock_);
    STRATA_POOL_STEP(depot_give_locked);
    head->next_batch = full_batches_;
    full_batches_ = head;
  }

  // Takes back any number of slots (a cache being flushed at thread exit).
  void give_chain(node_chain chain) noexcept {
    if (chain.head == nullptr) return;
    free_node* last = chain.head;
    while (last->next != nullptr) last = last->next;
    std::lock_guard guard(lock_);
    STRATA_POOL_STEP(depot_give_locked);
    last->next = loose_;
    loose_ = chain.head;
    loose_count_ += chain.count;
  }

  // One slot at a time, for threads that have no cache (exited, or past the
  // cache limit). Throws like take_batch.
  free_node* take_one() {
    std::lock_guard guard(lock_);
    STRATA_POOL_STEP(depot_take_locked);
    if (free_node* n = loose_) {
      loose_ = n->next;
      --loose_count_;
      return n;
    }
    if (free_node* batch = full_batches_) {
      full_batches_ = batch->next_batch;
      // The rest of the batch becomes loose.
      free_node* rest = batch->next;
      if (rest != nullptr) {
        free_node* last = rest;
        while (last->next != nullptr) last = last->next;
        last->next = loose_;
        loose_ = rest;
        loose_count_ += batch_size_ - 1;
      }
      return batch;
    }
    return carve_locked();
  }

  void give_one(free_node* n) noexcept {
    std::lock_guard guard(lock_);
    STRATA_POOL_STEP(depot_give_locked);
    n->next = loose_;
    loose_ = n;
    ++loose_count_;
  }

  // Frees every chunk. Only when no slot is in use or cached anywhere.
  void release_all() noexcept {
    std::lock_guard guard(lock_);
    chunks_.release_all();
    full_batches_ = loose_ = nullptr;
    loose_count_ = 0;
  }

  std::size_t chunk_count() const noexcept {
    std::lock_guard guard(lock_);
    return chunks_.chunk_count();
  }
  std::size_t chunk_bytes() const noexcept { return chunks_.chunk_bytes(); }

  // True if p is the start of a slot in one of this depot's chunks.
  bool owns(const void* p) const noexcept {
    std::lock_guard guard(lock_);
    return chunks_.holds_slot(p);
  }

 private:
  // A chunk holds at least one batch.
  static constexpr std::size_t chunk_size(std::size_t wanted, std::size_t slot, std::size_t align,
                                          std::uint32_t batch) noexcept {
    std::size_t minimum = slot_chunks::header_bytes(align) + slot * batch;
    return wanted < minimum ? minimum : wanted;
  }

  free_node* carve_locked() {
    if (chunks_.fresh_slots() == 0) chunks_.add_chunk();
    return reinterpret_cast<free_node*>(chunks_.take_fresh(1));
  }

  mutable spinlock lock_;
  std::size_t slot_size_;
  std::size_t slot_align_;
  std::uint32_t batch_size_;
  slot_chunks chunks_;
  free_node* full_batches_ = nullptr;
  free_node* loose_ = nullptr;
  std::size_t loose_count_ = 0;
};

// A per-thread cache over a depot: two "magazines" of at most batch_size()
// slots each (Bonwick's magazine layer). `loaded` serves allocations and
// takes frees; `spare` is empty or exactly one full batch. A thread that
// alternates allocate/free around a batch boundary flips between the two
// instead of trading with the depot every time.
struct magazine_cache {
  free_node* loaded = nullptr;
  std::uint32_t room = 0;  // free places left in `loaded` (0 also when not set up)
  free_node* spare = nullptr;

  // Fast paths: one branch each. Return false when the slow path must run.
  free_node* try_pop() noexcept {
    free_node* n = loaded;
    if (n != nullptr) [[likely]] {
      loaded = n->next;
      ++room;
    }
    return n;
  }
  bool try_push(void* p) noexcept {
    if (room == 0) [[unlikely]] return false;
    auto* n = static_cast<free_node*>(p);
    n->next = loaded;
    loaded = n;
    --room;
    return true;
  }

  // Slow paths (cache set up, i.e. `room` counts real places).
  free_node* pop_refill(batch_depot& depot) {
    if (spare != nullptr) {
      loaded = spare;
      spare = nullptr;
      room = 0;
    } else {
      node_chain chain = depot.take_batch();
      loaded = chain.head;
      room = depot.batch_size() - chain.count;
    }
    free_node* n = loaded;
    loaded = n->next;
    ++room;
    return n;
  }
  void push_spill(batch_depot& depot, void* p) noexcept {
    // `loaded` is full: it becomes the spare; an older spare goes to the depot.
    if (spare != nullptr) depot.give_batch(spare);
    spare = loaded;
    loaded = nullptr;
    room = depot.batch_size();
    try_push(p);
  }

  // Gives everything back to the depot; the cache is left empty and unset.
  void flush(batch_depot& depot) noexcept {
    if (spare != nullptr) depot.give_batch(spare);
    std::uint32_t count = depot.batch_size() - room;
    if (loaded != nullptr) depot.give_chain({loaded, count});
    loaded = spare = nullptr;
    room = 0;
  }
};

}  // namespace strata::detail

#endif
