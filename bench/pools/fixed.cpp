// seed002_fixed: seed 002's fixed-size test. 1000 rounds: allocate 10,000
// blocks of 100 bytes, then free them all. Reports total seconds per run
// and ns per allocation+free pair.
//
// Rows: strata::object_pool (the seed's "FixedAlloc"), strata_malloc, and
// for comparison the concurrent pools used from one thread. The malloc rows
// of other allocators come from the benchmark suite's own program.
// Usage: pool_bench_fixed [--quick] [--reps N] [--rounds N] [--count N]
#include <strata/concurrent_pool.hpp>
#include <strata/object_pool.hpp>
#include <strata/strata.h>
#include <strata/thread_cached_pool.hpp>

#include "bench_common.hpp"

namespace {

struct block100 {
  char bytes[100];
};

template <class Alloc, class Free>
void run(const char* row, long reps, long rounds, long count, Alloc&& alloc, Free&& release) {
  std::vector<void*> ptrs(static_cast<std::size_t>(count));
  for (long rep = 0; rep < reps; ++rep) {
    std::uint64_t n0 = bench::now_ns();
    for (long r = 0; r < rounds; ++r) {
      for (long i = 0; i < count; ++i) ptrs[static_cast<std::size_t>(i)] = alloc();
      bench::keep(ptrs.data());
      for (long i = 0; i < count; ++i) release(ptrs[static_cast<std::size_t>(i)]);
      bench::keep(ptrs.data());
    }
    std::uint64_t n1 = bench::now_ns();
    const double seconds = static_cast<double>(n1 - n0) / 1e9;
    const double pairs = static_cast<double>(rounds) * static_cast<double>(count);
    std::string extra = ",\"rep\":" + std::to_string(rep) + ",\"rounds\":" + std::to_string(rounds) +
                        ",\"count\":" + std::to_string(count) + ",\"size\":100";
    bench::emit("seed002_fixed", row, "seconds", seconds, "s", extra);
    bench::emit("seed002_fixed", row, "ns_per_op", static_cast<double>(n1 - n0) / pairs, "ns", extra);
    std::fprintf(stderr, "%-40s rep %ld: %.4f s\n", row, rep, seconds);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long reps = bench::arg(argc, argv, "--reps", 3);
  const long rounds = bench::arg(argc, argv, "--rounds", bench::flag(argc, argv, "--quick") ? 200 : 1000);
  const long count = bench::arg(argc, argv, "--count", 10000);

  {
    strata::object_pool<block100> pool;
    run("strata::object_pool", reps, rounds, count, [&] { return static_cast<void*>(pool.allocate()); },
        [&](void* p) { pool.deallocate(static_cast<block100*>(p)); });
  }
  run("strata_malloc", reps, rounds, count, [] { return strata_malloc(100); }, [](void* p) { strata_free(p); });
  {
    strata::thread_cached_pool pool(100);
    run("strata::thread_cached_pool", reps, rounds, count, [&] { return pool.allocate(); },
        [&](void* p) { pool.deallocate(p); });
  }
  {
    strata::concurrent_pool<strata::lock_free_policy> pool(100);
    run("strata::concurrent_pool<lock_free>", reps, rounds, count, [&] { return pool.allocate(); },
        [&](void* p) { pool.deallocate(p); });
  }
}
