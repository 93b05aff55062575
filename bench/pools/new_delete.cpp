// seed000_new_delete: seed 000's class-specific new/delete test. An empty
// class; 1000 loops of 5000 `new` then 5000 `delete`; a thread is started
// and joined first (glibc is slower once a process has had two threads).
// Reports cycles (rdtsc) and ns per new+delete pair.
//
// Rows: "global operator new" (the process's malloc, glibc unless the runner
// preloads another) and "strata::pooled".
// Usage: pool_bench_new_delete [--quick] [--reps N] [--loops N] [--count N] [--rows normal|pooled|both]
#include <strata/pooled.hpp>

#include "bench_common.hpp"

#include <thread>

namespace {

class Obj {};
class PooledObj : public strata::pooled<PooledObj> {};

template <class T>
void run(const char* row, long reps, long loops, long count) {
  std::vector<T*> ptrs(static_cast<std::size_t>(count));
  for (long rep = 0; rep < reps; ++rep) {
    std::uint64_t n0 = bench::now_ns();
    std::uint64_t t0 = bench::cycles();
    for (long loop = 0; loop < loops; ++loop) {
      for (long i = 0; i < count; ++i) ptrs[static_cast<std::size_t>(i)] = new T;
      bench::keep(ptrs.data());
      for (long i = 0; i < count; ++i) delete ptrs[static_cast<std::size_t>(i)];
      bench::keep(ptrs.data());
    }
    std::uint64_t t1 = bench::cycles();
    std::uint64_t n1 = bench::now_ns();
    const double ops = static_cast<double>(loops) * static_cast<double>(count);
    std::string extra = ",\"rep\":" + std::to_string(rep) + ",\"loops\":" + std::to_string(loops) +
                        ",\"count\":" + std::to_string(count);
    const double cyc = static_cast<double>(t1 - t0) / ops;
    bench::emit("seed000_new_delete", row, "cycles_per_op", cyc, "cycles", extra);
    bench::emit("seed000_new_delete", row, "ns_per_op", static_cast<double>(n1 - n0) / ops, "ns", extra);
    std::fprintf(stderr, "%-22s rep %ld: %6.2f cycles per new+delete\n", row, rep, cyc);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long reps = bench::arg(argc, argv, "--reps", 5);
  const long loops = bench::arg(argc, argv, "--loops", bench::flag(argc, argv, "--quick") ? 200 : 1000);
  const long count = bench::arg(argc, argv, "--count", 5000);
  const std::string rows = bench::arg_str(argc, argv, "--rows", "both");
  std::thread([] {}).join();
  if (rows != "pooled") run<Obj>("global operator new", reps, loops, count);
  if (rows != "normal") run<PooledObj>("strata::pooled", reps, loops, count);
}
