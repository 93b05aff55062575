// The page map: page number -> Span*, a two-level radix tree over the whole
// 48-bit user address space.
//
//   root:  2^17 entries in .bss (1 MiB of address space, touched only where
//          the heap lives: 8 bytes per 2 GiB of heap)
//   leaf:  2^18 Span* entries (2 MiB, mapped lazily, physical pages appear
//          only where entries are written: 8 bytes per 8 KiB page, 0.1 %)
//
// Lookups take no lock: a leaf, once published, is never moved or freed, and
// the entries a reader may look at (the pages of a block it owns) were
// written before that block was handed out. Writers hold the page heap lock.
//
// Invariants:
//  - every page of a span in use maps to that span;
//  - the first and last page of a free span map to it (interior pages may
//    hold stale pointers; Span objects are never unmapped, so reading a stale
//    entry is harmless and every user checks the span's range and state);
//  - pages the allocator never handed out map to nullptr.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/constants.h"

namespace strata::detail {

struct Span;

class PageMap {
 public:
  static constexpr std::size_t kLeafBits = 18;
  static constexpr std::size_t kRootBits = kAddressBits - kPageShift - kLeafBits;
  static constexpr std::size_t kLeafEntries = std::size_t{1} << kLeafBits;
  static constexpr std::size_t kRootEntries = std::size_t{1} << kRootBits;

  // The span that holds `address`, or nullptr. Hot path: two dependent loads.
  Span* lookup(const void* address) const noexcept {
    auto bits = reinterpret_cast<std::uintptr_t>(address);
    const Leaf* leaf = root_[(bits >> (kPageShift + kLeafBits)) & (kRootEntries - 1)].load(
        std::memory_order_acquire);
    if (__builtin_expect(leaf == nullptr, 0)) return nullptr;
    return leaf->entries[(bits >> kPageShift) & (kLeafEntries - 1)].load(
        std::memory_order_relaxed);
  }

  Span* lookup_page(PageId page) const noexcept {
    return lookup(reinterpret_cast<const void*>(address_of(page)));
  }

  // Makes sure leaves exist for pages [first, first + count). False when the
  // OS refuses memory for a leaf. Caller holds the page heap lock.
  bool ensure(PageId first, std::size_t count) noexcept;

  // Sets one entry / a range. The leaves must exist (ensure). Caller holds
  // the page heap lock.
  void set(PageId page, Span* span) noexcept;
  void set_range(PageId first, std::size_t count, Span* span) noexcept;

  // Bytes of address space reserved for leaves (for statistics).
  std::size_t leaf_bytes() const noexcept { return leaf_count_ * sizeof(Leaf); }

 private:
  struct Leaf {
    std::atomic<Span*> entries[kLeafEntries];
  };

  std::atomic<Leaf*> root_[kRootEntries] = {};
  std::size_t leaf_count_ = 0;
};

// The one page map of the process.
extern PageMap g_page_map;

}  // namespace strata::detail
