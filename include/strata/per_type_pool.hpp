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
//  * each thread only caches free slots (two batches, as free lists threaded
//    through the slots: magazine_cache in batch_depot.hpp), in a plain
//    thread_local with a trivial destructor, so it too stays readable while
//    the thread's other thread_locals and, for the main thread, the
//    program's statics are destroyed;
//  * a small exit hook, registered on the thread's first slow path, gives
//    the cached slots back to the depot when the thread exits and switches
//    the thread to "exited": from then on its frees and allocations go to
//    the depot one by one, under the depot's lock.
//
// So a node outlives the thread that allocated it; freeing it on any thread
// makes it reusable there (or, through the depot, by every thread); a
// container destroyed during static destruction frees into the depot.
// Memory is bounded by the peak number of live objects plus two batches per
// thread; it is never returned to the general allocator.
//
// Why free lists threaded through the slots and not magazines (arrays of
// pointers, magazine_depot.hpp): a node container frees a node it has just
// unlinked, so the node's cache line is already in L1 and the push writes
// nothing else; the next allocation reads the link of a slot it is about
// to write anyway. A pointer array adds 8 bytes of cache footprint per
// cached object, written on every free and read on every allocation:
// callgrind's cache simulation of seed 000's unordered_set counted about
// 0.3 more L1 misses per operation with magazines (docs/pools.md). Batches
// still move between a thread and the depot in O(1) (a chain's head).
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
  // Fast paths: one branch each. "Not set up" and "exited" look like an
  // empty list (allocate) and a full one (deallocate), so the fast paths
  // need not test the thread's state.
  static void* allocate() {
    if (free_node* n = cache_.slots.try_pop()) [[likely]] return n;
    return allocate_slow();
  }

  static void deallocate(void* p) noexcept {
    if (cache_.slots.try_push(p)) [[likely]] return;
    deallocate_slow(p);
  }

  // For tests and statistics.
  static std::size_t chunk_count() noexcept { return depot_.chunk_count(); }
  static bool owns(const void* p) noexcept { return depot_.owns(p); }
  static std::size_t slot_size() noexcept { return depot_.slot_size(); }

 private:
  enum class phase : std::uint8_t { fresh, active, exited };

  struct thread_cache {
    magazine_cache slots;  // empty and with no room unless active
    phase state;
  };

  // Registered on a thread's first slow path; its destructor runs at thread
  // exit (before the statics, for the main thread).
  struct exit_hook {
    exit_hook() noexcept = default;
    exit_hook(const exit_hook&) = delete;
    exit_hook& operator=(const exit_hook&) = delete;
    ~exit_hook() {
      cache_.slots.flush(depot_);  // leaves the list empty and without room
      cache_.state = phase::exited;
    }
  };

  // Takes no memory: the cache starts empty and fills from the depot.
  static void set_up() noexcept {
    static thread_local exit_hook hook;  // constructed (and registered) once per thread
    (void)hook;
    cache_.slots.room = depot_.batch_size();
    cache_.state = phase::active;
  }

  [[gnu::noinline]] static void* allocate_slow() {
    thread_cache& c = cache_;
    if (c.state == phase::exited) return depot_.take_one();
    if (c.state == phase::fresh) set_up();
    return c.slots.pop_refill(depot_);  // the list is empty; throws std::bad_alloc
  }

  [[gnu::noinline]] static void deallocate_slow(void* p) noexcept {
    thread_cache& c = cache_;
    if (c.state == phase::exited) return depot_.give_one(static_cast<free_node*>(p));
    if (c.state == phase::fresh) {
      // This thread frees before it ever allocated (a node from another
      // thread): the object starts its cache.
      set_up();
      c.slots.try_push(p);
      return;
    }
    c.slots.push_spill(depot_, p);  // the list holds a full batch
  }

  // Slots are aligned to the largest power of two dividing their size (up
  // to a cache line), as strata_malloc aligns power-of-two blocks: a 16-byte
  // node then never straddles two cache lines (at the depot's default
  // 8-byte alignment one in four did, after the chunk's 8-byte header).
  // This costs no memory: the slot size stays what it is.
  static constexpr std::size_t requested_slot_bytes = depot_slot_size(Size, depot_slot_align(Alignment));
  static constexpr std::size_t natural_alignment = requested_slot_bytes & (~requested_slot_bytes + 1);
  static constexpr std::size_t slot_alignment =
      Alignment > 64 ? Alignment : natural_alignment > 64 ? 64 : natural_alignment;

  // constinit: initialised before any dynamic initialiser runs; trivially
  // destructible: no destructor is ever registered for either.
  static inline constinit batch_depot depot_{Size, slot_alignment, pool_chunk_bytes<Tag>};
  static inline constinit thread_local thread_cache cache_{{}, phase::fresh};
};

}  // namespace strata::detail

#endif
