// Shared helpers for the strata comparison benchmarks.
//
// Every workload program is a plain C++ program that calls malloc/new; the
// allocator under test is chosen from outside with LD_PRELOAD. Results go to
// stdout as one JSON object per line (see docs/benchmarks.md), human text to
// stderr. The row name comes from STRATA_BENCH_ALLOCATOR, which bench/run sets.
#pragma once

#include <fcntl.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
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

// The bytes the program had requested and not freed at its peak, by its own
// bookkeeping (docs/benchmarks.md, "Peak RSS over live bytes"): bench/run
// divides the process's peak RSS by it. Every workload prints it once, last.
inline void emit_peak_live(const std::string& workload, double bytes, const Params& params = {}) {
  emit(workload, "peak_live_bytes", bytes, "B", params);
}

// Resident set of this process in KiB, from /proc/self/statm. Reads into a
// stack buffer with open/read, so that a sampler thread calling it never
// allocates (an allocation would disturb the heap it measures).
inline long resident_kib() {
  int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return -1;
  text[n] = 0;
  char* p = text;
  std::strtol(p, &p, 10);  // total program size; the second field is resident
  long pages = std::strtol(p, nullptr, 10);
  return pages * (::sysconf(_SC_PAGESIZE) / 1024);
}

// A reusable barrier for a fixed number of threads that spins briefly and
// then yields: cheap when every thread has a core, and still makes progress
// when threads outnumber cores. It never allocates.
class SpinBarrier {
 public:
  explicit SpinBarrier(long count) : count_(count) {}
  void wait() {
    const long generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_) {
      arrived_.store(0, std::memory_order_relaxed);  // before the release below
      generation_.fetch_add(1, std::memory_order_release);
      return;
    }
    for (int spins = 0; generation_.load(std::memory_order_acquire) == generation; ++spins) {
      if (spins < 200) _mm_pause();
      else std::this_thread::yield();
    }
  }

 private:
  const long count_;
  alignas(64) std::atomic<long> arrived_{0};
  alignas(64) std::atomic<long> generation_{0};
};

}  // namespace bench
