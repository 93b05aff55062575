// Small bursts, written byte by byte (issue 10).
//
// For each block size (16, 32, 64 B) and burst length (25, 100, 400, 1600
// blocks): malloc the burst, writing every byte of each block one byte at a
// time right after its malloc (volatile stores, so the compiler cannot turn
// them into one wide store), then free the first half in allocation order
// and the second half in reverse order. The pointer array lives on the
// running thread's stack. The whole sweep runs in the main thread, then in a
// second thread, then in the main thread again (the second thread starts
// with an empty cache; the main thread comes back to a heap the other thread
// has used). Each point repeats the burst until it has done about --pairs
// malloc+free pairs, timed in --chunks chunks (median reported): ns per pair.
#include "../common/bench_util.hpp"

namespace {

constexpr long kMaxBurst = 1600;

__attribute__((noinline)) void burst(void** slots, long count, std::size_t size) {
  for (long i = 0; i < count; ++i) {
    volatile char* p = static_cast<volatile char*>(std::malloc(size));
    for (std::size_t b = 0; b < size; ++b) p[b] = static_cast<char>(b);
    slots[i] = const_cast<char*>(p);
  }
  const long half = count / 2;
  for (long i = 0; i < half; ++i) std::free(slots[i]);
  for (long i = count - 1; i >= half; --i) std::free(slots[i]);
}

struct Point {
  std::string phase;
  long size, count;
  double ns_per_pair;
};

void sweep(const char* phase, const std::vector<long>& sizes, const std::vector<long>& counts, long pairs,
           long chunks, std::vector<Point>& out) {
  void* slots[kMaxBurst];
  for (long size : sizes) {
    for (long count : counts) {
      const long rounds = std::max(1L, pairs / count / chunks);
      std::vector<double> times;
      times.reserve(static_cast<std::size_t>(chunks));
      for (long c = 0; c < chunks; ++c) {
        std::uint64_t t0 = bench::now_ns();
        for (long r = 0; r < rounds; ++r) burst(slots, count, static_cast<std::size_t>(size));
        times.push_back(double(bench::now_ns() - t0) / double(rounds * count));
      }
      out.push_back({phase, size, count, bench::median(times)});
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"sizes", "counts", "pairs", "chunks"});
  const auto sizes = args.integers("sizes", {16, 32, 64});
  auto counts = args.integers("counts", {25, 100, 400, 1600});
  const long pairs = args.integer("pairs", 1000000);
  const long chunks = std::max(1L, args.integer("chunks", 3));
  for (long& c : counts) c = std::min(std::max(c, 2L), kMaxBurst);

  std::vector<Point> points;
  points.reserve(3 * sizes.size() * counts.size());
  sweep("main", sizes, counts, pairs, chunks, points);
  std::thread([&] { sweep("thread", sizes, counts, pairs, chunks, points); }).join();
  sweep("main_again", sizes, counts, pairs, chunks, points);

  for (const Point& p : points) {
    bench::emit("small_burst", "ns_per_pair", p.ns_per_pair, "ns",
                {{"phase", bench::quoted(p.phase)}, {"size", std::to_string(p.size)},
                 {"count", std::to_string(p.count)}});
  }
  const long max_size = *std::max_element(sizes.begin(), sizes.end());
  const long max_count = *std::max_element(counts.begin(), counts.end());
  bench::emit_peak_live("small_burst", double(max_size * max_count));
}
