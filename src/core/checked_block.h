// The layout of a block in checking mode (STRATA_CHECK=1), shared by the
// tiers that hand blocks out (api/checked.h) and take them back
// (frontend/misuse.h).
//
// A checked block carries, after the program's bytes, a canary (0xcb bytes,
// at least one) up to its last 8 bytes, which hold the requested size XOR a
// secret:
//
//   [ program's bytes | canary ... | size ^ secret ]
//
// The canary byte always sits right after the program's bytes: were the
// trailer there, a one-byte overrun that happened to write the trailer's own
// (secret-dependent) value would change nothing, and pass 1 time in 256.
//
// A free block is poisoned (0xdf over its first 256
// bytes); the poison is checked when the block is handed out again (a write
// after free).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/span.h"

namespace strata::detail {

inline constexpr std::size_t kCheckedTrailer = sizeof(std::uint64_t);
inline constexpr unsigned char kCheckedCanary = 0xcb;
// What a checked block adds to the requested size: one canary byte, the trailer.
inline constexpr std::size_t kCheckedOverhead = 1 + kCheckedTrailer;

// Bytes the block offers: the class size, or the whole large span.
std::size_t checked_block_usable(const Span* span) noexcept;

// The largest request a block of `usable` bytes holds (one canary byte and
// the trailer after it); a trailer that reads more was overwritten.
inline constexpr std::size_t max_checked_size(std::size_t usable) noexcept { return usable - kCheckedOverhead; }

// The trailer word: the requested size XOR the secret, written and read.
void write_checked_size(void* block, std::size_t usable, std::uint64_t size) noexcept;
std::uint64_t read_checked_size(const void* block, std::size_t usable) noexcept;

// Poison written over a free block, and its check (small blocks only).
void poison_block(void* block, std::size_t block_size) noexcept;
bool poison_intact(const void* block, std::size_t block_size) noexcept;

}  // namespace strata::detail
