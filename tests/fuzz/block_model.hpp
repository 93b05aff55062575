// The model the fuzzer checks the allocator against: for every live block its
// request, alignment, usable size and contents; and the set of address ranges
// in use, so that two live blocks can never overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace strata_fuzz {

[[noreturn]] inline void model_violation(const char* what, const void* p, std::size_t size, std::size_t detail) {
  std::fprintf(stderr, "MODEL VIOLATION: %s (block %p, size %zu, detail %zu)\n", what, p, size, detail);
  std::fflush(stderr);
  std::abort();
}

struct Block {
  unsigned char* p = nullptr;
  std::size_t size = 0;       // requested bytes
  std::size_t usable = 0;     // what strata_usable_size said at allocation
  std::size_t alignment = 0;  // requested alignment (0: none)
  std::uint64_t seed = 0;     // contents: see content_word
  int pool = -1;              // -1: from the strata_* API; else the pmr resource index
};

// Contents: 64-bit words derived from the block's seed and the word index,
// written over every byte of the block. Checks compare whole words; blocks
// over 64 KiB are checked on their first and last 4 KiB and a stride between.
constexpr std::size_t kFullCheckLimit = 64 * 1024;

inline std::uint64_t content_word(std::uint64_t seed, std::size_t k) {
  return (seed * 0x9E3779B97F4A7C15ull) ^ (k * 0xD6E8FEB86659FD93ull) ^ (k >> 7);
}
inline unsigned char content_byte(std::uint64_t seed, std::size_t i) {
  return static_cast<unsigned char>(content_word(seed, i / 8) >> (8 * (i % 8)));
}

inline void fill_contents(Block& b) {
  std::size_t words = b.size / 8;
  for (std::size_t k = 0; k < words; ++k) {
    std::uint64_t w = content_word(b.seed, k);
    std::memcpy(b.p + 8 * k, &w, 8);
  }
  for (std::size_t i = words * 8; i < b.size; ++i) b.p[i] = content_byte(b.seed, i);
}

// Checks bytes [from, to) of the block, word by word where it can.
inline void check_range(const Block& b, std::size_t from, std::size_t to, const char* when) {
  std::size_t i = from;
  for (; i < to && i % 8; ++i)
    if (b.p[i] != content_byte(b.seed, i)) model_violation(when, b.p, b.size, i);
  for (; i + 8 <= to; i += 8) {
    std::uint64_t got;
    std::memcpy(&got, b.p + i, 8);
    if (got != content_word(b.seed, i / 8)) model_violation(when, b.p, b.size, i);
  }
  for (; i < to; ++i)
    if (b.p[i] != content_byte(b.seed, i)) model_violation(when, b.p, b.size, i);
}

// Checks the first `len` bytes against the block's seed.
inline void check_contents(const Block& b, std::size_t len, const char* when) {
  if (len <= kFullCheckLimit) {
    check_range(b, 0, len, when);
    return;
  }
  check_range(b, 0, 4096, when);
  for (std::size_t i = 4096; i + 64 < len - 4096; i += 4093) check_range(b, i, i + 64, when);
  check_range(b, len - 4096, len, when);
}

inline bool is_power_of_two(std::size_t x) { return x && !(x & (x - 1)); }

// Every placement promise of strata.h, for a block that was just returned.
inline void check_placement(const Block& b) {
  auto address = reinterpret_cast<std::uintptr_t>(b.p);
  if (b.usable < b.size) model_violation("usable size below the request", b.p, b.size, b.usable);
  if (b.alignment && address % b.alignment) model_violation("requested alignment not honoured", b.p, b.size, b.alignment);
  if (b.size >= 16 && address % 16) model_violation("block of 16+ bytes not 16-aligned", b.p, b.size, address % 16);
  if (address % 8) model_violation("block not 8-aligned", b.p, b.size, address % 8);
  if (is_power_of_two(b.usable) && b.usable <= 8192 && address % b.usable)
    model_violation("power-of-two usable size not aligned to itself", b.p, b.size, b.usable);
}

// A pool block has no usable size beyond its request: only its alignment.
inline void check_pool_placement(const Block& b) {
  if (b.alignment && reinterpret_cast<std::uintptr_t>(b.p) % b.alignment)
    model_violation("pool block not aligned as requested", b.p, b.size, b.alignment);
}

// Address ranges [p, p + usable) of all live blocks (pool blocks: [p, p + size)).
class LiveRanges {
 public:
  void insert(const Block& b) {
    auto start = reinterpret_cast<std::uintptr_t>(b.p);
    std::uintptr_t end = start + (b.usable ? b.usable : 1);
    auto next = ranges_.lower_bound(start);
    if (next != ranges_.end() && next->first < end)
      model_violation("block overlaps a live block after it", b.p, b.size, next->first - start);
    if (next != ranges_.begin()) {
      auto prev = std::prev(next);
      if (prev->second > start) model_violation("block overlaps a live block before it", b.p, b.size, start - prev->first);
    }
    ranges_.emplace(start, end);
  }
  void erase(const Block& b) {
    if (ranges_.erase(reinterpret_cast<std::uintptr_t>(b.p)) != 1)
      model_violation("model lost track of a block", b.p, b.size, 0);
  }
  bool empty() const { return ranges_.empty(); }

 private:
  std::map<std::uintptr_t, std::uintptr_t> ranges_;
};

}  // namespace strata_fuzz
