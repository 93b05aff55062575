#include "core/page_map.h"

#include <type_traits>

#include "platform/os.h"

namespace strata::detail {

alignas(4096) PageMap g_page_map;  // trivially constructible: zeroed .bss, no constructor
static_assert(std::is_trivially_default_constructible_v<PageMap>);

PageMap::Leaf* PageMap::leaf_for_write(PageId page) const noexcept {
  std::uintptr_t offset = __atomic_load_n(&root_[(page >> kLeafBits) & (kRootEntries - 1)], __ATOMIC_ACQUIRE);
  return reinterpret_cast<Leaf*>(reinterpret_cast<std::uintptr_t>(this) + offset);
}

bool PageMap::ensure(PageId first, std::size_t count, bool huge_pages) noexcept {
  std::uintptr_t last = first + count - 1;
  for (std::uintptr_t index = first >> kLeafBits; index <= (last >> kLeafBits); ++index) {
    if (index >= kRootEntries) return false;
    if (__atomic_load_n(&root_[index], __ATOMIC_RELAXED) != 0) continue;
    // Fresh anonymous memory is zero, which is nullptr for every entry.
    auto* leaf = static_cast<Leaf*>(os_map(sizeof(Leaf), kPageSize));
    if (leaf == nullptr) return false;
    if (!huge_pages) os_advise_no_hugepage(leaf, sizeof(Leaf));
    ++leaf_count_;
    __atomic_store_n(&root_[index], reinterpret_cast<std::uintptr_t>(leaf) - reinterpret_cast<std::uintptr_t>(this),
                     __ATOMIC_RELEASE);
  }
  return true;
}

void PageMap::set(PageId page, Span* span) noexcept {
  Entry& e = leaf_for_write(page)->entries[page & (kLeafEntries - 1)];
  __atomic_store_n(&e.span, span, __ATOMIC_RELAXED);
  __atomic_store_n(&e.owner_tag, std::uintptr_t{0}, __ATOMIC_RELAXED);
}

void PageMap::set_owner_tag(PageId first, std::size_t count, std::uintptr_t tag) noexcept {
  for (std::size_t i = 0; i < count; ++i)
    __atomic_store_n(&leaf_for_write(first + i)->entries[(first + i) & (kLeafEntries - 1)].owner_tag, tag,
                     __ATOMIC_RELEASE);
}

void PageMap::set_page_classes(PageId first, std::size_t count, std::size_t size_class) noexcept {
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t& word = leaf_for_write(first + i)->page_classes[(first + i) & (kLeafEntries - 1)];
    __atomic_store_n(&word, static_cast<std::uint32_t>((i << kPageShift) | size_class), __ATOMIC_RELAXED);
  }
}

void PageMap::set_range(PageId first, std::size_t count, Span* span) noexcept {
  for (std::size_t i = 0; i < count; ++i) set(first + i, span);
}

}  // namespace strata::detail
