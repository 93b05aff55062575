// Shared pieces of the stress programs: the allocator surface, the block
// pattern, a fast random generator, command-line options and failure reports.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#ifdef STRATA_STRESS_LIBC
#include <malloc.h>
#else
#include <strata/strata.h>
#endif

namespace stress {

// The surface under test: strata_* (beside the system malloc, sanitizer
// friendly) or the libc names (program linked with libstrata.a).
#ifdef STRATA_STRESS_LIBC
inline const char* surface_name() { return "libc-override"; }
inline void* allocate(std::size_t n) { return std::malloc(n); }
inline void* allocate_zeroed(std::size_t count, std::size_t n) { return std::calloc(count, n); }
inline void* allocate_aligned(std::size_t a, std::size_t n) { return aligned_alloc(a, n); }
inline void* reallocate(void* p, std::size_t n) { return std::realloc(p, n); }
inline void release(void* p) { std::free(p); }
inline std::size_t usable_size(void* p) { return malloc_usable_size(p); }
#else
inline const char* surface_name() { return "strata-c-api"; }
inline void* allocate(std::size_t n) { return strata_malloc(n); }
inline void* allocate_zeroed(std::size_t count, std::size_t n) { return strata_calloc(count, n); }
inline void* allocate_aligned(std::size_t a, std::size_t n) { return strata_aligned_alloc(a, n); }
inline void* reallocate(void* p, std::size_t n) { return strata_realloc(p, n); }
inline void release(void* p) { strata_free(p); }
inline std::size_t usable_size(void* p) { return strata_usable_size(p); }
#endif

[[noreturn]] inline void fail(const char* what, const void* p, std::size_t n, std::size_t at = 0) {
  std::fprintf(stderr, "STRESS FAILURE: %s (block %p, size %zu, offset %zu)\n", what, p, n, at);
  std::fflush(stderr);
  std::abort();
}

// The pattern of a block depends on its address and size, so a block that
// overlaps another, or is handed out twice, or is scribbled on, shows up.
inline std::uint64_t pattern_seed(const void* p, std::size_t n) {
  std::uint64_t x = reinterpret_cast<std::uintptr_t>(p) * 0x9E3779B97F4A7C15ull;
  return x ^ (n * 0xC2B2AE3D27D4EB4Full) ^ (x >> 29);
}
inline std::uint64_t pattern_word(std::uint64_t seed, std::size_t k) { return seed + k * 0x2545F4914F6CDD1Dull; }

// Fills `len` bytes at `p` with the pattern of a block (seed_p, seed_n).
inline void fill(void* p, std::size_t len, const void* seed_p, std::size_t seed_n) {
  const std::uint64_t seed = pattern_seed(seed_p, seed_n);
  auto* b = static_cast<unsigned char*>(p);
  std::size_t k = 0;
  for (; (k + 1) * 8 <= len; ++k) {
    std::uint64_t w = pattern_word(seed, k);
    std::memcpy(b + k * 8, &w, 8);
  }
  std::uint64_t w = pattern_word(seed, k);
  std::memcpy(b + k * 8, &w, len - k * 8);
}
inline void fill(void* p, std::size_t n) { fill(p, n, p, n); }

// Checks `len` bytes at `p` against the pattern of block (seed_p, seed_n).
inline void check(const void* p, std::size_t len, const void* seed_p, std::size_t seed_n) {
  const std::uint64_t seed = pattern_seed(seed_p, seed_n);
  auto* b = static_cast<const unsigned char*>(p);
  std::size_t k = 0;
  for (; (k + 1) * 8 <= len; ++k) {
    std::uint64_t w = pattern_word(seed, k), got;
    std::memcpy(&got, b + k * 8, 8);
    if (got != w) fail("pattern mismatch", p, len, k * 8);
  }
  std::uint64_t w = pattern_word(seed, k), got = 0;
  std::memcpy(&got, b + k * 8, len - k * 8);
  if (std::memcmp(&got, &w, len - k * 8) != 0) fail("pattern mismatch in tail", p, len, k * 8);
}
inline void check(const void* p, std::size_t n) { check(p, n, p, n); }

inline void check_zero(const void* p, std::size_t n) {
  auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] != 0) fail("calloc block not zero", p, n, i);
}

inline void check_alignment(const void* p, std::size_t n, std::size_t alignment) {
  if (reinterpret_cast<std::uintptr_t>(p) % alignment != 0) fail("misaligned block", p, n, alignment);
}

// Blocks of 16 bytes or more are 16-aligned; the allocator promises it.
inline void check_natural_alignment(const void* p, std::size_t n) {
  check_alignment(p, n, n >= 16 ? 16 : 8);
}

class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  bool percent(unsigned p) { return below(100) < p; }
  // Mostly small blocks, some medium, a few large ones past the 256 KiB limit.
  std::size_t block_size() {
    unsigned r = static_cast<unsigned>(below(1000));
    if (r < 700) return below(257);
    if (r < 960) return 257 + below(32 * 1024);
    if (r < 995) return 32 * 1024 + below(256 * 1024);
    return 256 * 1024 + below(1024 * 1024);
  }

 private:
  std::uint64_t state_;
};

// --seconds=S --threads=T (and program-specific ones) from argv.
struct Options {
  double seconds = 3.0;
  int threads = 16;
  std::uint64_t seed = 1;
  int max_alignment_log2 = 16;  // aligned allocations up to 64 KiB

  static Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--seconds=", 0) == 0) o.seconds = std::atof(a.c_str() + 10);
      else if (a.rfind("--threads=", 0) == 0) o.threads = std::atoi(a.c_str() + 10);
      else if (a.rfind("--seed=", 0) == 0) o.seed = std::strtoull(a.c_str() + 7, nullptr, 10);
      else if (a.rfind("--max-alignment-log2=", 0) == 0) o.max_alignment_log2 = std::atoi(a.c_str() + 21);
      else {
        std::fprintf(stderr, "usage: %s [--seconds=S] [--threads=T] [--seed=N] [--max-alignment-log2=K]\n",
                     argv[0]);
        std::exit(2);
      }
    }
    return o;
  }
};

using Clock = std::chrono::steady_clock;

inline Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Counters printed at the end so a run tells how much it really did.
struct Totals {
  std::atomic<std::uint64_t> operations{0};
  std::atomic<std::uint64_t> bytes_checked{0};
  void add(std::uint64_t ops, std::uint64_t bytes) {
    operations.fetch_add(ops, std::memory_order_relaxed);
    bytes_checked.fetch_add(bytes, std::memory_order_relaxed);
  }
  void print(const char* program, const Options& o, double elapsed) const {
    std::fprintf(stderr, "%s [%s]: %d threads, %.1f s, %llu operations, %llu bytes verified: OK\n", program,
                 surface_name(), o.threads, elapsed, static_cast<unsigned long long>(operations.load()),
                 static_cast<unsigned long long>(bytes_checked.load()));
  }
};

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace stress
