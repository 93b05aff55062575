// strata/pmr_pool_options.hpp — block size classes shared by strata's pmr
// pool resources, and how they interpret std::pmr::pool_options.
//
// Pools serve power-of-two block sizes from 8 bytes to the largest pooled
// block. A request (bytes, alignment) goes to the class
// bit_ceil(max(bytes, alignment, 8)); blocks of class s sit at multiples of
// s in chunks aligned to s, so every block is aligned to its own size and
// therefore to any alignment the request asked for.
#ifndef STRATA_PMR_POOL_OPTIONS_HPP
#define STRATA_PMR_POOL_OPTIONS_HPP

#include <bit>
#include <cstddef>
#include <memory_resource>

namespace strata::pmr::detail_pmr {

inline constexpr std::size_t smallest_block = 8;
inline constexpr std::size_t smallest_block_shift = 3;
// Implementation limits (pool_options beyond them, or 0, mean the limit / default).
inline constexpr std::size_t largest_block_limit = std::size_t{1} << 20;   // 1 MiB
inline constexpr std::size_t default_largest_block = std::size_t{64} << 10;  // 64 KiB
inline constexpr std::size_t max_blocks_limit = std::size_t{1} << 16;
inline constexpr std::size_t class_count_limit = 18;  // 8 B .. 1 MiB

constexpr std::pmr::pool_options effective_options(std::pmr::pool_options o) noexcept {
  if (o.largest_required_pool_block == 0) o.largest_required_pool_block = default_largest_block;
  if (o.largest_required_pool_block > largest_block_limit) o.largest_required_pool_block = largest_block_limit;
  if (o.largest_required_pool_block < smallest_block) o.largest_required_pool_block = smallest_block;
  o.largest_required_pool_block = std::bit_ceil(o.largest_required_pool_block);
  if (o.max_blocks_per_chunk == 0 || o.max_blocks_per_chunk > max_blocks_limit)
    o.max_blocks_per_chunk = max_blocks_limit;
  return o;
}

constexpr std::size_t class_count(const std::pmr::pool_options& effective) noexcept {
  return static_cast<std::size_t>(std::countr_zero(effective.largest_required_pool_block)) - smallest_block_shift + 1;
}

// Class index of a request; valid when the result is < class_count.
constexpr std::size_t class_index(std::size_t bytes, std::size_t alignment) noexcept {
  std::size_t n = bytes > alignment ? bytes : alignment;
  if (n <= smallest_block) return 0;
  return static_cast<std::size_t>(std::bit_width(n - 1)) - smallest_block_shift;
}

constexpr std::size_t class_block_size(std::size_t index) noexcept { return smallest_block << index; }

}  // namespace strata::pmr::detail_pmr

#endif
