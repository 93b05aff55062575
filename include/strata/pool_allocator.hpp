// strata/pool_allocator.hpp — a standard Allocator for node containers.
//
//   std::unordered_set<int, std::hash<int>, std::equal_to<int>, strata::pool_allocator<int>> s;
//
// allocate(1) — a container node — takes a slot from the pool of the node
// type (per_type_pool.hpp: a per-thread cache over an immortal per-type
// depot, free lists threaded through the nodes: a container touches a node
// right after allocating it and right before freeing it, so the link costs
// no extra cache line); any other count (bucket arrays, vector storage)
// goes to the general allocator (strata_malloc, the same engine path as
// malloc).
//
// The allocator is stateless and all instances compare equal: memory from
// one may be freed through any other, on any thread, at any time of the
// program (also after the allocating thread exited, and during static
// destruction). So containers can be moved, swapped and destroyed anywhere.
#ifndef STRATA_POOL_ALLOCATOR_HPP
#define STRATA_POOL_ALLOCATOR_HPP

#include <strata/general_memory.hpp>
#include <strata/per_type_pool.hpp>

#include <cstddef>
#include <limits>
#include <new>
#include <type_traits>

namespace strata {

template <class T>
class pool_allocator {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  // Stateless: every instance can free what any other allocated.
  using is_always_equal = std::true_type;
  using propagate_on_container_copy_assignment = std::false_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::false_type;

  template <class U>
  struct rebind {
    using other = pool_allocator<U>;
  };

  constexpr pool_allocator() noexcept = default;
  template <class U>
  constexpr pool_allocator(const pool_allocator<U>&) noexcept {}

  [[nodiscard]] T* allocate(std::size_t n) {
    if (n == 1) [[likely]] return static_cast<T*>(pool<>::allocate());
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(detail::allocate_bytes(n * sizeof(T), alignof(T)));
  }

  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1) [[likely]] return pool<>::deallocate(p);
    detail::deallocate_bytes(p, n * sizeof(T), alignof(T));
  }

  // The per-type pool behind allocate(1) (for tests and statistics). A
  // template so that pool_allocator<T> can be named while T is incomplete.
  template <class U = T>
  using pool = detail::per_type_pool<U, sizeof(U), alignof(U), detail::free_list_slots>;
};

template <class T, class U>
constexpr bool operator==(const pool_allocator<T>&, const pool_allocator<U>&) noexcept {
  return true;
}

}  // namespace strata

#endif
