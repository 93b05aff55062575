// Checking mode (STRATA_CHECK=1): every malloc and free takes a checked slow
// path that catches misuse and aborts with a clear message.
//
// A checked block carries, after the program's bytes, a canary (0xcb bytes)
// up to its last 8 bytes, which hold the requested size XOR a secret:
//
//   [ program's bytes | canary ... | size ^ secret ]
//
// free checks the trailer and the canary (a write past the end), whether the
// block is already free (double free: the poison below, then a scan of the
// span's free list and the thread's outbox), and whether the pointer is one
// strata returned (page map, block boundary). A freed block is poisoned
// (0xdf after its link word, up to 256 bytes) and the poison is checked when
// the block is handed out again (a write after free).
//
// The fast paths pay nothing for this: in checking mode the thread caches'
// lists stay empty and the fast size limit is 0, so every call falls into a
// slow path that looks at g_options.check.
#pragma once

#include <cstddef>

namespace strata::detail {

struct Span;

// True while checking mode is on and the caller is not the checked
// allocator's own inner allocation.
bool checking() noexcept;

void* checked_allocate(std::size_t alignment, std::size_t size) noexcept;
void* checked_allocate_zeroed(std::size_t count, std::size_t size) noexcept;
void* checked_reallocate(void* block, std::size_t size) noexcept;
// Checks a free of a well-formed block of `span`; aborts on misuse.
void checked_release(void* block, Span* span) noexcept;
std::size_t checked_usable_size(const void* block) noexcept;

// Poison written over a free block, and its check (small blocks only).
void poison_block(void* block, std::size_t block_size) noexcept;
bool poison_intact(const void* block, std::size_t block_size) noexcept;

}  // namespace strata::detail
