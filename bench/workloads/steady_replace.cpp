// A steady live set, replaced at random: the loop of Larson & Krishnan's
// benchmark, without its thread churn (server_larson and thread_churn have
// that).
//
// Each thread holds N blocks of random sizes (uniform in [--min, --max],
// larson's 8-1000 B by default) and repeats one operation: free the block in
// a random slot, malloc a block of a new random size in its place, and write
// its first two bytes (larson writes two). Nothing is freed in bursts and no
// block leaves its thread: every free and malloc is of the thread's own
// steady state, with its N blocks spread over many spans of many classes.
// Points: N from 1,000 (everything in L1/L2) to 100,000 (tens of MiB).
// Every point first replaces each block once, untimed (the heap reaches its
// steady state; first touch of the memory), then runs --ops operations per
// thread in --chunks timed chunks; reported: the median chunk as ns per
// operation (one free + one malloc) per thread, the wall time of a chunk
// over the operations one thread did in it (threads start each chunk
// together).
#include <random>

#include "../common/bench_util.hpp"

namespace {

struct Slots {
  std::vector<char*> blocks;
  std::vector<std::uint32_t> sizes;  // the program's bookkeeping, beside the pointers
};

// Victims and sizes come from a generator cheap enough not to hide the
// allocator (xorshift: a few instructions, no memory).
struct Xorshift {
  std::uint64_t state;
  std::uint64_t next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
};

// `ops` operations on the first `n` slots: free a random slot's block, malloc
// one of a new random size in its place, write its first two bytes.
__attribute__((noinline)) void replace(Slots& slots, long n, long ops, Xorshift& random, std::uint32_t min_size,
                                       std::uint32_t size_range) {
  char** blocks = slots.blocks.data();
  std::uint32_t* sizes = slots.sizes.data();
  for (long op = 0; op < ops; ++op) {
    const std::uint64_t r = random.next();
    const std::size_t victim = static_cast<std::size_t>((r >> 32) % static_cast<std::uint64_t>(n));
    const std::uint32_t size = min_size + static_cast<std::uint32_t>(r & 0xffffffffu) % size_range;
    std::free(blocks[victim]);
    volatile char* p = static_cast<volatile char*>(std::malloc(size));
    p[0] = 'a';
    p[1] = 'b';
    blocks[victim] = const_cast<char*>(p);
    sizes[victim] = size;
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"threads", "counts", "ops", "chunks", "min", "max", "seed"});
  const long T = std::max(1L, args.integer("threads", 1));
  const auto counts = args.integers("counts", {1000, 5000, 20000, 100000});
  const long ops = std::max(1L, args.integer("ops", 2000000));
  const long chunks = std::max(1L, args.integer("chunks", 5));
  const auto min_size = static_cast<std::uint32_t>(std::max(2L, args.integer("min", 8)));
  const auto max_size = static_cast<std::uint32_t>(std::max(long(min_size), args.integer("max", 1000)));
  const std::uint32_t size_range = max_size - min_size + 1;
  const auto seed = static_cast<std::uint64_t>(args.integer("seed", 4141));

  bench::become_multithreaded();
  bench::SpinBarrier barrier(T);
  std::vector<std::vector<double>> chunk_ns(counts.size());  // thread 0's, read after the join
  std::vector<double> peak_live(static_cast<std::size_t>(T), 0);

  auto worker = [&](long me) {
    Slots slots;
    Xorshift random{0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(seed + me + 1)};
    for (std::size_t k = 0; k < counts.size(); ++k) {
      const long n = counts[k];
      slots.blocks.assign(static_cast<std::size_t>(n), nullptr);
      slots.sizes.assign(static_cast<std::size_t>(n), 0);
      for (long i = 0; i < n; ++i) {
        const std::uint32_t size = min_size + static_cast<std::uint32_t>(random.next() & 0xffffffffu) % size_range;
        slots.blocks[static_cast<std::size_t>(i)] = static_cast<char*>(std::malloc(size));
        slots.blocks[static_cast<std::size_t>(i)][0] = 1;
        slots.sizes[static_cast<std::size_t>(i)] = size;
      }
      replace(slots, n, n, random, min_size, size_range);  // untimed: every block replaced once
      for (long chunk = 0; chunk < chunks; ++chunk) {
        barrier.wait();
        std::uint64_t t0 = bench::now_ns();
        replace(slots, n, (ops + chunks - 1) / chunks, random, min_size, size_range);
        barrier.wait();
        if (me == 0) chunk_ns[k].push_back(double(bench::now_ns() - t0));
      }
      // Live bytes at the end of the point, the peak's order (sizes are drawn
      // from one distribution, so the live set hardly moves).
      double live = 0;
      for (std::uint32_t s : slots.sizes) live += s;
      peak_live[static_cast<std::size_t>(me)] =
          std::max(peak_live[static_cast<std::size_t>(me)], live + double(n) * (sizeof(char*) + sizeof(std::uint32_t)));
      for (char* p : slots.blocks) std::free(p);
    }
  };
  std::vector<std::thread> threads;
  for (long t = 1; t < T; ++t) threads.emplace_back(worker, t);
  worker(0);
  for (auto& t : threads) t.join();

  const double per_chunk = double((ops + chunks - 1) / chunks);
  for (std::size_t k = 0; k < counts.size(); ++k) {
    bench::emit("steady_replace", "ns_per_op", bench::median(chunk_ns[k]) / per_chunk, "ns",
                {{"threads", std::to_string(T)}, {"count", std::to_string(counts[k])},
                 {"min", std::to_string(min_size)}, {"max", std::to_string(max_size)}});
  }
  double live = 0;
  for (double l : peak_live) live += l;
  bench::emit_peak_live("steady_replace", live, {{"threads", std::to_string(T)}});
}
