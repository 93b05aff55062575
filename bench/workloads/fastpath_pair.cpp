// The malloc+free fast path: one pair, 32-byte blocks by default.
//
// Two patterns:
//   immediate : p = malloc(32); free(p);            (the tightest possible pair)
//   batch100  : 100 x malloc(32), then 100 x free    (the thread cache's list
//               is walked 100 deep and refilled/flushed as it would be in use)
// Timed mode prints cycles and ns per pair. bench/run also runs this program
// under `valgrind --tool=callgrind` at two iteration counts, with and without
// --baseline (the same loop minus the malloc/free calls), and takes
//   instructions per pair = (dIr(real) - dIr(baseline)) / dIterations
// so that start-up, exit and loop overhead all cancel.
#include "../common/bench_util.hpp"

namespace {

// Kept out of line so the real and baseline loops compile to the same shape.
__attribute__((noinline)) void immediate(long iters, std::size_t size, bool baseline) {
  for (long i = 0; i < iters; ++i) {
    void* p = baseline ? reinterpret_cast<void*>(i) : std::malloc(size);
    bench::escape(p);
    if (!baseline) std::free(p);
  }
}

__attribute__((noinline)) void batch100(long iters, std::size_t size, bool baseline) {
  void* blocks[100];
  for (long i = 0; i < iters; ++i) {
    for (int j = 0; j < 100; ++j) {
      blocks[j] = baseline ? reinterpret_cast<void*>(j) : std::malloc(size);
      bench::escape(blocks[j]);
    }
    for (int j = 0; j < 100; ++j) {
      void* p = blocks[j];
      bench::escape(p);
      if (!baseline) std::free(p);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"pattern", "iters", "size", "baseline", "quiet"});
  const std::string pattern = args.text("pattern", "immediate");
  const long iters = args.integer("iters", 10000000);
  const std::size_t size = static_cast<std::size_t>(args.integer("size", 32));
  const bool baseline = args.integer("baseline", 0) != 0;
  if (pattern != "immediate" && pattern != "batch100") {
    std::fprintf(stderr, "--pattern must be immediate or batch100\n");
    return 2;
  }
  const bool batched = pattern == "batch100";
  auto run = [&](long n) { batched ? batch100(n, size, baseline) : immediate(n, size, baseline); };

  bench::become_multithreaded();
  run(1000);  // warm up: first-touch of the thread cache and size class
  std::uint64_t t0 = bench::now_ns(), c0 = bench::cycles();
  run(iters);
  std::uint64_t c = bench::cycles() - c0, t = bench::now_ns() - t0;
  if (args.integer("quiet", 0)) return 0;  // callgrind runs: counts come from valgrind
  double pairs = double(iters) * (batched ? 100.0 : 1.0);
  bench::Params params = {{"pattern", bench::quoted(pattern)}, {"size", std::to_string(size)}};
  bench::emit("fastpath_pair", "cycles_per_pair", double(c) / pairs, "cycles", params);
  bench::emit("fastpath_pair", "ns_per_pair", double(t) / pairs, "ns", params);
  bench::emit_peak_live("fastpath_pair", double(size) * (batched ? 100.0 : 1.0), params);
}
