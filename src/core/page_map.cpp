#include "core/page_map.h"

#include "platform/os.h"

namespace strata::detail {

constinit PageMap g_page_map;

bool PageMap::ensure(PageId first, std::size_t count) noexcept {
  std::uintptr_t last = first + count - 1;
  for (std::uintptr_t index = first >> kLeafBits; index <= (last >> kLeafBits); ++index) {
    if (index >= kRootEntries) return false;
    if (root_[index].load(std::memory_order_relaxed) != nullptr) continue;
    // Fresh anonymous memory is zero, which is nullptr for every entry.
    auto* leaf = static_cast<Leaf*>(os_map(sizeof(Leaf), kPageSize));
    if (leaf == nullptr) return false;
    ++leaf_count_;
    root_[index].store(leaf, std::memory_order_release);
  }
  return true;
}

void PageMap::set(PageId page, Span* span) noexcept {
  Leaf* leaf = root_[(page >> kLeafBits) & (kRootEntries - 1)].load(std::memory_order_relaxed);
  leaf->entries[page & (kLeafEntries - 1)].store(span, std::memory_order_relaxed);
}

void PageMap::set_range(PageId first, std::size_t count, Span* span) noexcept {
  for (std::size_t i = 0; i < count; ++i) set(first + i, span);
}

}  // namespace strata::detail
