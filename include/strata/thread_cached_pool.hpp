// strata/thread_cached_pool.hpp — a fixed-size pool shared by threads, with
// a cache per thread (seed 003's "pool per thread" cure).
//
// allocate/deallocate touch only the calling thread's cache: two magazines
// (arrays of free-object pointers, magazine_depot.hpp), `loaded` and
// `previous`, Bonwick's magazine layer. Allocation pops `loaded`; when it is
// empty and `previous` is not, the two swap; otherwise the empty one is
// traded for a full one at the depot. Frees mirror that. So a thread takes
// the depot's spinlock at most once per magazine (about 16 KiB of objects),
// never uses an atomic instruction on the fast path, and never touches the
// memory of a free object: an object freed on another core is handed out
// again without its cache line moving (the producer/consumer case).
//
// The per-thread caches live in this object, indexed by the thread's slot
// (thread_slots.hpp); a cache is made on a thread's first use. When a thread
// exits, its slot and the caches behind it pass to the next thread that
// starts, so nothing is lost and nothing refers to a dead thread. Threads
// beyond max_thread_slots use the depot one object at a time.
//
// The pool must outlive every use; its destructor frees all memory.
#ifndef STRATA_THREAD_CACHED_POOL_HPP
#define STRATA_THREAD_CACHED_POOL_HPP

#include <strata/batch_depot.hpp>  // batch_size_for
#include <strata/general_memory.hpp>
#include <strata/magazine_depot.hpp>
#include <strata/pool_checks.hpp>
#include <strata/pool_steps.hpp>
#include <strata/thread_slots.hpp>

#include <atomic>
#include <cstddef>
#include <memory_resource>
#include <new>
#include <utility>

namespace strata {

class thread_cached_pool {
 public:
  // Objects of `object_size` bytes aligned to `alignment` (a power of two).
  // Chunks of about `chunk_bytes` (and the magazines) come from `upstream`
  // (nullptr: the general allocator).
  explicit thread_cached_pool(std::size_t object_size,
                              std::size_t alignment = alignof(std::max_align_t),
                              std::size_t chunk_bytes = 64 * 1024,
                              std::pmr::memory_resource* upstream = nullptr)
      : capacity_(detail::batch_size_for(detail::round_up(object_size, alignment))),
        depot_(object_size, alignment, chunk_bytes, upstream, capacity_) {
    for (auto& c : caches_) c.store(nullptr, std::memory_order_relaxed);
  }

  thread_cached_pool(const thread_cached_pool&) = delete;
  thread_cached_pool& operator=(const thread_cached_pool&) = delete;

  ~thread_cached_pool() { release(); }

  // Throws std::bad_alloc (or what the upstream throws).
  [[nodiscard]] void* allocate() {
    std::uint32_t slot = detail::current_thread_slot();
    if (slot < detail::max_thread_slots) [[likely]] {
      if (cache* c = caches_[slot].load(std::memory_order_relaxed)) [[likely]] {
        detail::magazine* m = c->loaded;
        if (m->count != 0) [[likely]] return m->items()[--m->count];
        return allocate_slow(*c);
      }
      return allocate_slow(make_cache(slot));
    }
    return depot_.take_one();
  }

  void deallocate(void* p) noexcept {
    if (p == nullptr) return;
    if constexpr (detail::pool_checks_enabled)
      if (!depot_.owns(p)) detail::pool_check_failed("thread_cached_pool", this, "pointer from another pool", p);
    std::uint32_t slot = detail::current_thread_slot();
    if (slot < detail::max_thread_slots) [[likely]] {
      if (cache* c = caches_[slot].load(std::memory_order_relaxed)) [[likely]] {
        detail::magazine* m = c->loaded;
        if (m->count != capacity_) [[likely]] {
          m->items()[m->count++] = p;
          return;
        }
        return deallocate_slow(*c, p);
      }
      // A thread whose first call is a free (a consumer): make its cache,
      // unless memory for it cannot be had; then use the shared path.
      cache* made = nullptr;
      try {
        made = &make_cache(slot);
      } catch (...) {
      }
      if (made != nullptr) return deallocate_slow(*made, p);
    }
    depot_.give_one(p);
  }

  // Frees every chunk, magazine and cache. No object may be live, and no
  // other thread may use the pool meanwhile.
  void release() noexcept {
    for (auto& slot : caches_) {
      cache* c = slot.exchange(nullptr, std::memory_order_relaxed);
      if (c != nullptr) detail::deallocate_bytes(c, sizeof(cache), alignof(cache));
    }
    depot_.release_all();
  }

  std::size_t object_size() const noexcept { return depot_.slot_size(); }
  std::size_t chunk_count() const noexcept { return depot_.chunk_count(); }

 private:
  // One cache line per thread: caches of different threads never share one.
  // `previous` is always empty or full.
  struct alignas(64) cache {
    detail::magazine* loaded;
    detail::magazine* previous;
  };

  [[gnu::noinline]] void* allocate_slow(cache& c) {
    STRATA_POOL_STEP(cache_refill);
    if (c.previous->count != 0) {
      std::swap(c.loaded, c.previous);
    } else {
      detail::magazine* full = depot_.exchange_for_full(c.loaded);
      STRATA_POOL_STEP(cache_traded);
      c.loaded = full;
    }
    return c.loaded->items()[--c.loaded->count];
  }

  // noexcept: the depot keeps an empty magazine in stock for every full one
  // that can come back (magazine_depot.hpp), so this never allocates.
  [[gnu::noinline]] void deallocate_slow(cache& c, void* p) noexcept {
    STRATA_POOL_STEP(cache_spill);
    if (c.previous->count == 0) {
      std::swap(c.loaded, c.previous);
    } else {
      detail::magazine* empty = depot_.exchange_for_empty(c.previous);
      STRATA_POOL_STEP(cache_traded);
      c.previous = c.loaded;
      c.loaded = empty;
    }
    c.loaded->items()[c.loaded->count++] = p;
  }

  [[gnu::noinline]] cache& make_cache(std::uint32_t slot) {
    void* memory = detail::allocate_bytes(sizeof(cache), alignof(cache));
    cache* c = ::new (memory) cache{nullptr, nullptr};
    try {
      c->loaded = depot_.new_empty();
      c->previous = depot_.new_empty();
    } catch (...) {
      // Magazines already made stay in the depot's list (freed by release).
      detail::deallocate_bytes(memory, sizeof(cache), alignof(cache));
      throw;
    }
    STRATA_POOL_STEP(cache_publish);
    caches_[slot].store(c, std::memory_order_relaxed);
    return *c;
  }

  // Read on every operation (and written only when a thread's cache is
  // made): kept apart from the depot's lock and lists, which change on
  // every exchange.
  std::uint32_t capacity_;
  // Written only by the thread that owns the slot; the slot's hand-over
  // (thread_slots' lock) orders it for the next owner. Atomic so that
  // release() may read every entry.
  std::atomic<cache*> caches_[detail::max_thread_slots];
  alignas(64) detail::magazine_depot depot_;
};

}  // namespace strata

#endif
