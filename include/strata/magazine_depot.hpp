// strata/magazine_depot.hpp — the shared tier of thread_cached_pool:
// free objects kept as arrays of pointers ("magazines", Bonwick & Adams,
// "Magazines and Vmem", USENIX 2001).
//
// Unlike batch_depot (whose batches are chains threaded through the free
// objects), a magazine is a separate array, so the pool never reads or
// writes a free object's memory: allocating an object freed on another core
// does not first pull its cache line over to read a link (seed 003's
// producer/consumer pattern), and carving a new chunk touches no page of it.
//
// The depot holds full magazines and empty ones; a thread trades a whole
// magazine at a time under the depot's spinlock. Threads without a cache
// use one shared "loose" magazine, also under the lock.
// Lifetime: the owner calls release_all() when no object is live and no
// thread uses the pool; it frees every chunk and every magazine.
#ifndef STRATA_MAGAZINE_DEPOT_HPP
#define STRATA_MAGAZINE_DEPOT_HPP

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

struct magazine {
  magazine* next;      // in the depot's full or empty list
  magazine* next_all;  // every magazine of the depot, for release_all
  std::uint32_t count;
  void** items() noexcept { return reinterpret_cast<void**>(this + 1); }
};

class magazine_depot {
 public:
  constexpr magazine_depot(std::size_t object_size, std::size_t alignment, std::size_t chunk_bytes,
                           std::pmr::memory_resource* upstream, std::uint32_t capacity) noexcept
      : slot_size_(round_up(object_size == 0 ? 1 : object_size, slot_align(alignment))),
        capacity_(capacity == 0 ? 1 : capacity),
        chunks_(slot_size_, slot_align(alignment), chunk_bytes, upstream) {}

  magazine_depot(const magazine_depot&) = delete;
  magazine_depot& operator=(const magazine_depot&) = delete;

  std::uint32_t capacity() const noexcept { return capacity_; }
  std::size_t slot_size() const noexcept { return slot_size_; }

  // A new empty magazine for a thread's cache. Always a new one, not one
  // from the stock: every holder of magazines brings its own (see
  // fill_fresh_locked for why frees then never allocate).
  magazine* new_empty() {
    std::lock_guard guard(lock_);
    return new_magazine_locked();
  }

  // Takes an empty magazine, returns a non-empty one (a full one from the
  // depot, else the loose objects, else fresh slots). Throws std::bad_alloc; then `empty` stays
  // the caller's.
  magazine* exchange_for_full(magazine* empty) {
    std::lock_guard guard(lock_);
    STRATA_POOL_STEP(depot_take_locked);
    magazine* full = full_;
    if (full != nullptr) {
      full_ = full->next;
    } else if (loose_ != nullptr && loose_->count != 0) {
      // Freed objects before fresh ones: the caller takes the loose
      // magazine and leaves its empty one as the new loose magazine.
      full = loose_;
      loose_ = empty;
      empty = nullptr;
    } else {
      full = empty;  // fill the caller's own magazine with fresh slots
      empty = nullptr;
      fill_fresh_locked(full);
    }
    if (empty != nullptr) {
      empty->next = empty_;
      empty_ = empty;
    }
    return full;
  }

  // Takes a full magazine, returns an empty one (one is always in stock,
  // see fill_fresh_locked).
  magazine* exchange_for_empty(magazine* full) {
    std::lock_guard guard(lock_);
    STRATA_POOL_STEP(depot_give_locked);
    magazine* empty = empty_locked();
    full->next = full_;
    full_ = full;
    return empty;
  }

  // One object at a time, for threads without a cache.
  void* take_one() {
    std::lock_guard guard(lock_);
    STRATA_POOL_STEP(depot_take_locked);
    if (loose_ == nullptr) loose_ = new_magazine_locked();
    if (loose_->count == 0) {
      if (magazine* full = full_) {  // swap the empty loose magazine for a full one
        full_ = full->next;
        loose_->next = empty_;
        empty_ = loose_;
        loose_ = full;
      } else {
        fill_fresh_locked(loose_);
      }
    }
    return loose_->items()[--loose_->count];
  }

  // noexcept: the loose magazine exists once any object does (made by the
  // first fill), and a full one is swapped for a stocked empty one.
  void give_one(void* p) noexcept {
    std::lock_guard guard(lock_);
    STRATA_POOL_STEP(depot_give_locked);
    give_one_locked(p);
  }

  // Takes back a cache's magazine at thread exit, with whatever it holds:
  // a full one joins the full list, the objects of a partial one go to the
  // loose magazine, and the emptied magazine joins the stock.
  void absorb(magazine* m) noexcept {
    std::lock_guard guard(lock_);
    STRATA_POOL_STEP(depot_give_locked);
    if (m->count == capacity_) {
      m->next = full_;
      full_ = m;
      return;
    }
    while (m->count != 0) give_one_locked(m->items()[--m->count]);
    m->next = empty_;
    empty_ = m;
  }

  void release_all() noexcept {
    std::lock_guard guard(lock_);
    while (all_ != nullptr) {
      magazine* next = all_->next_all;
      chunks_.free_block(all_, magazine_bytes(), alignof(magazine));
      all_ = next;
    }
    chunks_.release_all();
    full_ = empty_ = loose_ = nullptr;
  }

  std::size_t chunk_count() const noexcept {
    std::lock_guard guard(lock_);
    return chunks_.chunk_count();
  }

  bool owns(const void* p) const noexcept {
    std::lock_guard guard(lock_);
    return chunks_.holds_slot(p);
  }

 private:
  static constexpr std::size_t slot_align(std::size_t alignment) noexcept {
    return alignment < alignof(void*) ? alignof(void*) : alignment;
  }
  std::size_t magazine_bytes() const noexcept { return sizeof(magazine) + capacity_ * sizeof(void*); }

  void give_one_locked(void* p) noexcept {
    if (loose_->count == capacity_) {
      loose_->next = full_;
      full_ = loose_;
      loose_ = empty_locked();
    }
    loose_->items()[loose_->count++] = p;
  }

  magazine* empty_locked() {
    if (magazine* m = empty_) {
      empty_ = m->next;
      return m;
    }
    return new_magazine_locked();
  }

  magazine* new_magazine_locked() {
    auto* m = ::new (chunks_.get_block(magazine_bytes(), alignof(magazine))) magazine{nullptr, all_, 0};
    all_ = m;
    return m;
  }

  // Fills an empty magazine with addresses of untouched slots. It first
  // stocks one more empty magazine: every `capacity_` objects that come into
  // existence bring the magazine that will hold them when they are freed,
  // and every cache (and the loose magazine) brings its own magazines. So
  // with F fills, C caches and all magazines M = F + 2C (+1 loose), a free
  // that needs an empty magazine holds two full ones (or the full loose
  // one), hence at most F - 2 (F - 1) full magazines sit in the depot and at
  // most M - 1 are in use: an empty one is always in stock, and
  // exchange_for_empty and give_one never allocate (frees do not fail).
  void fill_fresh_locked(magazine* m) {
    if (loose_ == nullptr) loose_ = new_magazine_locked();
    magazine* spare = new_magazine_locked();
    spare->next = empty_;
    empty_ = spare;
    // Fresh slots are handed out lowest address first (pops take the last
    // item), so the first touches walk the chunk upwards. One pass over the
    // array; only the slots' addresses are written, never the slots.
    void** items = m->items();
    while (m->count < capacity_) {
      if (chunks_.fresh_slots() == 0) {
        try {
          chunks_.add_chunk();
        } catch (...) {
          if (m->count == 0) throw;
          break;  // out of memory: hand out what there is
        }
      }
      const std::uint32_t wanted = capacity_ - m->count;
      const auto available = static_cast<std::uint32_t>(chunks_.fresh_slots());
      const std::uint32_t n = wanted < available ? wanted : available;
      // Make room at the bottom: items already there (an earlier chunk's
      // tail) move up so this chunk's slots come out after them.
      for (std::uint32_t i = m->count; i-- > 0;) items[i + n] = items[i];
      char* first = chunks_.take_fresh(n);
      for (std::uint32_t i = 0; i < n; ++i) items[n - 1 - i] = first + i * slot_size_;
      m->count += n;
    }
  }

  mutable spinlock lock_;
  std::size_t slot_size_;
  std::uint32_t capacity_;
  slot_chunks chunks_;  // the slots' memory, and the magazines' source
  magazine* full_ = nullptr;
  magazine* empty_ = nullptr;
  magazine* loose_ = nullptr;
  magazine* all_ = nullptr;
};

}  // namespace strata::detail

#endif
