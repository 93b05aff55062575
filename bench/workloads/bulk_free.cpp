// Bulk allocate, then bulk free (issue 10): where a thread frees far more
// blocks at once than a thread cache holds.
//
// Each thread allocates N blocks, then frees all of them, over and over, for
// N from 25 to 100,000. Modes:
//   own   : every thread frees its own blocks, in allocation order
//           ("in_order"), in reverse ("reverse") or in a random order
//           ("random", one shuffled permutation per N, drawn untimed);
//   cross : every thread allocates N blocks; barrier; every thread frees a
//           share of the OTHER threads' blocks (block i of thread u goes to
//           thread (u + 1 + i mod (T-1)) mod T, in allocation order, so with
//           2 threads they swap bulks); barrier. Every free is remote.
// --size is one block size, or 0 for mixed sizes (uniform 16..1024 B, drawn
// untimed, the same sequence every round). The first word of every block is
// written after its malloc.
//
// Every point (order, N) first runs one untimed round (first-touch page
// faults and warm-up), then about --pairs malloc+free pairs per thread in
// --chunks timed chunks of whole rounds, so that N = 25 is as well measured
// as N = 100,000; fewer rounds when the point would take longer than
// --point-ms (judged from the untimed round; at least one round per chunk).
// The median chunk is reported as ns per pair per thread (wall time of a
// chunk over the pairs one thread did in it; with T threads all start each
// chunk together and the chunk ends when the last finishes).
#include <random>

#include "../common/bench_util.hpp"

namespace {

enum class Order { in_order, reverse, random };

Order parse_order(const std::string& name) {
  if (name == "in_order") return Order::in_order;
  if (name == "reverse") return Order::reverse;
  if (name == "random") return Order::random;
  std::fprintf(stderr, "unknown order %s (in_order, reverse, random)\n", name.c_str());
  std::exit(2);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

struct Config {
  long threads;
  long size;  // 0: mixed
  long pairs;
  long chunks;
  bool cross;
};

// What one thread owns for one point: its blocks, their sizes and the order
// in which they are freed. Allocated before the clock starts.
struct Bulk {
  std::vector<void*> blocks;
  std::vector<std::uint32_t> sizes;
  std::vector<std::uint32_t> free_order;
};

__attribute__((noinline)) void allocate_all(Bulk& b, long n) {
  void** blocks = b.blocks.data();
  const std::uint32_t* sizes = b.sizes.data();
  for (long i = 0; i < n; ++i) {
    // The first word is written, as any program writes what it allocates:
    // without it an allocator that keeps no metadata in its blocks would
    // never fault their pages in, and its RSS would look unfairly small.
    void* p = std::malloc(sizes[i]);
    *static_cast<long*>(p) = i;
    blocks[i] = p;
  }
}

__attribute__((noinline)) void free_all(Bulk& b, long n) {
  void** blocks = b.blocks.data();
  const std::uint32_t* order = b.free_order.data();
  for (long i = 0; i < n; ++i) std::free(blocks[order[i]]);
}

// Frees this thread's share of every other thread's bulk (cross mode).
__attribute__((noinline)) void free_share(std::vector<Bulk>& bulks, long me, long threads, long n) {
  for (long u = 0; u < threads; ++u) {
    if (u == me) continue;
    // Which of u's T-1 shares is mine: I am thread (u + 1 + share) mod T.
    const long share = (me - u - 1 + threads) % threads;
    void** blocks = bulks[static_cast<std::size_t>(u)].blocks.data();
    for (long i = share; i < n; i += threads - 1) std::free(blocks[i]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv,
                   {"threads", "size", "orders", "counts", "pairs", "chunks", "mode", "seed", "point-ms"});
  Config config;
  config.threads = std::max(1L, args.integer("threads", 1));
  config.size = args.integer("size", 64);
  config.pairs = args.integer("pairs", 2000000);
  config.chunks = std::max(1L, args.integer("chunks", 5));
  const std::string mode = args.text("mode", "own");
  config.cross = mode == "cross";
  if (mode != "own" && mode != "cross") {
    std::fprintf(stderr, "--mode must be own or cross\n");
    return 2;
  }
  if (config.cross && config.threads < 2) {
    std::fprintf(stderr, "--mode cross needs --threads 2 or more\n");
    return 2;
  }
  const auto counts = args.integers("counts", {25, 100, 400, 1600, 6400, 25600, 100000});
  std::vector<Order> orders;
  std::vector<std::string> order_names = split(args.text("orders", config.cross ? "in_order" : "in_order,reverse,random"));
  for (auto& name : order_names) orders.push_back(parse_order(name));
  if (config.cross && (orders.size() != 1 || orders[0] != Order::in_order)) {
    std::fprintf(stderr, "--mode cross frees shares in allocation order only\n");
    return 2;
  }
  const long max_count = *std::max_element(counts.begin(), counts.end());
  const unsigned seed = static_cast<unsigned>(args.integer("seed", 7));
  const double point_ns = double(args.integer("point-ms", 300)) * 1e6;
  const std::string size_text = config.size == 0 ? "\"mixed\"" : std::to_string(config.size);

  bench::become_multithreaded();
  const long T = config.threads;
  std::vector<Bulk> bulks(static_cast<std::size_t>(T));
  bench::SpinBarrier barrier(T);
  // Per point: the chunk times measured by thread 0, written before the
  // closing barrier and read by main after the join.
  std::vector<std::vector<double>> chunk_ns(orders.size() * counts.size());
  // Rounds per chunk of every point, decided by thread 0 after the untimed
  // round and read by the others after the next barrier.
  std::vector<long> rounds_per_chunk(orders.size() * counts.size());
  double barrier_ns = 0;

  auto worker = [&](long me) {
    Bulk& mine = bulks[static_cast<std::size_t>(me)];
    std::mt19937 engine(seed + static_cast<unsigned>(me));
    std::uniform_int_distribution<std::uint32_t> mixed(16, 1024);
    mine.blocks.assign(static_cast<std::size_t>(max_count), nullptr);
    mine.sizes.resize(static_cast<std::size_t>(max_count));
    for (auto& s : mine.sizes) s = config.size == 0 ? mixed(engine) : static_cast<std::uint32_t>(config.size);
    mine.free_order.resize(static_cast<std::size_t>(max_count));

    if (config.cross) {  // what two barriers per round cost without any allocation
      const long rounds = 20000;
      barrier.wait();
      std::uint64_t t0 = bench::now_ns();
      for (long r = 0; r < rounds; ++r) {
        barrier.wait();
        barrier.wait();
      }
      if (me == 0) barrier_ns = double(bench::now_ns() - t0) / double(rounds);
    }
    for (std::size_t o = 0; o < orders.size(); ++o) {
      for (std::size_t k = 0; k < counts.size(); ++k) {
        const long n = counts[k];
        for (long i = 0; i < n; ++i) {
          const long at = orders[o] == Order::reverse ? n - 1 - i : i;
          mine.free_order[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(at);
        }
        if (orders[o] == Order::random)
          std::shuffle(mine.free_order.begin(), mine.free_order.begin() + n, engine);
        const std::size_t point = o * counts.size() + k;
        auto& times = chunk_ns[point];
        auto round = [&] {
          allocate_all(mine, n);
          if (config.cross) {
            barrier.wait();
            free_share(bulks, me, T, n);
            barrier.wait();
          } else {
            free_all(mine, n);
          }
        };
        barrier.wait();
        std::uint64_t t_warm = bench::now_ns();
        round();  // untimed: first touch of the memory, and the time budget
        barrier.wait();
        if (me == 0) {
          const double round_ns = std::max(1.0, double(bench::now_ns() - t_warm));
          const long wanted = std::max(1L, (config.pairs + n / 2) / n);
          const long affordable = static_cast<long>(point_ns / round_ns);
          rounds_per_chunk[point] =
              std::max(1L, (std::min(wanted, affordable) + config.chunks - 1) / config.chunks);
        }
        for (long chunk = 0; chunk < config.chunks; ++chunk) {
          barrier.wait();  // also publishes rounds_per_chunk[point]
          std::uint64_t t0 = bench::now_ns();
          for (long r = 0; r < rounds_per_chunk[point]; ++r) round();
          barrier.wait();
          if (me == 0) times.push_back(double(bench::now_ns() - t0));
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (long t = 1; t < T; ++t) threads.emplace_back(worker, t);
  worker(0);
  for (auto& t : threads) t.join();

  const std::string workload = config.cross ? "bulk_cross" : "bulk_free";
  for (std::size_t o = 0; o < orders.size(); ++o) {
    for (std::size_t k = 0; k < counts.size(); ++k) {
      const std::size_t point = o * counts.size() + k;
      const double pairs = double(rounds_per_chunk[point]) * double(counts[k]);
      bench::Params params = {{"order", bench::quoted(order_names[o])}, {"size", size_text},
                              {"threads", std::to_string(T)}, {"count", std::to_string(counts[k])},
                              {"rounds", std::to_string(rounds_per_chunk[point] * config.chunks)}};
      bench::emit(workload, "ns_per_pair", bench::median(chunk_ns[o * counts.size() + k]) / pairs, "ns",
                  params);
    }
  }
  if (config.cross) {
    bench::emit(workload, "barrier_ns_per_round", barrier_ns, "ns",
                {{"size", size_text}, {"threads", std::to_string(T)}});
  }
  // Peak live: T bulks of the largest N at once, plus the program's own arrays.
  double peak_live = 0;
  for (auto& b : bulks) {
    for (std::uint32_t s : b.sizes) peak_live += s;
    peak_live += double(max_count) * (sizeof(void*) + 2 * sizeof(std::uint32_t));
  }
  bench::emit_peak_live(workload, peak_live, {{"size", size_text}, {"threads", std::to_string(T)}});
}
