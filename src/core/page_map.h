// The page map: page number -> Span*, over the user address space, in one
// of two layouts chosen when the page heap first grows, for good:
//
//   flat (the usual): one array of 16-byte entries, one per 8 KiB page of
//          the 47-bit address space, and before it one of 4-byte class
//          words: 320 GiB of address space reserved with MAP_NORESERVE;
//          only the OS pages the heap's entries fall on become resident
//          (16 + 4 bytes per 8 KiB page, 0.25 %). An entry's address is
//          the block's address shifted: the free fast path reads it with
//          one load and nothing before it to wait for (a root load before
//          it cost steady replace 8-14 % of its time, docs/design.md).
//          Where the OS refuses that, the same arrays for the addresses
//          below twice the lowest power of two holding the heap, the stack
//          and our image (valgrind: 2^38 bytes, 640 MiB reserved).
//   radix (when the OS refuses both: strict overcommit, an address-space
//          limit; or STRATA_FLAT_PAGE_MAP=0): a two-level tree over 48 bits.
//          root:  2^17 entries in .bss (1 MiB of address space, touched
//                 only where the heap lives: 8 bytes per 2 GiB of heap)
//          leaf:  2^18 entries of 16 bytes and 2^18 class words of 4 (5 MiB,
//                 mapped lazily, physical pages appear only where written).
//
// Each entry holds two words: the Span*, and an owner tag (the owning
// ThreadCache's address, plus the class while its thread lists the class:
// core/ownership.h) for pages of small spans owned by a thread, 0
// otherwise. The free fast path compares the tag with its own cache without
// touching anything else. A tag changes only when ownership changes, and
// every change to or from thread T's ownership is written by T itself (it
// creates, adopts or gives up the span), so T never sees a stale tag naming
// T. Beside the entries, each leaf holds a word per page of a span a thread
// owns: its size class and its offset in the span, written before the span
// is tagged (core/ownership.h). A thread freeing another thread's block
// reads it instead of the span, whose line would be a cache miss on nearly
// every remote free (16 pages to a line).
//
// Lookups take no lock: the flat arrays and a leaf, once published, are
// never moved or freed, and the entries a reader may look at (the pages of a
// block it owns) were written before that block was handed out. The layout
// is chosen before any heap page exists, so a reader that sees either one
// finds "no span" for every page not yet handed out. Radix root entries
// hold the leaf's offset from the PageMap object, which starts with an
// all-zero leaf, so an absent leaf needs no test: it reads as the zero leaf
// (virtual memory only, never written).
// Writers hold the page heap lock (spans) or own the span (tags).
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

  // Plain words read and written with __atomic builtins: the PageMap stays
  // trivially constructible, so it is zero-initialised .bss with no
  // constructor to run (the first malloc may come before any constructor).
  struct Entry {
    std::uintptr_t owner_tag;
    Span* span;
  };
  // A page of a small span: the span's size class, and the page's offset
  // in the span (so a block's offset in its span is known without the
  // span). Stored as one word: the offset | the class (offsets are whole
  // pages, classes are below kPageSize).
  struct PageClass {
    std::size_t size_class;
    std::size_t page_offset;  // bytes from the span's start to the page's
  };
  struct Leaf {
    Entry entries[kLeafEntries];
    std::uint32_t page_classes[kLeafEntries];  // of pages of small spans
  };
  static constexpr std::size_t kPageClassesOffset = sizeof(Entry) * kLeafEntries;

  // The flat layout covers the addresses below 2^kFlatMaxBits (all that
  // Linux hands out unless asked for more) or, where the OS lets a process
  // reserve less (valgrind: about 100 GiB in all), below the lowest power of
  // two that holds the heap's first reservation, the stack and strata's own
  // image, times two.
  static constexpr std::size_t kFlatMaxBits = kAddressBits - 1;
  static constexpr std::size_t kFlatMinBits = 32;

  // The entry of a page as a base and a byte offset from it, for the free
  // fast path: it reads two words of the entry, and x86 addresses both as
  // base + offset without adding them up first (one instruction less). The
  // base is the flat array (the offset then counts from the address
  // space's first page) or a radix leaf. Two words: passed on in two
  // registers to free's tail calls.
  struct EntryRef {
    const char* leaf;
    std::uintptr_t offset;
    std::uintptr_t owner_tag() const noexcept {
      return racy_load(*reinterpret_cast<const std::uintptr_t*>(leaf + offset));
    }
    // The tag as a destination to send to: the acquire pairs with the
    // release in set_owner_tag, so the owner's cache (built by the owner
    // just before it tagged its first span) is seen whole. A plain load on
    // x86, as the racy one.
    std::uintptr_t owner_tag_acquire() const noexcept {
      return __atomic_load_n(reinterpret_cast<const std::uintptr_t*>(leaf + offset), __ATOMIC_ACQUIRE);
    }
    Span* span() const noexcept {
      return racy_load(*reinterpret_cast<Span* const*>(leaf + offset + sizeof(std::uintptr_t)));
    }
    // The page's size class and place in its span: valid after an owner
    // tag read with acquire (written before the tag, core/ownership.h). A
    // free whose tag is stale by the time it reads the class can meet the
    // class of a later use of the pages only if the span emptied meanwhile:
    // a double free, which the owner's drain checks again.
    PageClass page_class() const noexcept {
      constexpr std::size_t kRatio = sizeof(Entry) / sizeof(std::uint32_t);
      std::size_t both =
          racy_load(*reinterpret_cast<const std::uint32_t*>(leaf + racy_load(s_classes_delta) + offset / kRatio));
      return PageClass{both & (kPageSize - 1), both & ~(kPageSize - 1)};
    }
  };
  EntryRef entry_ref(const void* address) const noexcept {
    if (const char* flat = flat_base(); __builtin_expect(flat != nullptr, 1)) return flat_entry_ref(flat, address);
    auto bits = reinterpret_cast<std::uintptr_t>(address);
    // A plain load: a root word is written once, before any block of its
    // range exists, so the program's own hand-over of the block orders it
    // before us.
    std::uintptr_t leaf_offset = root_[bits >> (kPageShift + kLeafBits)];
    std::uintptr_t index_bytes = (bits >> (kPageShift - 4)) & ((kLeafEntries - 1) << 4);
    const char* leaf = reinterpret_cast<const char*>(this) + leaf_offset;
    // Keeps GCC from re-associating the two additions into three
    // instructions (checked with objdump; tests/perf guards the count).
    asm("" : "+r"(leaf));
    return EntryRef{leaf, index_bytes};
  }

  // The flat arrays, or nullptr (the radix layout, or none chosen yet).
  const char* flat_base() const noexcept { return racy_load(flat_); }

  // The entry of `address` in the flat arrays at `flat`. No mask: every
  // address the heap has is below what the arrays cover (ensure), and so is
  // every pointer Linux hands out unless a program maps above 47 bits
  // itself (a free of such a pointer reads past the arrays, as the radix
  // reads past its root beyond 48 bits).
  static EntryRef flat_entry_ref(const char* flat, const void* address) noexcept {
    static_assert(sizeof(Entry) == 16, "the offset assumes 16-byte entries");
    return EntryRef{flat, (reinterpret_cast<std::uintptr_t>(address) >> (kPageShift - 4)) & ~std::uintptr_t{15}};
  }

  // The span that holds `address`, or nullptr.
  Span* lookup(const void* address) const noexcept { return entry_ref(address).span(); }

  // The owner tag of the page holding `address` (see above).
  std::uintptr_t owner_tag(const void* address) const noexcept { return entry_ref(address).owner_tag(); }

  Span* lookup_page(PageId page) const noexcept {
    return lookup(reinterpret_cast<const void*>(address_of(page)));
  }

  // Makes sure entries exist for pages [first, first + count): the first
  // call chooses the layout (flat when the OS grants its reservation and
  // STRATA_FLAT_PAGE_MAP is not 0); the radix maps the leaves these pages
  // need. False when the OS refuses memory for a leaf, or when the pages lie
  // beyond what the flat arrays cover. Caller holds the page heap lock.
  // The map stays off transparent huge pages unless `huge_pages` (the first
  // call's, for the flat arrays): entries are written 16 bytes per 8 KiB
  // page of heap, so a 2 MiB huge page of them fills up only under a 1 GiB
  // heap, and with THP "always" the first entry written would make 2 MiB
  // resident.
  bool ensure(PageId first, std::size_t count, bool huge_pages = false) noexcept;

  // Sets one entry / a range. The leaves must exist (ensure). Caller holds
  // the page heap lock.
  void set(PageId page, Span* span) noexcept;
  void set_range(PageId first, std::size_t count, Span* span) noexcept;

  // Writes the owner tag of every page of [first, first + count).
  void set_owner_tag(PageId first, std::size_t count, std::uintptr_t tag) noexcept;

  // Writes the PageClass of every page of the span [first, first + count):
  // the span's owner, when it takes the span (before the span is tagged) or
  // makes its own empty span over for another class.
  void set_page_classes(PageId first, std::size_t count, std::size_t size_class) noexcept;

  // Bytes of map for the heap's 2 GiB ranges so far, a leaf's size each (for
  // statistics; the same in both layouts).
  std::size_t leaf_bytes() const noexcept { return leaf_count_ * sizeof(Leaf); }

 private:
  Leaf* leaf_for_write(PageId page) const noexcept;
  Entry& entry_for_write(PageId page) const noexcept;
  std::uint32_t& class_for_write(PageId page) const noexcept;
  void choose_layout(std::uintptr_t heap_end, bool huge_pages) noexcept;
  bool reserve_flat(std::size_t bits, bool huge_pages) noexcept;

  // The layout, the bits of address the flat one covers and where a page's
  // class word is from its entry's base (EntryRef), the same for every map
  // of the process: the first map to choose chooses for all (a later map
  // that cannot have the same maps nothing).
  enum class Layout : std::uint8_t { kUnchosen, kFlat, kRadix };
  static inline Layout s_layout = Layout::kUnchosen;
  static inline std::size_t s_flat_bits = 0;
  static inline std::uintptr_t s_classes_delta = kPageClassesOffset;

  // zero_leaf_ comes first: a root entry holds its leaf's offset from the
  // start of the PageMap, so 0 means the zero leaf and one base register
  // reaches the root and every leaf.
  [[maybe_unused]] Leaf zero_leaf_;  // .bss: read (as "no span") but never written
  std::uintptr_t root_[kRootEntries];  // written with release stores; flat: 1 where ensure() was asked
  std::size_t leaf_count_;
  char* flat_;          // the flat entries (their class words before them), or nullptr
  bool layout_chosen_;  // this map's (a radix map may have failed to be flat)
};

// The one page map of the process.
extern STRATA_INTERNAL PageMap g_page_map;

}  // namespace strata::detail
