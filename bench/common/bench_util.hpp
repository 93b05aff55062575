// Shared helpers for the strata comparison benchmarks.
//
// Every workload program is a plain C++ program that calls malloc/new; the
// allocator under test is chosen from outside with LD_PRELOAD. Results go to
// stdout as one JSON object per line (see docs/benchmarks.md), human text to
// stderr. The row name comes from STRATA_BENCH_ALLOCATOR, which bench/run sets.
#pragma once

#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace bench {

inline std::uint64_t cycles() { return __rdtsc(); }

inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// Hides a value from the optimiser so that a malloc/free pair cannot be
// folded away (GCC removes unused malloc+free pairs at -O2).
template <class T>
inline void escape(T& value) {
  asm volatile("" : "+r"(value) : : "memory");
}

// --name value or --name=value; anything else is an error so that a typo
// never silently runs the default.
class Args {
 public:
  Args(int argc, char** argv, std::vector<std::string> known) {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg.rfind("--", 0) != 0) fail("unexpected argument " + arg, known);
      arg = arg.substr(2);
      std::string value;
      if (auto eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      } else if (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0) {
        value = argv[++i];
      } else {
        value = "1";  // a bare flag
      }
      if (std::find(known.begin(), known.end(), arg) == known.end())
        fail("unknown option --" + arg, known);
      values_[arg] = value;
    }
  }
  long integer(const std::string& name, long fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : std::strtol(it->second.c_str(), nullptr, 10);
  }
  std::string text(const std::string& name, const std::string& fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  std::vector<long> integers(const std::string& name, const std::vector<long>& fallback) const {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    std::vector<long> out;
    const char* p = it->second.c_str();
    while (*p) {
      char* end = nullptr;
      out.push_back(std::strtol(p, &end, 10));
      p = (*end == ',') ? end + 1 : end;
      if (end == p && *p) break;
    }
    return out;
  }

 private:
  [[noreturn]] static void fail(const std::string& why, const std::vector<std::string>& known) {
    std::fprintf(stderr, "error: %s\nknown options:", why.c_str());
    for (auto& k : known) std::fprintf(stderr, " --%s", k.c_str());
    std::fprintf(stderr, "\n");
    std::exit(2);
  }
  std::map<std::string, std::string> values_;
};

inline std::string allocator_name() {
  if (const char* name = std::getenv("STRATA_BENCH_ALLOCATOR"); name && *name) return name;
  const char* preload = std::getenv("LD_PRELOAD");
  return (preload && *preload) ? preload : "glibc";
}

// One result line: {"workload":..,"allocator":..,"metric":..,"value":..,"unit":..,extra...}.
// Extra parameters are given as (key, already-JSON-encoded value).
using Params = std::vector<std::pair<std::string, std::string>>;

inline std::string quoted(const std::string& s) { return "\"" + s + "\""; }

inline void emit(const std::string& workload, const std::string& metric, double value,
                 const std::string& unit, const Params& params = {}) {
  std::string line = "{\"workload\":" + quoted(workload) + ",\"allocator\":" +
                     quoted(allocator_name()) + ",\"metric\":" + quoted(metric);
  char number[64];
  std::snprintf(number, sizeof number, "%.6g", value);
  line += std::string(",\"value\":") + number + ",\"unit\":" + quoted(unit);
  for (auto& [key, json] : params) line += ",\"" + key + "\":" + json;
  line += "}\n";
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// glibc switches to its thread-safe (slower) paths once a second thread has
// existed; the seeds started and joined a thread first so that every
// allocator is measured in the multi-threaded state a real program is in.
inline void become_multithreaded() { std::thread([] {}).join(); }

}  // namespace bench
