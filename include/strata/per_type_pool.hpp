// strata/per_type_pool.hpp — one immortal pool per type, cached per thread.
//
// The memory behind pool_allocator<T> and pooled<T>. Seed 000 gives every
// thread its own thread_local pool that frees its chunks at thread exit;
// a global container (or another thread) still holding nodes then touches
// freed memory. Here ownership is split the other way round:
//
//  * the chunks belong to one depot per type (batch_depot.hpp) that is
//    constant-initialised and never destroyed, so it is usable before any
//    constructor and after every destructor of the program;
//  * each thread only caches free slots (two magazines, a plain
//    thread_local with a trivial destructor, so it too stays readable while
//    the thread's other thread_locals and, for the main thread, the
//    program's statics are destroyed);
//  * a small exit hook, registered on the thread's first slow path, gives
//    the cached slots back to the depot when the thread exits and switches
//    the thread to "exited": from then on its frees and allocations go to
//    the depot one by one, under the depot's lock.
//
// So a node outlives the thread that allocated it; freeing it on any thread
// makes it reusable there (or, through the depot, by every thread); a
// container destroyed during static destruction frees into the depot.
// Memory is bounded by the peak number of live objects plus one batch per
// cache; it is never returned to the general allocator.
#ifndef STRATA_PER_TYPE_POOL_HPP
#define STRATA_PER_TYPE_POOL_HPP

#include <strata/batch_depot.hpp>
#include <strata/object_pool.hpp>  // pool_chunk_bytes

#include <cstddef>
#include <cstdint>

namespace strata::detail {

// Size and Alignment describe the objects; Tag makes the pool per type.
template <class Tag, std::size_t Size, std::size_t Alignment>
class per_type_pool {
 public:
  static void* allocate() {
    if (free_node* n = cache_.magazines.try_pop()) [[likely]] return n;
    return allocate_slow();
  }

  static void deallocate(void* p) noexcept {
    if (cache_.magazines.try_push(p)) [[likely]] return;
    deallocate_slow(p);
  }

  // For tests and statistics.
  static std::size_t chunk_count() noexcept { return depot_.chunk_count(); }
  static bool owns(const void* p) noexcept { return depot_.owns(p); }
  static constexpr std::size_t slot_size() noexcept { return depot_slot_size(Size, depot_slot_align(Alignment)); }

 private:
  enum class phase : std::uint8_t { fresh, active, exited };

  struct thread_cache {
    magazine_cache magazines;
    phase state;
  };

  // Registered on a thread's first slow path; its destructor runs at thread
  // exit (before the statics, for the main thread).
  struct exit_hook {
    exit_hook() noexcept = default;
    exit_hook(const exit_hook&) = delete;
    exit_hook& operator=(const exit_hook&) = delete;
    ~exit_hook() {
      thread_cache& c = cache_;
      c.magazines.flush(depot_);
      c.state = phase::exited;
    }
  };

  static void ensure_set_up() {
    thread_cache& c = cache_;
    if (c.state != phase::fresh) return;
    static thread_local exit_hook hook;  // constructed (and registered) once per thread
    (void)hook;
    c.state = phase::active;
    c.magazines.room = depot_.batch_size();
  }

  [[gnu::noinline]] static void* allocate_slow() {
    ensure_set_up();
    thread_cache& c = cache_;
    if (c.state == phase::exited) return depot_.take_one();
    return c.magazines.pop_refill(depot_);
  }

  [[gnu::noinline]] static void deallocate_slow(void* p) noexcept {
    thread_cache& c = cache_;
    if (c.state == phase::active) return c.magazines.push_spill(depot_, p);
    if (c.state == phase::exited) return depot_.give_one(static_cast<free_node*>(p));
    // fresh: this thread frees before it ever allocated (a node from another
    // thread). Set up its cache; registering the hook may allocate, and if
    // that fails the slot goes straight to the depot instead.
    try {
      ensure_set_up();
    } catch (...) {
      return depot_.give_one(static_cast<free_node*>(p));
    }
    if (!c.magazines.try_push(p)) c.magazines.push_spill(depot_, p);
  }

  // constinit: initialised before any dynamic initialiser runs; trivially
  // destructible: no destructor is ever registered for it.
  static inline constinit batch_depot depot_{Size, Alignment, pool_chunk_bytes<Tag>};
  static inline constinit thread_local thread_cache cache_{};
};

}  // namespace strata::detail

#endif
