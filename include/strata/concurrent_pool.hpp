// strata/concurrent_pool.hpp — one fixed-size pool shared by threads, with
// the synchronisation chosen by a policy (seed 003):
//
//   concurrent_pool<mutex_policy>      free list under a std::mutex
//   concurrent_pool<spinlock_policy>   free list under strata::spinlock (TTAS)
//   concurrent_pool<lock_free_policy>  tagged Treiber stack (tagged_stack.hpp)
//
// (thread_cached_pool.hpp is the fourth variant: per-thread free lists.)
//
// Chunks of about `chunk_bytes` come from the general allocator and are
// kept until the pool is destroyed: in particular no chunk is unmapped while
// a lock-free pop may still read a link inside it. Growing takes a mutex
// (it allocates, which is not lock-free anyway); the steady state takes only
// the policy's synchronisation.
//
// Slot layout: the locked policies overlay the free-list link on the
// object's storage (no overhead). The lock-free policy keeps each slot's
// link in a word of its own, in an array at the start of the chunk, because
// a concurrent pop may read the link of a slot another thread has just been
// given (see tagged_stack.hpp), and so that frees and allocations never
// touch the objects' memory (lock_free_list below).
#ifndef STRATA_CONCURRENT_POOL_HPP
#define STRATA_CONCURRENT_POOL_HPP

#include <strata/general_memory.hpp>
#include <strata/pool_checks.hpp>
#include <strata/spinlock.hpp>
#include <strata/tagged_stack.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>

namespace strata {

struct mutex_policy {};
struct spinlock_policy {};
struct lock_free_policy {};

namespace detail {

// Where a chunk keeps what: [header | cells: cell_bytes per slot | slots |
// checking-mode state bytes]. Chunks are `span` bytes aligned to `span`, so
// any address inside one finds the chunk's start by masking.
struct chunk_geometry {
  std::size_t span = 0;          // power of two
  std::size_t cells_offset = 0;
  std::size_t slots_offset = 0;
  std::size_t slot_size = 0;
};

// A free list under a lock; the link overlays the object.
template <class Lock>
class locked_free_list {
 public:
  static constexpr std::size_t cell_bytes = 0;  // link inside the object

  void set_geometry(const chunk_geometry&) noexcept {}
  void init_cells(char*, std::size_t) noexcept {}

  void* pop() noexcept {
    std::lock_guard guard(lock_);
    link* n = head_;
    if (n != nullptr) head_ = n->next;
    return n;
  }
  void push(void* p) noexcept {
    auto* n = static_cast<link*>(p);
    std::lock_guard guard(lock_);
    n->next = head_;
    head_ = n;
  }
  // Links `count` slots starting at `first`, `stride` bytes apart, and pushes them.
  void push_run(char* first, std::size_t stride, std::size_t count) noexcept {
    for (std::size_t i = 0; i + 1 < count; ++i)
      reinterpret_cast<link*>(first + i * stride)->next = reinterpret_cast<link*>(first + (i + 1) * stride);
    auto* last = reinterpret_cast<link*>(first + (count - 1) * stride);
    std::lock_guard guard(lock_);
    last->next = head_;
    head_ = reinterpret_cast<link*>(first);
  }

 private:
  struct link {
    link* next;
  };
  Lock lock_;
  link* head_ = nullptr;
};

// The lock-free list. Its nodes are not the slots but *cells*: one link
// word per slot in an array at the start of the slot's chunk. So a free
// writes only the cell, never the object's memory, and an allocation reads
// only the cell: in seed 003's producer/consumer the object's cache line
// stays with the thread that uses it, and 8 consecutive slots share one
// line of links, where a link inside each object cost one line transfer
// per allocation. Slot <-> cell is a mask, a subtraction and a multiply.
class lock_free_list {
 public:
  static constexpr std::size_t cell_bytes = sizeof(tagged_node);

  void set_geometry(const chunk_geometry& g) noexcept {
    g_ = g;
    // ceil(2^64 / slot_size): (offset * it) >> 64 is offset / slot_size,
    // exactly, for every offset that is a multiple of slot_size (< 2^32).
    reciprocal_ = ~std::uint64_t{0} / g.slot_size + 1;
  }

  // Constructs the cells of a fresh chunk's `count` slots.
  void init_cells(char* chunk, std::size_t count) noexcept {
    auto* cells = reinterpret_cast<tagged_node*>(chunk + g_.cells_offset);
    for (std::size_t i = 0; i < count; ++i) ::new (cells + i) tagged_node{};
  }

  void* pop() noexcept {
    tagged_node* cell = stack_.pop();
    return cell != nullptr ? slot_of(cell) : nullptr;
  }
  void push(void* slot) noexcept { stack_.push(cell_of(slot)); }
  void push_run(char* first, std::size_t /*stride*/, std::size_t count) noexcept {
    tagged_node* cells = cell_of(first);
    for (std::size_t i = 0; i + 1 < count; ++i) cells[i].next.store(cells + i + 1, std::memory_order_relaxed);
    stack_.push_chain(cells, cells + count - 1);
  }

 private:
  std::uintptr_t chunk_of(const void* p) const noexcept {
    return reinterpret_cast<std::uintptr_t>(p) & ~(g_.span - 1);
  }
  tagged_node* cell_of(void* slot) const noexcept {
    std::uintptr_t chunk = chunk_of(slot);
    std::uint64_t offset = reinterpret_cast<std::uintptr_t>(slot) - chunk - g_.slots_offset;
    auto index = static_cast<std::size_t>((static_cast<unsigned __int128>(offset) * reciprocal_) >> 64);
    return reinterpret_cast<tagged_node*>(chunk + g_.cells_offset) + index;
  }
  void* slot_of(tagged_node* cell) const noexcept {
    std::uintptr_t chunk = chunk_of(cell);
    std::size_t index = (reinterpret_cast<std::uintptr_t>(cell) - chunk - g_.cells_offset) / sizeof(tagged_node);
    return reinterpret_cast<void*>(chunk + g_.slots_offset + index * g_.slot_size);
  }

  tagged_stack stack_;  // first: the line every operation writes
  chunk_geometry g_;
  std::uint64_t reciprocal_ = 0;
};

template <class Policy> struct free_list_for;
template <> struct free_list_for<mutex_policy> { using type = locked_free_list<std::mutex>; static constexpr const char* name = "mutex"; };
template <> struct free_list_for<spinlock_policy> { using type = locked_free_list<spinlock>; static constexpr const char* name = "spinlock"; };
template <> struct free_list_for<lock_free_policy> { using type = lock_free_list; static constexpr const char* name = "lock_free"; };

}  // namespace detail

template <class Policy>
class concurrent_pool {
  using free_list = typename detail::free_list_for<Policy>::type;

 public:
  static constexpr const char* policy_name = detail::free_list_for<Policy>::name;

  // Objects of `object_size` bytes aligned to `alignment` (a power of two).
  explicit concurrent_pool(std::size_t object_size, std::size_t alignment = alignof(std::max_align_t),
                           std::size_t chunk_bytes = 64 * 1024)
      : align_(alignment < alignof(void*) ? alignof(void*) : alignment),
        slot_size_(detail::round_up(object_size < sizeof(void*) ? sizeof(void*) : object_size, align_)),
        cells_offset_(detail::round_up(sizeof(chunk_header), 64)),
        slots_per_chunk_(slots_for(chunk_bytes)),
        slots_offset_(detail::round_up(cells_offset_ + slots_per_chunk_ * free_list::cell_bytes,
                                       align_ < 64 ? 64 : align_)),
        chunk_bytes_(slots_offset_ + slots_per_chunk_ * slot_size_ + (detail::pool_checks_enabled ? slots_per_chunk_ : 0)),
        chunk_align_(chunk_alignment()) {
    free_.set_geometry({chunk_align_, cells_offset_, slots_offset_, slot_size_});
  }

  concurrent_pool(const concurrent_pool&) = delete;
  concurrent_pool& operator=(const concurrent_pool&) = delete;

  // Every object must have been deallocated (or is abandoned); frees all chunks.
  ~concurrent_pool() {
    chunk_header* c = chunks_.load(std::memory_order_acquire);
    while (c != nullptr) {
      chunk_header* next = c->next;
      detail::deallocate_bytes(c, chunk_bytes_, chunk_align_);
      c = next;
    }
  }

  // Throws std::bad_alloc.
  [[nodiscard]] void* allocate() {
    void* slot = free_.pop();
    if (slot == nullptr) [[unlikely]] slot = allocate_slow();
    if constexpr (detail::pool_checks_enabled) mark(slot, true);
    return slot;
  }

  void deallocate(void* p) noexcept {
    if (p == nullptr) return;
    if constexpr (detail::pool_checks_enabled) mark(p, false);
    free_.push(p);
  }

  std::size_t slot_size() const noexcept { return slot_size_; }
  std::size_t chunk_count() const noexcept { return chunk_count_.load(std::memory_order_relaxed); }

 private:
  struct chunk_header {
    chunk_header* next;
  };

  // Slots per chunk of about `chunk_bytes`: each slot costs its size and its
  // cell (and a state byte in checking mode); the header and alignment
  // padding come off first.
  std::size_t slots_for(std::size_t chunk_bytes) const noexcept {
    std::size_t fixed = cells_offset_ + 2 * (align_ < 64 ? 64 : align_);
    std::size_t per_slot = slot_size_ + free_list::cell_bytes + (detail::pool_checks_enabled ? 1 : 0);
    return chunk_bytes > fixed + per_slot ? (chunk_bytes - fixed) / per_slot : 1;
  }

  // The lock-free list finds a slot's cell by masking the slot's address:
  // its chunks are aligned to their size rounded up to a power of two.
  std::size_t chunk_alignment() const noexcept {
    std::size_t a = align_ < alignof(chunk_header) ? alignof(chunk_header) : align_;
    if constexpr (free_list::cell_bytes != 0) {
      std::size_t span = 1;
      while (span < chunk_bytes_) span <<= 1;
      if (span > a) a = span;
    }
    return a;
  }

  [[gnu::noinline]] void* allocate_slow() {
    std::lock_guard guard(grow_lock_);
    // Another thread may have grown the pool while this one waited.
    if (void* slot = free_.pop()) return slot;
    void* memory = detail::allocate_bytes(chunk_bytes_, chunk_align_);
    auto* header = ::new (memory) chunk_header{chunks_.load(std::memory_order_relaxed)};
    free_.init_cells(static_cast<char*>(memory), slots_per_chunk_);
    char* first = static_cast<char*>(memory) + slots_offset_;
    if constexpr (detail::pool_checks_enabled) {
      for (std::size_t i = 0; i < slots_per_chunk_; ++i)
        ::new (states(header) + i) std::atomic<unsigned char>(0);
    }
    // Publish the chunk before any of its slots can be handed out (checks walk the list).
    chunks_.store(header, std::memory_order_release);
    chunk_count_.fetch_add(1, std::memory_order_relaxed);
    // Keep the first slot for the caller, give the rest to everybody.
    if (slots_per_chunk_ > 1) free_.push_run(first + slot_size_, slot_size_, slots_per_chunk_ - 1);
    return first;
  }

  // ---- checking mode: one atomic state byte per slot, after the slots ----
  std::atomic<unsigned char>* states(chunk_header* c) const noexcept {
    return reinterpret_cast<std::atomic<unsigned char>*>(reinterpret_cast<char*>(c) + slots_offset_ +
                                                         slots_per_chunk_ * slot_size_);
  }

  void mark(void* slot, bool allocating) noexcept {
    auto addr = reinterpret_cast<std::uintptr_t>(slot);
    for (chunk_header* c = chunks_.load(std::memory_order_acquire); c != nullptr; c = c->next) {
      auto begin = reinterpret_cast<std::uintptr_t>(c) + slots_offset_;
      if (addr < begin || addr >= begin + slots_per_chunk_ * slot_size_) continue;
      if ((addr - begin) % slot_size_ != 0)
        detail::pool_check_failed("concurrent_pool", this, "pointer is not an object start", slot);
      unsigned char before = states(c)[(addr - begin) / slot_size_].exchange(allocating ? 1 : 0, std::memory_order_acq_rel);
      if (allocating && before != 0)
        detail::pool_check_failed("concurrent_pool", this, "object handed out twice", slot);
      if (!allocating && before == 0)
        detail::pool_check_failed("concurrent_pool", this, "double free", slot);
      return;
    }
    detail::pool_check_failed("concurrent_pool", this, "pointer from another pool", slot);
  }

  // Read-only after construction: shared by every core's cache.
  std::size_t align_;
  std::size_t slot_size_;
  std::size_t cells_offset_;
  std::size_t slots_per_chunk_;
  std::size_t slots_offset_;
  std::size_t chunk_bytes_;
  std::size_t chunk_align_;
  // Written on every operation: a cache line of its own.
  alignas(64) free_list free_;
  alignas(64) std::mutex grow_lock_;
  std::atomic<chunk_header*> chunks_{nullptr};
  std::atomic<std::size_t> chunk_count_{0};
};

}  // namespace strata

#endif
