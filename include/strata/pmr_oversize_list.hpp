// strata/pmr_oversize_list.hpp — blocks too large for a pmr pool resource's
// pools. Each comes straight from the upstream with a header in front,
// linked in a list so that release() can give it back even if the user
// never deallocated it. Not synchronised (the caller locks if needed).
#ifndef STRATA_PMR_OVERSIZE_LIST_HPP
#define STRATA_PMR_OVERSIZE_LIST_HPP

#include <strata/general_memory.hpp>

#include <cstddef>
#include <memory_resource>

namespace strata::pmr::detail_pmr {

class oversize_list {
 public:
  void* allocate(std::pmr::memory_resource* upstream, std::size_t bytes, std::size_t alignment) {
    const std::size_t align = upstream_alignment(alignment);
    const std::size_t offset = strata::detail::round_up(sizeof(header), align);
    auto* h = static_cast<header*>(upstream->allocate(offset + bytes, align));
    *h = header{nullptr, head_, offset + bytes, align};
    if (head_ != nullptr) head_->prev = h;
    head_ = h;
    return reinterpret_cast<char*>(h) + offset;
  }

  void deallocate(std::pmr::memory_resource* upstream, void* p, std::size_t bytes, std::size_t alignment) {
    const std::size_t align = upstream_alignment(alignment);
    const std::size_t offset = strata::detail::round_up(sizeof(header), align);
    auto* h = reinterpret_cast<header*>(static_cast<char*>(p) - offset);
    if (h->prev != nullptr) h->prev->next = h->next; else head_ = h->next;
    if (h->next != nullptr) h->next->prev = h->prev;
    upstream->deallocate(h, offset + bytes, align);
  }

  void release(std::pmr::memory_resource* upstream) noexcept {
    while (head_ != nullptr) {
      header* next = head_->next;
      upstream->deallocate(head_, head_->total_bytes, head_->alignment);
      head_ = next;
    }
  }

 private:
  struct header {
    header* prev;
    header* next;
    std::size_t total_bytes;
    std::size_t alignment;
  };
  static std::size_t upstream_alignment(std::size_t alignment) noexcept {
    return alignment > alignof(header) ? alignment : alignof(header);
  }

  header* head_ = nullptr;
};

}  // namespace strata::pmr::detail_pmr

#endif
