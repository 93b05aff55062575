// Shared helpers of the pool benchmarks: cycle and wall clocks, the JSON
// line format of bench/ (one object per line on stdout), argument parsing.
#ifndef STRATA_BENCH_POOLS_COMMON_HPP
#define STRATA_BENCH_POOLS_COMMON_HPP

#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace bench {

inline std::uint64_t cycles() noexcept { return __rdtsc(); }

inline std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// --name value (integer), else the default.
inline long arg(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atol(argv[i + 1]);
  return fallback;
}

// True if the flag is present (e.g. --quick: bench/run's short mode).
inline bool flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return true;
  return false;
}

// --name value (string), else the default.
inline const char* arg_str(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

// One result line. `extra` is a pre-formatted list of ,"key":value pairs.
inline void emit(const char* workload, const std::string& allocator, const char* metric, double value,
                 const char* unit, const std::string& extra) {
  std::printf("{\"workload\":\"%s\",\"allocator\":\"%s\",\"metric\":\"%s\",\"value\":%.3f,\"unit\":\"%s\"%s}\n",
              workload, allocator.c_str(), metric, value, unit, extra.c_str());
  std::fflush(stdout);
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Keeps a value alive for the optimiser.
template <class T>
inline void keep(T const& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

}  // namespace bench

#endif
