// strata/pmr_general_resource.hpp — std::pmr::memory_resource over the
// general allocator (strata_malloc / strata_aligned_alloc / strata_free).
#ifndef STRATA_PMR_GENERAL_RESOURCE_HPP
#define STRATA_PMR_GENERAL_RESOURCE_HPP

#include <strata/general_memory.hpp>

#include <cstddef>
#include <memory_resource>
#include <new>

namespace strata::pmr {

namespace detail_pmr {
class general_memory_resource final : public std::pmr::memory_resource {
 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    return strata::detail::allocate_bytes(bytes, alignment);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    strata::detail::deallocate_bytes(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    // There is one instance (general_resource()).
    return this == &other;
  }
};
}  // namespace detail_pmr

// The resource; never destroyed, so it may be used from static destructors.
inline std::pmr::memory_resource* general_resource() noexcept {
  static strata::detail::immortal<detail_pmr::general_memory_resource> resource;
  return &resource.get();
}

}  // namespace strata::pmr

#endif
