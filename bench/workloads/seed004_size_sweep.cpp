// Seed 004: size sweep 8 B .. 2048 B (powers of two), T threads, each doing
// 10,000 malloc/free per size.
//
// Each thread allocates `ops` blocks of one size, then frees them, `rounds`
// times (the seed's "10,000 alloc/free per thread" is one round; extra rounds
// only make the short runs measurable on a noisy machine). All threads start
// together on a flag; wall time is the slowest thread's finish. bench/run
// divides glibc's time by each allocator's to get the seed's "speedup over
// malloc" (seed: 4.62x on average, 7.37x at best, 16 threads).
#include <atomic>

#include "../common/bench_util.hpp"

namespace {

double run_size(long threads, long ops, long rounds, std::size_t size) {
  std::atomic<long> started{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (long w = 0; w < threads; ++w) {
    workers.emplace_back([&] {
      std::vector<void*> blocks(static_cast<std::size_t>(ops));
      started.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      for (long r = 0; r < rounds; ++r) {
        for (auto& b : blocks) {
          b = std::malloc(size);
          bench::escape(b);
        }
        for (void* b : blocks) std::free(b);
      }
    });
  }
  while (started.load() < threads) std::this_thread::yield();
  std::uint64_t t0 = bench::now_ns();
  go.store(true);
  for (auto& t : workers) t.join();
  return double(bench::now_ns() - t0) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"threads", "ops", "rounds", "sizes"});
  const long threads = args.integer("threads", 16);
  const long ops = args.integer("ops", 10000);
  const long rounds = args.integer("rounds", 1);
  const auto sizes = args.integers("sizes", {8, 16, 32, 64, 128, 256, 512, 1024, 2048});

  bench::become_multithreaded();
  double peak_live = 0;
  for (long size : sizes) {
    peak_live = std::max(peak_live, double(threads) * double(ops) * double(size + long(sizeof(void*))));
    double seconds = run_size(threads, ops, rounds, static_cast<std::size_t>(size));
    double pairs = double(threads) * double(ops) * double(rounds);
    bench::Params params = {{"size", std::to_string(size)}, {"threads", std::to_string(threads)},
                            {"ops", std::to_string(ops)}, {"rounds", std::to_string(rounds)}};
    bench::emit("seed004_size_sweep", "seconds", seconds, "s", params);
    bench::emit("seed004_size_sweep", "mpairs_per_sec", pairs / seconds / 1e6, "Mpairs/s", params);
  }
  bench::emit_peak_live("seed004_size_sweep", peak_live, {{"threads", std::to_string(threads)}});
}
