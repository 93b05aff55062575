// Fixed-size object pools for the allocator's own metadata (spans, thread
// caches), over memory mapped straight from the OS: the allocator never
// calls malloc for itself (seed 001's ObjectPool, made thread-safe).
//
// Objects are never returned to the OS: a stale Span pointer read from an
// interior page map entry (see page_map.h) must always point at readable
// memory. Freed objects are reused LIFO.
#pragma once

#include <cstddef>
#include <new>

#include "platform/mutex.h"

namespace strata::detail {

class RawPool {
 public:
  constexpr RawPool(std::size_t object_size, std::size_t chunk_bytes) noexcept
      : object_size_(object_size < sizeof(void*) ? sizeof(void*) : object_size),
        chunk_bytes_(chunk_bytes) {}

  void* allocate() noexcept;          // zeroed memory, or nullptr when the OS refuses
  void deallocate(void* object) noexcept;

  std::size_t mapped_bytes() const noexcept { return mapped_bytes_; }
  std::size_t in_use() const noexcept { return in_use_; }
  Mutex& mutex() noexcept { return mutex_; }

 private:
  struct Node { Node* next; };

  Mutex mutex_;
  std::size_t object_size_;
  std::size_t chunk_bytes_;
  Node* free_ = nullptr;
  char* bump_ = nullptr;
  char* bump_end_ = nullptr;
  std::size_t mapped_bytes_ = 0;
  std::size_t in_use_ = 0;
};

template <class T>
class MetadataPool {
 public:
  constexpr MetadataPool() noexcept : raw_(sizeof(T), std::size_t{1} << 20) {}

  T* create() noexcept {
    void* memory = raw_.allocate();
    return memory ? new (memory) T() : nullptr;
  }
  void destroy(T* object) noexcept {
    object->~T();
    raw_.deallocate(object);
  }
  RawPool& raw() noexcept { return raw_; }

 private:
  RawPool raw_;
};

}  // namespace strata::detail
