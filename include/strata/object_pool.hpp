// strata/object_pool.hpp — a single-threaded pool of objects of one type.
//
// Memory comes in chunks of `pool_chunk_bytes<T>` bytes from the general
// allocator. Each chunk is an array of slots; a slot is a union of T's
// storage and a free-list link, so T's alignment holds whatever T's
// constructors are, and a free slot costs no extra memory. Free slots form
// one intrusive list; allocate and deallocate are a pop and a push (O(1), no
// lock, no syscall once the pool has grown to its working size). A new
// chunk is handed out with a bump pointer, so growing never walks a chunk.
//
// Chunks go back to the general allocator only when that is safe: in
// release() and in the destructor, and only while no object is live. A pool
// destroyed with live objects keeps its chunks (those objects may still be
// in use; the checking mode reports it as a leak and aborts instead).
//
// Not thread-safe: one pool per thread, or see concurrent_pool.hpp.
#ifndef STRATA_OBJECT_POOL_HPP
#define STRATA_OBJECT_POOL_HPP

#include <strata/general_memory.hpp>
#include <strata/pool_checks.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace strata {

// Bytes per chunk of an object_pool<T>. Specialise it for a type whose
// objects come in larger or smaller herds:
//   template <> inline constexpr std::size_t strata::pool_chunk_bytes<Big> = 1 << 20;
// A chunk always holds at least one object, so a T larger than this gets a
// chunk of one object (no chunk is ever "64 huge objects" by accident).
template <class T>
inline constexpr std::size_t pool_chunk_bytes = 16 * 1024;

template <class T>
class object_pool {
  static_assert(!std::is_reference_v<T> && !std::is_void_v<T>, "object_pool holds objects");

  union slot {
    T value;
    slot* next;
    slot() noexcept {}
    ~slot() {}
  };

  struct chunk_header {
    chunk_header* next;
    slot* first;
    std::size_t slot_count;
  };

  static constexpr std::size_t slot_align = std::max(alignof(slot), alignof(chunk_header));
  static constexpr std::size_t header_bytes = detail::round_up(sizeof(chunk_header), slot_align);

 public:
  using value_type = T;

  // Objects per chunk: as many as fit in pool_chunk_bytes<T>, at least one.
  static constexpr std::size_t slots_per_chunk =
      pool_chunk_bytes<T> > header_bytes + sizeof(slot)
          ? (pool_chunk_bytes<T> - header_bytes) / sizeof(slot)
          : 1;

  object_pool() noexcept = default;
  object_pool(const object_pool&) = delete;
  object_pool& operator=(const object_pool&) = delete;

  ~object_pool() {
    if (live_ != 0) {
      if constexpr (detail::pool_checks_enabled)
        detail::pool_check_failed("object_pool", this, "destroyed while objects are live (leak)",
                                  first_live_object());
      return;  // keep the chunks: the live objects may still be in use
    }
    free_chunks();
  }

  // Storage for one T (not constructed). Throws std::bad_alloc.
  [[nodiscard]] T* allocate() {
    slot* s = free_;
    if (s != nullptr) [[likely]] {
      free_ = s->next;
    } else {
      s = take_fresh_slot();
    }
    ++live_;
    if constexpr (detail::pool_checks_enabled) mark(s, true);
    detail::unpoison_slot(s, sizeof(slot));
    return std::addressof(s->value);
  }

  // Gives back storage from allocate() of this pool (object already destroyed).
  void deallocate(T* p) noexcept {
    if (p == nullptr) return;
    slot* s = reinterpret_cast<slot*>(p);  // pointer-interconvertible with the union
    if constexpr (detail::pool_checks_enabled) mark(s, false);
    s->next = free_;
    free_ = s;
    --live_;
    detail::poison_free_slot(s, sizeof(slot));
  }

  // allocate() + construct. If the constructor throws, the slot goes back
  // to the free list before the exception propagates.
  template <class... Args>
  [[nodiscard]] T* make(Args&&... args) {
    T* p = allocate();
    if constexpr (std::is_nothrow_constructible_v<T, Args...>) {
      return ::new (static_cast<void*>(p)) T(std::forward<Args>(args)...);
    } else {
      try {
        return ::new (static_cast<void*>(p)) T(std::forward<Args>(args)...);
      } catch (...) {
        deallocate(p);
        throw;
      }
    }
  }

  // Destroys and deallocates an object from make(). nullptr does nothing.
  void destroy(T* p) noexcept {
    if (p == nullptr) return;
    p->~T();
    deallocate(p);
  }

  // Objects handed out and not yet given back.
  std::size_t live() const noexcept { return live_; }
  // Chunks held (memory = chunks() * chunk_bytes()).
  std::size_t chunks() const noexcept { return chunk_count_; }
  static constexpr std::size_t chunk_bytes() noexcept { return chunk_allocation_bytes; }

  // Returns every chunk to the general allocator if no object is live.
  // Returns false (and keeps everything) otherwise.
  bool release() noexcept {
    if (live_ != 0) return false;
    free_chunks();
    return true;
  }

 private:
  static constexpr std::size_t state_bytes = detail::pool_checks_enabled ? slots_per_chunk : 0;
  static constexpr std::size_t chunk_allocation_bytes =
      header_bytes + slots_per_chunk * sizeof(slot) + state_bytes;

  slot* take_fresh_slot() {
    if (bump_ == bump_end_) add_chunk();
    return bump_++;
  }

  [[gnu::noinline]] void add_chunk() {
    void* memory = detail::allocate_bytes(chunk_allocation_bytes, slot_align);
    auto* header = ::new (memory) chunk_header{chunks_, nullptr, slots_per_chunk};
    header->first = reinterpret_cast<slot*>(static_cast<char*>(memory) + header_bytes);
    if constexpr (detail::pool_checks_enabled)
      std::memset(states(header), 0, slots_per_chunk);
    chunks_ = header;
    ++chunk_count_;
    bump_ = header->first;
    bump_end_ = header->first + slots_per_chunk;
  }

  void free_chunks() noexcept {
    while (chunks_ != nullptr) {
      chunk_header* next = chunks_->next;
      detail::unpoison_slot(chunks_, chunk_allocation_bytes);
      detail::deallocate_bytes(chunks_, chunk_allocation_bytes, slot_align);
      chunks_ = next;
    }
    free_ = nullptr;
    bump_ = bump_end_ = nullptr;
    chunk_count_ = 0;
  }

  // ---- checking mode: one state byte per slot, after the slots ----
  static unsigned char* states(chunk_header* c) noexcept {
    return reinterpret_cast<unsigned char*>(c->first + c->slot_count);
  }

  void mark(slot* s, bool allocating) noexcept {
    for (chunk_header* c = chunks_; c != nullptr; c = c->next) {
      auto addr = reinterpret_cast<std::uintptr_t>(s);
      auto begin = reinterpret_cast<std::uintptr_t>(c->first);
      if (addr < begin || addr >= begin + c->slot_count * sizeof(slot)) continue;
      if ((addr - begin) % sizeof(slot) != 0)
        detail::pool_check_failed("object_pool", this, "pointer is not an object start", s);
      unsigned char& state = states(c)[(addr - begin) / sizeof(slot)];
      if (!allocating && state == 0)
        detail::pool_check_failed("object_pool", this, "double free", s);
      if (allocating && state != 0)
        detail::pool_check_failed("object_pool", this, "object handed out twice", s);
      state = allocating ? 1 : 0;
      return;
    }
    detail::pool_check_failed("object_pool", this,
                              allocating ? "slot outside every chunk" : "pointer from another pool", s);
  }

  const void* first_live_object() noexcept {
    if constexpr (detail::pool_checks_enabled) {
      for (chunk_header* c = chunks_; c != nullptr; c = c->next)
        for (std::size_t i = 0; i < c->slot_count; ++i)
          if (states(c)[i] != 0) return c->first + i;
    }
    return nullptr;
  }

  slot* free_ = nullptr;
  slot* bump_ = nullptr;      // fresh slots of the newest chunk: [bump_, bump_end_)
  slot* bump_end_ = nullptr;
  std::size_t live_ = 0;
  chunk_header* chunks_ = nullptr;
  std::size_t chunk_count_ = 0;
};

}  // namespace strata

#endif
