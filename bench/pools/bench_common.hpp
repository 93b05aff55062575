// Shared helpers of the pool benchmarks: the JSON line format of bench/
// (one object per line on stdout) with the row named by the program, and
// argument parsing. Clocks and median come from bench/common/bench_util.hpp.
#ifndef STRATA_BENCH_POOLS_COMMON_HPP
#define STRATA_BENCH_POOLS_COMMON_HPP

#include "../common/bench_util.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace bench {

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


// Keeps a value alive for the optimiser.
template <class T>
inline void keep(T const& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

}  // namespace bench

#endif
