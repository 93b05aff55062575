#include "core/page_map.h"

#include "platform/os.h"

namespace strata::detail {

alignas(4096) constinit PageMap g_page_map;

PageMap::Leaf* PageMap::leaf_for_write(PageId page) const noexcept {
  std::uintptr_t offset = __atomic_load_n(&root_[(page >> kLeafBits) & (kRootEntries - 1)], __ATOMIC_ACQUIRE);
  return reinterpret_cast<Leaf*>(reinterpret_cast<std::uintptr_t>(this) + offset);
}

bool PageMap::ensure(PageId first, std::size_t count) noexcept {
  std::uintptr_t last = first + count - 1;
  for (std::uintptr_t index = first >> kLeafBits; index <= (last >> kLeafBits); ++index) {
    if (index >= kRootEntries) return false;
    if (__atomic_load_n(&root_[index], __ATOMIC_RELAXED) != 0) continue;
    // Fresh anonymous memory is zero, which is nullptr for every entry.
    auto* leaf = static_cast<Leaf*>(os_map(sizeof(Leaf), kPageSize));
    if (leaf == nullptr) return false;
    ++leaf_count_;
    __atomic_store_n(&root_[index], reinterpret_cast<std::uintptr_t>(leaf) - reinterpret_cast<std::uintptr_t>(this),
                     __ATOMIC_RELEASE);
  }
  return true;
}

void PageMap::set(PageId page, Span* span) noexcept {
  Entry& e = leaf_for_write(page)->entries[page & (kLeafEntries - 1)];
  e.span.store(span, std::memory_order_relaxed);
  e.owner_tag.store(0, std::memory_order_relaxed);
}

void PageMap::set_owner_tag(PageId first, std::size_t count, std::uintptr_t tag) noexcept {
  for (std::size_t i = 0; i < count; ++i)
    leaf_for_write(first + i)->entries[(first + i) & (kLeafEntries - 1)].owner_tag.store(
        tag, std::memory_order_release);
}

void PageMap::set_range(PageId first, std::size_t count, Span* span) noexcept {
  for (std::size_t i = 0; i < count; ++i) set(first + i, span);
}

}  // namespace strata::detail
