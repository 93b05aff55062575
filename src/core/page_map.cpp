#include "core/page_map.h"

#include <algorithm>
#include <bit>
#include <type_traits>

#include "platform/options.h"
#include "platform/os.h"

namespace strata::detail {

alignas(4096) PageMap g_page_map;  // trivially constructible: zeroed .bss, no constructor
static_assert(std::is_trivially_default_constructible_v<PageMap>);

PageMap::Leaf* PageMap::leaf_for_write(PageId page) const noexcept {
  std::uintptr_t offset = __atomic_load_n(&root_[(page >> kLeafBits) & (kRootEntries - 1)], __ATOMIC_ACQUIRE);
  return reinterpret_cast<Leaf*>(reinterpret_cast<std::uintptr_t>(this) + offset);
}

PageMap::Entry& PageMap::entry_for_write(PageId page) const noexcept {
  if (flat_ != nullptr) return reinterpret_cast<Entry*>(flat_)[page];
  return leaf_for_write(page)->entries[page & (kLeafEntries - 1)];
}

std::uint32_t& PageMap::class_for_write(PageId page) const noexcept {
  if (flat_ != nullptr) return reinterpret_cast<std::uint32_t*>(flat_ + s_classes_delta)[page];
  return leaf_for_write(page)->page_classes[page & (kLeafEntries - 1)];
}

// The flat arrays for the addresses below 2^bits: the class words, then the
// entries. MAP_NORESERVE: nothing is committed, only touched pages become
// resident. They stay out of core dumps (hundreds of GiB of untouched zeros
// through a core pipe).
bool PageMap::reserve_flat(std::size_t bits, bool huge_pages) noexcept {
  const std::size_t pages = std::size_t{1} << (bits - kPageShift);
  const std::size_t class_bytes = pages * sizeof(std::uint32_t), bytes = class_bytes + pages * sizeof(Entry);
  char* arrays = static_cast<char*>(os_map(bytes, kPageSize));
  if (arrays == nullptr) return false;
  if (!huge_pages) os_advise_no_hugepage(arrays, bytes);
  os_advise_no_dump(arrays, bytes);
  s_classes_delta = std::uintptr_t{0} - class_bytes;  // from the entries back to the class words
  __atomic_store_n(&flat_, arrays + class_bytes, __ATOMIC_RELEASE);
  return true;
}

// Flat when the OS grants the reservation and the process has not gone
// radix already; the radix otherwise. The whole user address space first;
// failing that, the part below the lowest power of two holding the heap's
// first reservation (`heap_end`), the stack and our image, times two (room
// for the heap to grow; valgrind's address space).
void PageMap::choose_layout(std::uintptr_t heap_end, bool huge_pages) noexcept {
  layout_chosen_ = true;
  if (s_layout == Layout::kFlat) {
    reserve_flat(s_flat_bits, huge_pages);  // if refused, this map maps nothing (ensure)
    return;
  }
  if (s_layout == Layout::kRadix || !flat_page_map_wanted()) {
    s_layout = Layout::kRadix;
    return;
  }
  int on_stack = 0;
  const std::uintptr_t top = std::max({heap_end, reinterpret_cast<std::uintptr_t>(&on_stack),
                                       reinterpret_cast<std::uintptr_t>(this)});
  const std::size_t needed = std::max<std::size_t>(kFlatMinBits, std::bit_width(top));
  if (needed <= kFlatMaxBits && reserve_flat(kFlatMaxBits, huge_pages))
    s_flat_bits = kFlatMaxBits;
  else if (needed + 1 < kFlatMaxBits && reserve_flat(needed + 1, huge_pages))
    s_flat_bits = needed + 1;
  s_layout = s_flat_bits != 0 ? Layout::kFlat : Layout::kRadix;
}

bool PageMap::ensure(PageId first, std::size_t count, bool huge_pages) noexcept {
  std::uintptr_t last = first + count - 1;
  if (!layout_chosen_) choose_layout(address_of(last + 1), huge_pages);
  if (s_layout == Layout::kFlat && (flat_ == nullptr || (last >> (s_flat_bits - kPageShift)) != 0))
    return false;  // this map could not be flat, or the pages lie beyond what the flat arrays cover
  for (std::uintptr_t index = first >> kLeafBits; index <= (last >> kLeafBits); ++index) {
    if (index >= kRootEntries) return false;
    if (__atomic_load_n(&root_[index], __ATOMIC_RELAXED) != 0) continue;
    if (flat_ != nullptr) {  // only counted: the flat arrays cover it
      ++leaf_count_;
      root_[index] = 1;
      continue;
    }
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
  Entry& e = entry_for_write(page);
  __atomic_store_n(&e.span, span, __ATOMIC_RELAXED);
  __atomic_store_n(&e.owner_tag, std::uintptr_t{0}, __ATOMIC_RELAXED);
}

void PageMap::set_owner_tag(PageId first, std::size_t count, std::uintptr_t tag) noexcept {
  for (std::size_t i = 0; i < count; ++i) __atomic_store_n(&entry_for_write(first + i).owner_tag, tag, __ATOMIC_RELEASE);
}

void PageMap::set_page_classes(PageId first, std::size_t count, std::size_t size_class) noexcept {
  for (std::size_t i = 0; i < count; ++i)
    __atomic_store_n(&class_for_write(first + i), static_cast<std::uint32_t>((i << kPageShift) | size_class),
                     __ATOMIC_RELAXED);
}

void PageMap::set_range(PageId first, std::size_t count, Span* span) noexcept {
  for (std::size_t i = 0; i < count; ++i) set(first + i, span);
}

}  // namespace strata::detail
