// strata/per_type_pool.hpp — one immortal pool per type, cached per thread.
//
// The memory behind pool_allocator<T> and pooled<T>. Seed 000 gives every
// thread its own thread_local pool that frees its chunks at thread exit;
// a global container (or another thread) still holding nodes then touches
// freed memory. Here ownership is split the other way round:
//
//  * the chunks belong to one depot per type that is constant-initialised
//    and never destroyed, so it is usable before any constructor and after
//    every destructor of the program;
//  * each thread only caches free slots (two magazines or two batches, see
//    below), in a plain thread_local with a trivial destructor, so it too
//    stays readable while the thread's other thread_locals and, for the
//    main thread, the program's statics are destroyed;
//  * a small exit hook, registered on the thread's first slow path, gives
//    the cached slots back to the depot when the thread exits and switches
//    the thread to "exited": from then on its frees and allocations go to
//    the depot one by one, under the depot's lock.
//
// So a node outlives the thread that allocated it; freeing it on any thread
// makes it reusable there (or, through the depot, by every thread); a
// container destroyed during static destruction frees into the depot.
// Memory is bounded by the peak number of live objects plus two magazines
// (batches) per thread; it is never returned to the general allocator.
//
// Two ways to cache free slots, chosen by the user of the pool:
//  * magazine_slots (pooled<T>): arrays of pointers to free slots
//    (magazine_depot.hpp). The pool never reads or writes a free slot, so
//    `new` of an object that is not touched yet, or that was freed on
//    another core, does not wait for its cache line.
//  * free_list_slots (pool_allocator<T>): free lists threaded through the
//    slots (so a slot holds at least two pointers), traded with the depot
//    as whole chains (batch_depot.hpp). A node
//    container writes a node right after allocating it and has just read
//    it (to unlink it) when it frees it, so the link costs no cache line of
//    its own, where a pointer array adds 8 bytes per cached object, written
//    on every free and read on every allocation (docs/pools.md has the
//    callgrind cache simulation and the timings).
#ifndef STRATA_PER_TYPE_POOL_HPP
#define STRATA_PER_TYPE_POOL_HPP

#include <strata/batch_depot.hpp>
#include <strata/magazine_depot.hpp>
#include <strata/object_pool.hpp>  // pool_chunk_bytes

#include <cstddef>
#include <cstdint>

namespace strata::detail {

// Slots aligned to the largest power of two that divides their size, up to
// a cache line (as strata_malloc aligns power-of-two blocks): a 16-byte node
// then never straddles two cache lines (after a chunk's 8-byte header, one
// in four did). The slot size, hence the memory, stays the same.
constexpr std::size_t natural_slot_alignment(std::size_t slot_bytes, std::size_t alignment) noexcept {
  const std::size_t lowest_bit = slot_bytes & (~slot_bytes + 1);
  const std::size_t natural = lowest_bit > 64 ? 64 : lowest_bit;
  return natural > alignment ? natural : alignment;
}

// Thread cache of pointer arrays. The loaded magazine's items and count are
// mirrored here so that the fast path reads one thread_local, not a
// magazine through a pointer; loaded->count is brought up to date whenever
// the magazines move. `limit` is the capacity while active, 0 otherwise, so
// "not set up" and "exited" look like an empty and a full magazine.
struct magazine_slots {
  using depot_type = magazine_depot;

  static constexpr depot_type make_depot(std::size_t size, std::size_t alignment, std::size_t chunk_bytes) noexcept {
    const std::size_t slot = round_up(size == 0 ? 1 : size, alignment < alignof(void*) ? alignof(void*) : alignment);
    return depot_type{size, natural_slot_alignment(slot, alignment), chunk_bytes, nullptr, batch_size_for(slot)};
  }
  static void give_one(depot_type& depot, void* p) noexcept { depot.give_one(p); }

  void** items = nullptr;
  std::uint32_t count = 0;
  std::uint32_t limit = 0;
  magazine* loaded = nullptr;
  magazine* previous = nullptr;  // always empty or full

  bool can_pop() const noexcept { return count != 0; }
  void* pop() noexcept { return items[--count]; }
  bool can_push() const noexcept { return count < limit; }
  void push(void* p) noexcept { items[count++] = p; }

  // Throws std::bad_alloc if the magazines cannot be made.
  void activate(depot_type& depot) {
    magazine* a = depot.new_empty();
    magazine* b = depot.new_empty();  // if this throws, `a` stays in the depot's list
    *this = magazine_slots{a->items(), 0, depot.capacity(), a, b};
  }

  // `loaded` is empty. Throws std::bad_alloc, leaving the cache as it was.
  void* pop_refill(depot_type& depot) {
    if (previous->count != 0) {
      magazine* empty = loaded;
      empty->count = 0;
      load(previous);
      previous = empty;
    } else {
      loaded->count = 0;
      load(depot.exchange_for_full(loaded));
    }
    return pop();
  }

  // `loaded` is full.
  void push_spill(depot_type& depot, void* p) noexcept {
    loaded->count = count;
    if (previous->count == 0) {
      magazine* full = loaded;
      load(previous);
      previous = full;
    } else {
      magazine* empty = depot.exchange_for_empty(previous);  // never allocates
      previous = loaded;
      load(empty);
    }
    push(p);
  }

  // Gives both magazines back; the cache is left without room.
  void flush(depot_type& depot) noexcept {
    loaded->count = count;
    depot.absorb(loaded);
    depot.absorb(previous);
    *this = magazine_slots{};
  }

 private:
  void load(magazine* m) noexcept {
    loaded = m;
    items = m->items();
    count = m->count;
  }
};

// Thread cache of free lists: `loaded` (at most a batch) serves allocations
// and takes frees; `spare` is empty or exactly one full batch, so a thread
// that alternates around a batch boundary does not trade with the depot
// every time. `room` is 0 unless active, so "not set up" and "exited" look
// like an empty and a full list.
//
// Prefetch hint: a push stores in the node's second word (free_node::
// next_batch, which the depot uses only for the first node of a batch it
// holds) the node two places down the list, and a pop prefetches it. So a
// pop reads a line it asked for two pops earlier, and popping a list whose
// nodes went cold (the program did other work since they were freed) does
// not wait for one cache miss after the other, as a plain free list does.
// The hint is only ever prefetched, never dereferenced, so a stale one
// (a node that came from the depot or a fresh chunk) costs nothing but a
// useless prefetch.
struct free_list_slots {
  using depot_type = batch_depot;

  static constexpr depot_type make_depot(std::size_t size, std::size_t alignment, std::size_t chunk_bytes) noexcept {
    const std::size_t slot = depot_slot_size(size, depot_slot_align(alignment));
    return depot_type{size, natural_slot_alignment(slot, alignment), chunk_bytes};
  }
  static void give_one(depot_type& depot, void* p) noexcept { depot.give_one(static_cast<free_node*>(p)); }

  // The batch bookkeeping (loaded + spare, trades with the depot) is
  // batch_depot's magazine_cache; only the fast paths differ (the hint).
  magazine_cache lists;

  bool can_pop() const noexcept { return lists.loaded != nullptr; }
  void* pop() noexcept {
    free_node* n = lists.loaded;
    lists.loaded = n->next;
    ++lists.room;
    __builtin_prefetch(n->next_batch);  // the hint: the node after `loaded`
    return n;
  }
  bool can_push() const noexcept { return lists.room != 0; }
  void push(void* p) noexcept {
    auto* n = static_cast<free_node*>(p);
    free_node* top = lists.loaded;
    n->next = top;
    n->next_batch = top != nullptr ? top->next : nullptr;  // top: a recent push or prefetched: usually in L1
    lists.loaded = n;
    --lists.room;
  }

  // Takes no memory: the lists start empty and fill from the depot.
  void activate(depot_type& depot) noexcept { lists.room = depot.batch_size(); }
  // `loaded` is empty. Throws std::bad_alloc, leaving the cache as it was.
  void* pop_refill(depot_type& depot) { return lists.pop_refill(depot); }
  // `loaded` holds a full batch: it becomes the spare (an older spare goes to the depot).
  void push_spill(depot_type& depot, void* p) noexcept { lists.push_spill(depot, p); }
  // Gives both lists back; the cache is left empty and without room.
  void flush(depot_type& depot) noexcept { lists.flush(depot); }
};

// Size and Alignment describe the objects; Tag makes the pool per type;
// Slots is magazine_slots or free_list_slots.
template <class Tag, std::size_t Size, std::size_t Alignment, class Slots = magazine_slots>
class per_type_pool {
 public:
  // Fast paths: one branch each ("not set up" and "exited" take the slow
  // path through the same test as an empty or full cache).
  static void* allocate() {
    Slots& s = cache_.slots;
    if (s.can_pop()) [[likely]] return s.pop();
    return allocate_slow();
  }

  static void deallocate(void* p) noexcept {
    Slots& s = cache_.slots;
    if (s.can_push()) [[likely]] return s.push(p);
    deallocate_slow(p);
  }

  // For tests and statistics.
  static std::size_t chunk_count() noexcept { return depot_.chunk_count(); }
  static bool owns(const void* p) noexcept { return depot_.owns(p); }
  static std::size_t slot_size() noexcept { return depot_.slot_size(); }

 private:
  enum class phase : std::uint8_t { fresh, active, exited };

  struct thread_cache {
    Slots slots;
    phase state;
  };

  // Registered on a thread's first slow path; its destructor runs at thread
  // exit (before the statics, for the main thread).
  struct exit_hook {
    exit_hook() noexcept = default;
    exit_hook(const exit_hook&) = delete;
    exit_hook& operator=(const exit_hook&) = delete;
    ~exit_hook() {
      STRATA_POOL_STEP(cache_flush);
      cache_.slots.flush(depot_);
      cache_.state = phase::exited;
    }
  };

  // Throws std::bad_alloc if the cache cannot be made.
  static void set_up(thread_cache& c) {
    c.slots.activate(depot_);
    static thread_local exit_hook hook;  // constructed (and registered) once per thread
    (void)hook;
    c.state = phase::active;
  }

  [[gnu::noinline]] static void* allocate_slow() {
    thread_cache& c = cache_;
    if (c.state == phase::exited) return depot_.take_one();
    if (c.state == phase::fresh) set_up(c);
    return c.slots.pop_refill(depot_);  // the cache is empty
  }

  [[gnu::noinline]] static void deallocate_slow(void* p) noexcept {
    thread_cache& c = cache_;
    if (c.state == phase::exited) return Slots::give_one(depot_, p);
    if (c.state == phase::fresh) {
      // This thread frees before it ever allocated (a node from another
      // thread): the object starts its cache. If the cache cannot be made,
      // the object goes to the depot instead.
      try {
        set_up(c);
      } catch (...) {
        return Slots::give_one(depot_, p);
      }
      return c.slots.push(p);
    }
    c.slots.push_spill(depot_, p);  // the cache is full
  }

  // constinit: initialised before any dynamic initialiser runs; trivially
  // destructible: no destructor is ever registered for either.
  static inline constinit typename Slots::depot_type depot_ = Slots::make_depot(Size, Alignment, pool_chunk_bytes<Tag>);
  static inline constinit thread_local thread_cache cache_{{}, phase::fresh};
};

}  // namespace strata::detail

#endif
