// strata/pooled.hpp — class-specific operator new/delete served by a pool.
//
//   class Obj : public strata::pooled<Obj> { ... };
//
// `new Obj` then takes a slot from a per-type pool (per_type_pool.hpp:
// per-thread magazines over an immortal depot), so it is thread-safe, an
// Obj may be deleted on any thread, and objects may outlive the thread
// that made them or be deleted during static destruction.
//
// Requests of any other size go to the general allocator (strata_malloc):
// a class derived from Obj that is larger (it inherits these operators),
// arrays (new Obj[n]) and over-aligned types. The size passed to the sized
// operator delete tells which path a pointer took; for a derived class
// deleted through a base pointer that needs a virtual destructor, as it
// does for any delete through a base pointer.
#ifndef STRATA_POOLED_HPP
#define STRATA_POOLED_HPP

#include <strata/general_memory.hpp>
#include <strata/per_type_pool.hpp>

#include <cstddef>
#include <new>

namespace strata {

template <class Derived>
class pooled {
 public:
  static void* operator new(std::size_t size) {
    if (size == sizeof(Derived)) [[likely]] return pool_of<>::allocate();
    return detail::allocate_bytes(size, __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  }
  static void operator delete(void* p, std::size_t size) noexcept {
    if (p == nullptr) return;
    if (size == sizeof(Derived)) [[likely]] return pool_of<>::deallocate(p);
    detail::deallocate_bytes(p, size, __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  }

  static void* operator new[](std::size_t size) {
    return detail::allocate_bytes(size, __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  }
  static void operator delete[](void* p, std::size_t size) noexcept {
    detail::deallocate_bytes(p, size, __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  }

  // Over-aligned classes (alignas > 16) and their arrays: general allocator.
  static void* operator new(std::size_t size, std::align_val_t al) {
    return detail::allocate_bytes(size, static_cast<std::size_t>(al));
  }
  static void operator delete(void* p, std::size_t size, std::align_val_t al) noexcept {
    detail::deallocate_bytes(p, size, static_cast<std::size_t>(al));
  }
  static void* operator new[](std::size_t size, std::align_val_t al) {
    return detail::allocate_bytes(size, static_cast<std::size_t>(al));
  }
  static void operator delete[](void* p, std::size_t size, std::align_val_t al) noexcept {
    detail::deallocate_bytes(p, size, static_cast<std::size_t>(al));
  }

  // Placement new stays available.
  static void* operator new(std::size_t, void* where) noexcept { return where; }
  static void operator delete(void*, void*) noexcept {}

 protected:
  pooled() noexcept = default;
  ~pooled() = default;

 private:
  // Slots aligned like operator new's result, so every class of this size
  // that is not over-aligned fits. (A member alias would need sizeof(Derived)
  // while Derived is still incomplete; the functions see it complete.)
  template <class D = Derived>
  using pool_of = detail::per_type_pool<D, sizeof(D), __STDCPP_DEFAULT_NEW_ALIGNMENT__>;
};

}  // namespace strata

#endif
