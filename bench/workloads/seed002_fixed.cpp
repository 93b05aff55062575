// Seed 002: 1000 rounds of (10,000 x malloc(100), then free them all); seconds.
//
// The seed compared FastMM (0.14 s), VC2008 malloc (3.854 s), a fixed-size
// pool (0.0806 s), and FastMM behind a critical section (0.71 s). --lock mutex
// wraps every malloc and every free in a std::mutex, as the seed's "behind a
// critical section" run did: it shows what an uncontended lock per call costs
// on top of each allocator.
#include <mutex>

#include "../common/bench_util.hpp"

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"rounds", "count", "size", "lock"});
  const long rounds = args.integer("rounds", 1000);
  const long count = args.integer("count", 10000);
  const long size = args.integer("size", 100);
  const std::string lock = args.text("lock", "none");
  if (lock != "none" && lock != "mutex") {
    std::fprintf(stderr, "--lock must be none or mutex\n");
    return 2;
  }
  const bool locked = lock == "mutex";

  bench::become_multithreaded();
  std::mutex mutex;
  std::vector<void*> blocks(static_cast<std::size_t>(count));
  void** slots = blocks.data();

  std::uint64_t t0 = bench::now_ns(), c0 = bench::cycles();
  for (long round = 0; round < rounds; ++round) {
    for (long i = 0; i < count; ++i) {
      if (locked) mutex.lock();
      slots[i] = std::malloc(static_cast<std::size_t>(size));
      if (locked) mutex.unlock();
      bench::escape(slots[i]);
    }
    for (long i = 0; i < count; ++i) {
      if (locked) mutex.lock();
      std::free(slots[i]);
      if (locked) mutex.unlock();
    }
  }
  std::uint64_t c = bench::cycles() - c0, t = bench::now_ns() - t0;
  double pairs = double(rounds) * double(count);
  bench::Params params = {{"lock", bench::quoted(lock)}, {"rounds", std::to_string(rounds)},
                          {"count", std::to_string(count)}, {"size", std::to_string(size)}};
  bench::emit("seed002_fixed", "seconds", double(t) / 1e9, "s", params);
  bench::emit("seed002_fixed", "cycles_per_pair", double(c) / pairs, "cycles", params);
  bench::emit("seed002_fixed", "ns_per_pair", double(t) / pairs, "ns", params);
  bench::emit_peak_live("seed002_fixed", double(count) * double(size + long(sizeof(void*))), params);
}
