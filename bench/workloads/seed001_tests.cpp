// Seed 001 (Mini-TCMalloc): three tests against malloc.
//   st_random : 1 thread,  random sizes
//   mt_random : T threads, random sizes
//   mt_fixed  : T threads, one fixed size (the case where the seed's bucket
//               locks made it slower than malloc)
// Each thread runs `rounds` rounds of: malloc `ntimes` blocks, then free them
// all. Random sizes are uniform in [1, max-size] from a fixed-seed mt19937 per
// thread, drawn before the clock starts. Reported: wall seconds for all
// threads and nanoseconds per malloc+free pair (wall time / pairs per thread).
#include <atomic>
#include <random>

#include "../common/bench_util.hpp"

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"test", "threads", "rounds", "ntimes", "max-size", "fixed-size"});
  const std::string test = args.text("test", "mt_random");
  long threads = args.integer("threads", std::thread::hardware_concurrency());
  const long rounds = args.integer("rounds", 10);
  const long ntimes = args.integer("ntimes", 10000);
  const long max_size = args.integer("max-size", 8192);
  const long fixed_size = args.integer("fixed-size", 16);
  if (test != "st_random" && test != "mt_random" && test != "mt_fixed") {
    std::fprintf(stderr, "--test must be st_random, mt_random or mt_fixed\n");
    return 2;
  }
  if (test == "st_random") threads = 1;
  const bool random_sizes = test != "mt_fixed";

  bench::become_multithreaded();
  std::atomic<long> started{0};
  std::atomic<bool> go{false};
  std::atomic<long> peak_live{0};  // sum of every thread's bulk: they run in step
  std::vector<std::thread> workers;
  for (long w = 0; w < threads; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937 engine(static_cast<unsigned>(w + 1));
      std::uniform_int_distribution<long> dist(1, max_size);
      std::vector<std::size_t> sizes(static_cast<std::size_t>(ntimes));
      for (auto& s : sizes) s = static_cast<std::size_t>(random_sizes ? dist(engine) : fixed_size);
      std::vector<void*> blocks(sizes.size());
      long bytes = 0;
      for (auto s : sizes) bytes += static_cast<long>(s + sizeof(std::size_t) + sizeof(void*));
      peak_live.fetch_add(bytes);
      started.fetch_add(1);
      while (!go.load()) {
      }
      for (long r = 0; r < rounds; ++r) {
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          blocks[i] = std::malloc(sizes[i]);
          bench::escape(blocks[i]);
        }
        for (void* p : blocks) std::free(p);
      }
    });
  }
  while (started.load() < threads) {
  }
  std::uint64_t t0 = bench::now_ns();
  go.store(true);
  for (auto& t : workers) t.join();
  std::uint64_t t = bench::now_ns() - t0;

  bench::Params params = {{"test", bench::quoted(test)}, {"threads", std::to_string(threads)},
                          {"rounds", std::to_string(rounds)}, {"ntimes", std::to_string(ntimes)}};
  bench::emit("seed001_tests", "seconds", double(t) / 1e9, "s", params);
  bench::emit("seed001_tests", "ns_per_pair", double(t) / double(rounds * ntimes), "ns", params);
  bench::emit_peak_live("seed001_tests", double(peak_live.load()), params);
}
