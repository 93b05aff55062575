// Units of the allocator: pages, the small/large boundary, address bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/visibility.h"

namespace strata::detail {

// A word that one thread reads while another may write it, where any value
// the reader can see is handled: an owner tag changing hands (the reader
// only acts on a tag equal to its own cache, which nobody else writes), the
// fast size limit set once at start-up. The fast paths read them with plain
// loads, so that a compare can take its operand from memory (GCC does not
// fold an atomic load into the compare: one instruction more); on x86-64 an
// aligned word is read whole either way. ThreadSanitizer builds read them
// as the relaxed atomics they stand for, so that it checks everything else.
template <class T>
inline T racy_load(const T& word) noexcept {
#if defined(__SANITIZE_THREAD__)
  return __atomic_load_n(&word, __ATOMIC_RELAXED);
#else
  return word;
#endif
}

inline constexpr std::size_t kPageShift = 13;  // 8 KiB pages, as in TCMalloc
inline constexpr std::size_t kPageSize = std::size_t{1} << kPageShift;
// Blocks a small span can hold: one free bit each (core/span.h), as many
// as a page of the smallest, 16-byte, blocks.
inline constexpr std::size_t kMaxBlocksPerSpan = kPageSize / 16;

// Requests up to this size are served from size classes; larger ones are
// whole spans from the page heap, where a freed block's pages coalesce with
// their free neighbours and serve a request of any size next. Up to 256 KiB
// went to classes before: a program that frees buffers of many different
// large sizes (python reading its modules) kept one partly touched span per
// class, 1.1 MB more than glibc for `python3 -c pass` (docs/design.md,
// "Start-up cost").
inline constexpr std::size_t kMaxSmallSize = std::size_t{32} << 10;

// Every small block is at least this aligned (8-byte blocks: 8).
inline constexpr std::size_t kMinAlignment = 16;

// x86-64 user space: 48-bit addresses (47 with 4-level paging; the extra
// bit costs one more root word per 128 TiB and keeps 5-level kernels honest).
inline constexpr std::size_t kAddressBits = 48;

// The OS hands out memory in reservations of at least this many bytes,
// aligned to this size (one transparent huge page).
inline constexpr std::size_t kReservationBytes = std::size_t{2} << 20;

// A page number: address >> kPageShift. A strong type would cost nothing,
// but the radix tree and the page heap are the only users, both short.
using PageId = std::uintptr_t;

inline PageId page_of(const void* address) noexcept {
  return reinterpret_cast<std::uintptr_t>(address) >> kPageShift;
}
inline constexpr std::uintptr_t address_of(PageId page) noexcept { return page << kPageShift; }

}  // namespace strata::detail
