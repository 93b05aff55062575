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
// object's storage (no overhead). The lock-free policy keeps the link in a
// word of its own before the object, because a concurrent pop may read the
// link of a slot another thread has just been given (see tagged_stack.hpp).
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

// A free list under a lock; the link overlays the object.
template <class Lock>
class locked_free_list {
 public:
  static constexpr std::size_t link_bytes = 0;  // link inside the object

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

// The lock-free list; the slot's first word is the link, the object follows.
class lock_free_list {
 public:
  static constexpr std::size_t link_bytes = sizeof(tagged_node);

  void* pop() noexcept { return stack_.pop(); }
  void push(void* slot) noexcept { stack_.push(static_cast<tagged_node*>(slot)); }
  void push_run(char* first, std::size_t stride, std::size_t count) noexcept {
    for (std::size_t i = 0; i < count; ++i)
      ::new (first + i * stride) tagged_node{};
    for (std::size_t i = 0; i + 1 < count; ++i)
      reinterpret_cast<tagged_node*>(first + i * stride)
          ->next.store(reinterpret_cast<tagged_node*>(first + (i + 1) * stride), std::memory_order_relaxed);
    stack_.push_chain(reinterpret_cast<tagged_node*>(first),
                      reinterpret_cast<tagged_node*>(first + (count - 1) * stride));
  }

 private:
  tagged_stack stack_;
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
        object_offset_(detail::round_up(free_list::link_bytes, align_)),
        slot_size_(detail::round_up(object_offset_ + (object_size < sizeof(void*) ? sizeof(void*) : object_size), align_)),
        header_bytes_(detail::round_up(sizeof(chunk_header), align_)),
        slots_per_chunk_(chunk_bytes > header_bytes_ + slot_size_ ? (chunk_bytes - header_bytes_) / slot_size_ : 1),
        chunk_bytes_(header_bytes_ + slots_per_chunk_ * slot_size_ + (detail::pool_checks_enabled ? slots_per_chunk_ : 0)) {}

  concurrent_pool(const concurrent_pool&) = delete;
  concurrent_pool& operator=(const concurrent_pool&) = delete;

  // Every object must have been deallocated (or is abandoned); frees all chunks.
  ~concurrent_pool() {
    chunk_header* c = chunks_.load(std::memory_order_acquire);
    while (c != nullptr) {
      chunk_header* next = c->next;
      detail::deallocate_bytes(c, chunk_bytes_, chunk_align());
      c = next;
    }
  }

  // Throws std::bad_alloc.
  [[nodiscard]] void* allocate() {
    void* slot = free_.pop();
    if (slot == nullptr) [[unlikely]] slot = allocate_slow();
    if constexpr (detail::pool_checks_enabled) mark(slot, true);
    return static_cast<char*>(slot) + object_offset_;
  }

  void deallocate(void* p) noexcept {
    if (p == nullptr) return;
    void* slot = static_cast<char*>(p) - object_offset_;
    if constexpr (detail::pool_checks_enabled) mark(slot, false);
    free_.push(slot);
  }

  std::size_t slot_size() const noexcept { return slot_size_; }
  std::size_t chunk_count() const noexcept { return chunk_count_.load(std::memory_order_relaxed); }

 private:
  struct chunk_header {
    chunk_header* next;
  };

  std::size_t chunk_align() const noexcept { return align_ < alignof(chunk_header) ? alignof(chunk_header) : align_; }

  [[gnu::noinline]] void* allocate_slow() {
    std::lock_guard guard(grow_lock_);
    // Another thread may have grown the pool while this one waited.
    if (void* slot = free_.pop()) return slot;
    void* memory = detail::allocate_bytes(chunk_bytes_, chunk_align());
    auto* header = ::new (memory) chunk_header{chunks_.load(std::memory_order_relaxed)};
    char* first = static_cast<char*>(memory) + header_bytes_;
    if constexpr (detail::pool_checks_enabled) {
      for (std::size_t i = 0; i < slots_per_chunk_; ++i)
        ::new (states(header) + i) std::atomic<unsigned char>(0);
    }
    // Publish the chunk before any of its slots can be handed out (checks walk the list).
    chunks_.store(header, std::memory_order_release);
    chunk_count_.fetch_add(1, std::memory_order_relaxed);
    // Keep the first slot for the caller, give the rest to everybody.
    if (slots_per_chunk_ > 1) free_.push_run(first + slot_size_, slot_size_, slots_per_chunk_ - 1);
    if constexpr (free_list::link_bytes != 0) ::new (first) detail::tagged_node{};
    return first;
  }

  // ---- checking mode: one atomic state byte per slot, after the slots ----
  std::atomic<unsigned char>* states(chunk_header* c) const noexcept {
    return reinterpret_cast<std::atomic<unsigned char>*>(reinterpret_cast<char*>(c) + header_bytes_ +
                                                         slots_per_chunk_ * slot_size_);
  }

  void mark(void* slot, bool allocating) noexcept {
    auto addr = reinterpret_cast<std::uintptr_t>(slot);
    for (chunk_header* c = chunks_.load(std::memory_order_acquire); c != nullptr; c = c->next) {
      auto begin = reinterpret_cast<std::uintptr_t>(c) + header_bytes_;
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
  std::size_t object_offset_;
  std::size_t slot_size_;
  std::size_t header_bytes_;
  std::size_t slots_per_chunk_;
  std::size_t chunk_bytes_;
  // Written on every operation: a cache line of its own.
  alignas(64) free_list free_;
  alignas(64) std::mutex grow_lock_;
  std::atomic<chunk_header*> chunks_{nullptr};
  std::atomic<std::size_t> chunk_count_{0};
};

}  // namespace strata

#endif
