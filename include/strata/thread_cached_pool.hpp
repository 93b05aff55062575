// strata/thread_cached_pool.hpp — a fixed-size pool shared by threads, with
// a free-list cache per thread (seed 003's "pool per thread" cure).
//
// allocate/deallocate touch only the calling thread's cache (two magazines,
// batch_depot.hpp): no atomic instruction, no lock. Once per batch (about
// 4 KiB of objects) a thread trades a whole batch with the shared depot
// under a spinlock. Objects may be freed by any thread: they join the
// freeing thread's cache and travel back through the depot in batches.
//
// The per-thread caches live in this object, indexed by the thread's slot
// (thread_slots.hpp); a cache is allocated on a thread's first use. When a
// thread exits, its slot and the caches behind it pass to the next thread
// that starts, so nothing is lost and nothing refers to a dead thread.
// Threads beyond max_thread_slots use the depot one object at a time.
//
// The pool must outlive every use; its destructor frees all chunks.
#ifndef STRATA_THREAD_CACHED_POOL_HPP
#define STRATA_THREAD_CACHED_POOL_HPP

#include <strata/batch_depot.hpp>
#include <strata/general_memory.hpp>
#include <strata/pool_checks.hpp>
#include <strata/thread_slots.hpp>

#include <atomic>
#include <cstddef>
#include <memory_resource>
#include <new>

namespace strata {

class thread_cached_pool {
 public:
  // Objects of `object_size` bytes aligned to `alignment` (a power of two).
  // Chunks of about `chunk_bytes` come from `upstream` (nullptr: the general
  // allocator).
  explicit thread_cached_pool(std::size_t object_size,
                              std::size_t alignment = alignof(std::max_align_t),
                              std::size_t chunk_bytes = 64 * 1024,
                              std::pmr::memory_resource* upstream = nullptr)
      : depot_(object_size, alignment, chunk_bytes, upstream) {
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
        if (detail::free_node* n = c->magazines.try_pop()) [[likely]] return n;
        return c->magazines.pop_refill(depot_);
      }
      return make_cache(slot).magazines.pop_refill(depot_);
    }
    return depot_.take_one();
  }

  void deallocate(void* p) noexcept {
    if (p == nullptr) return;
    if constexpr (detail::pool_checks_enabled)
      if (!depot_.owns(p))
        detail::pool_check_failed("thread_cached_pool", this, "pointer from another pool", p);
    std::uint32_t slot = detail::current_thread_slot();
    if (slot < detail::max_thread_slots) [[likely]] {
      if (cache* c = caches_[slot].load(std::memory_order_relaxed)) [[likely]] {
        if (c->magazines.try_push(p)) [[likely]] return;
        return c->magazines.push_spill(depot_, p);
      }
    }
    depot_.give_one(static_cast<detail::free_node*>(p));
  }

  // Frees every chunk and cache. No object may be live, and no other thread
  // may use the pool meanwhile.
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
  struct alignas(64) cache {
    detail::magazine_cache magazines;
  };

  [[gnu::noinline]] cache& make_cache(std::uint32_t slot) {
    void* memory = detail::allocate_bytes(sizeof(cache), alignof(cache));
    cache* c = ::new (memory) cache{};
    c->magazines.room = depot_.batch_size();
    caches_[slot].store(c, std::memory_order_relaxed);
    return *c;
  }

  detail::batch_depot depot_;
  // Written only by the thread that owns the slot; the slot's hand-over
  // (thread_slots' lock) orders it for the next owner. Atomic so that
  // release() may read every entry.
  std::atomic<cache*> caches_[detail::max_thread_slots];
};

}  // namespace strata

#endif
