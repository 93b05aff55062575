// strata/per_type_pool.hpp — one immortal pool per type, cached per thread.
//
// The memory behind pool_allocator<T> and pooled<T>. Seed 000 gives every
// thread its own thread_local pool that frees its chunks at thread exit;
// a global container (or another thread) still holding nodes then touches
// freed memory. Here ownership is split the other way round:
//
//  * the chunks belong to one depot per type (magazine_depot.hpp) that is
//    constant-initialised and never destroyed, so it is usable before any
//    constructor and after every destructor of the program;
//  * each thread only caches free slots (two magazines: arrays of pointers
//    to free objects, magazine_depot.hpp), in a plain thread_local with a
//    trivial destructor, so it too stays readable while the thread's other
//    thread_locals and, for the main thread, the program's statics are
//    destroyed;
//  * a small exit hook, registered on the thread's first slow path, gives
//    the cached slots back to the depot when the thread exits and switches
//    the thread to "exited": from then on its frees and allocations go to
//    the depot one by one, under the depot's lock.
//
// So a node outlives the thread that allocated it; freeing it on any thread
// makes it reusable there (or, through the depot, by every thread); a
// container destroyed during static destruction frees into the depot.
// Memory is bounded by the peak number of live objects plus two magazines
// per thread; it is never returned to the general allocator.
#ifndef STRATA_PER_TYPE_POOL_HPP
#define STRATA_PER_TYPE_POOL_HPP

#include <strata/batch_depot.hpp>  // batch_size_for
#include <strata/magazine_depot.hpp>
#include <strata/object_pool.hpp>  // pool_chunk_bytes

#include <cstddef>
#include <cstdint>
#include <utility>

namespace strata::detail {

// Size and Alignment describe the objects; Tag makes the pool per type.
template <class Tag, std::size_t Size, std::size_t Alignment>
class per_type_pool {
 public:
  // Fast paths: one branch each. "Not set up", "exited", "magazine empty"
  // and "magazine full" all look like count == 0 / count == limit.
  static void* allocate() {
    thread_cache& c = cache_;
    if (c.count != 0) [[likely]] return c.items[--c.count];
    return allocate_slow();
  }

  static void deallocate(void* p) noexcept {
    thread_cache& c = cache_;
    if (c.count < c.limit) [[likely]] {
      c.items[c.count++] = p;
      return;
    }
    deallocate_slow(p);
  }

  // For tests and statistics.
  static std::size_t chunk_count() noexcept { return depot_.chunk_count(); }
  static bool owns(const void* p) noexcept { return depot_.owns(p); }
  static std::size_t slot_size() noexcept { return depot_.slot_size(); }

 private:
  enum class phase : std::uint8_t { fresh, active, exited };

  // The loaded magazine's items and count are mirrored here so that the
  // fast path reads one thread_local, not a magazine through a pointer;
  // loaded->count is brought up to date whenever the magazines move.
  struct thread_cache {
    void** items;
    std::uint32_t count;
    std::uint32_t limit;  // capacity while active, 0 otherwise
    magazine* loaded;
    magazine* previous;  // always empty or full
    phase state;
  };

  static constexpr std::size_t slot_bytes = round_up(Size == 0 ? 1 : Size, Alignment < alignof(void*) ? alignof(void*) : Alignment);
  static constexpr std::uint32_t capacity = batch_size_for(slot_bytes);

  // Registered on a thread's first slow path; its destructor runs at thread
  // exit (before the statics, for the main thread).
  struct exit_hook {
    exit_hook() noexcept = default;
    exit_hook(const exit_hook&) = delete;
    exit_hook& operator=(const exit_hook&) = delete;
    ~exit_hook() {
      thread_cache& c = cache_;
      c.loaded->count = c.count;
      depot_.absorb(c.loaded);
      depot_.absorb(c.previous);
      c = thread_cache{nullptr, 0, 0, nullptr, nullptr, phase::exited};
    }
  };

  // Throws std::bad_alloc if the magazines cannot be made.
  static void set_up(thread_cache& c) {
    magazine* a = depot_.new_empty();
    magazine* b = depot_.new_empty();  // if this throws, `a` stays in the depot's list
    static thread_local exit_hook hook;  // constructed (and registered) once per thread
    (void)hook;
    c = thread_cache{a->items(), 0, capacity, a, b, phase::active};
  }

  static void load(thread_cache& c, magazine* m) noexcept {
    c.loaded = m;
    c.items = m->items();
    c.count = m->count;
  }

  [[gnu::noinline]] static void* allocate_slow() {
    thread_cache& c = cache_;
    if (c.state == phase::exited) return depot_.take_one();
    if (c.state == phase::fresh) set_up(c);
    // `loaded` is empty.
    if (c.previous->count != 0) {
      magazine* empty = c.loaded;
      empty->count = 0;
      load(c, c.previous);
      c.previous = empty;
    } else {
      c.loaded->count = 0;
      load(c, depot_.exchange_for_full(c.loaded));
    }
    return c.items[--c.count];
  }

  [[gnu::noinline]] static void deallocate_slow(void* p) noexcept {
    thread_cache& c = cache_;
    if (c.state == phase::exited) return depot_.give_one(p);
    if (c.state == phase::fresh) {
      // This thread frees before it ever allocated (a node from another
      // thread). Set up its cache; if that fails the object goes to the
      // depot instead.
      try {
        set_up(c);
      } catch (...) {
        return depot_.give_one(p);
      }
    } else {
      // `loaded` is full.
      c.loaded->count = c.count;
      if (c.previous->count == 0) {
        magazine* full = c.loaded;
        load(c, c.previous);
        c.previous = full;
      } else {
        magazine* empty = depot_.exchange_for_empty(c.previous);  // never allocates
        c.previous = c.loaded;
        load(c, empty);
      }
    }
    c.items[c.count++] = p;
  }

  // constinit: initialised before any dynamic initialiser runs; trivially
  // destructible: no destructor is ever registered for it.
  static inline constinit magazine_depot depot_{Size, Alignment, pool_chunk_bytes<Tag>, nullptr, capacity};
  static inline constinit thread_local thread_cache cache_{nullptr, 0, 0, nullptr, nullptr, phase::fresh};
};

}  // namespace strata::detail

#endif
