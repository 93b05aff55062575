// strata/general_memory.hpp — raw memory for the C++ facilities.
//
// Every pool in include/strata/ takes its chunks from here (or from a given
// std::pmr upstream), and here is the only place that talks to the C API.
// Nothing here calls the system malloc.
#ifndef STRATA_GENERAL_MEMORY_HPP
#define STRATA_GENERAL_MEMORY_HPP

#include <strata/strata.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

namespace strata::detail {

// strata_malloc returns 16-byte aligned blocks, except that blocks of 8 bytes
// or less may be only 8-aligned (strata.h).
inline constexpr std::size_t general_alignment = 16;

constexpr bool general_malloc_suffices(std::size_t bytes, std::size_t alignment) noexcept {
  return alignment <= 8 || (alignment <= general_alignment && bytes > 8);
}

// Returns a block or nullptr (never throws).
inline void* try_allocate_bytes(std::size_t bytes, std::size_t alignment) noexcept {
  if (general_malloc_suffices(bytes, alignment)) return strata_malloc(bytes);
  return strata_aligned_alloc(alignment, bytes);
}

// Returns a block or throws std::bad_alloc.
inline void* allocate_bytes(std::size_t bytes, std::size_t alignment) {
  void* p = try_allocate_bytes(bytes, alignment);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

inline void deallocate_bytes(void* p, std::size_t bytes, std::size_t alignment) noexcept {
  // The sized free saves a size lookup; aligned blocks take the plain path
  // because their requested size is not the size the engine recorded.
  if (p != nullptr && general_malloc_suffices(bytes, alignment))
    strata_free_sized(p, bytes);
  else
    strata_free(p);
}

constexpr std::size_t round_up(std::size_t n, std::size_t alignment) noexcept {
  return (n + alignment - 1) & ~(alignment - 1);
}

constexpr bool is_power_of_two(std::size_t n) noexcept { return n != 0 && (n & (n - 1)) == 0; }

// Storage for an object that is constructed once and never destroyed, so that
// it is still usable from static destructors and thread exit (the lifetime
// trap of seed 000 comes from pool state being destroyed too early).
template <class T>
class immortal {
 public:
  template <class... Args>
  explicit immortal(Args&&... args) {
    ::new (static_cast<void*>(storage_)) T(static_cast<Args&&>(args)...);
  }
  immortal(const immortal&) = delete;
  immortal& operator=(const immortal&) = delete;
  T& get() noexcept { return *std::launder(reinterpret_cast<T*>(storage_)); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace strata::detail

#endif
