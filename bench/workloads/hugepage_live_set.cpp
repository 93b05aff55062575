// A large live set read at random: where huge pages pay (issue 5).
//
// The program allocates --mib MiB (512 by default) in blocks of mixed sizes
// (60% 16-256 B, 30% 257 B-2 KiB, 10% 2-16 KiB) and writes every byte, as a
// cache or an in-memory index fills up. It then replaces a random half of the
// blocks with new ones of new sizes (the heap is not a fresh bump region any
// more), links all blocks into one random cycle (each block's first word
// points to the next) and chases that chain: every access lands on a block
// chosen at random among hundreds of thousands, so with 4 KiB pages nearly
// every access misses the TLB (a 2048-entry second-level TLB covers 8 MiB with
// 4 KiB pages, 4 GiB with 2 MiB pages).
//
// Reported: ns per access (median of --passes chases), the setup time
// (allocating and touching the live set, where huge pages save page faults),
// how much of the heap the kernel backs with huge pages (AnonHugePages from
// /proc/self/smaps_rollup), and the peak resident set (VmHWM) over the bytes
// requested: huge pages must not make the resident set balloon.
#include <fstream>
#include <random>
#include <sstream>

#include "../common/bench_util.hpp"

namespace {

std::size_t block_size(std::mt19937_64& engine) {
  unsigned r = static_cast<unsigned>(engine() % 100);
  if (r < 60) return 16 + engine() % 241;     // small objects: 16..256
  if (r < 90) return 257 + engine() % 1792;   // records: 257..2048
  return 2049 + engine() % 14336;             // buffers: 2 KiB..16 KiB
}

// A field of /proc/self/status or /proc/self/smaps_rollup, in KiB (0 if absent).
long proc_kib(const char* file, const std::string& field) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream fields(line.substr(field.size() + 1));
      long kib = 0;
      fields >> kib;
      return kib;
    }
  }
  return 0;
}

char* new_block(std::size_t size, std::size_t& live_bytes) {
  char* p = static_cast<char*>(std::malloc(size));
  if (!p) {
    std::fprintf(stderr, "malloc(%zu) failed\n", size);
    std::exit(1);
  }
  std::memset(p, 0x5a, size);  // the live set is really used: every page touched
  live_bytes += size;
  return p;
}

// Follows the chain `accesses` times; returns where it stopped so that the
// loads cannot be optimised away.
__attribute__((noinline)) void* chase(void* start, long accesses) {
  void* p = start;
  for (long i = 0; i < accesses; ++i) p = *static_cast<void**>(p);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"mib", "accesses", "passes", "seed"});
  const std::size_t target = static_cast<std::size_t>(args.integer("mib", 512)) << 20;
  const long accesses = args.integer("accesses", 4000000);
  const long passes = args.integer("passes", 3);
  std::mt19937_64 engine(static_cast<std::uint64_t>(args.integer("seed", 42)));

  // Setup: fill the live set, then replace a random half of it.
  std::uint64_t t0 = bench::now_ns();
  std::vector<char*> blocks;
  std::vector<std::size_t> sizes;
  blocks.reserve(target / 512);
  sizes.reserve(target / 512);
  std::size_t live_bytes = 0, peak_live = 0;
  while (live_bytes < target) {
    std::size_t size = block_size(engine);
    blocks.push_back(new_block(size, live_bytes));
    sizes.push_back(size);
  }
  peak_live = live_bytes;
  std::vector<std::size_t> order(blocks.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), engine);
  for (std::size_t k = 0; k < order.size() / 2; ++k) {
    std::size_t i = order[k];
    std::free(blocks[i]);
    live_bytes -= sizes[i];
    sizes[i] = block_size(engine);
    blocks[i] = new_block(sizes[i], live_bytes);
    peak_live = std::max(peak_live, live_bytes);
  }
  double setup_seconds = double(bench::now_ns() - t0) / 1e9;

  // One random cycle through every block.
  std::shuffle(order.begin(), order.end(), engine);
  for (std::size_t k = 0; k < order.size(); ++k)
    *reinterpret_cast<void**>(blocks[order[k]]) = blocks[order[(k + 1) % order.size()]];

  void* position = chase(blocks[order[0]], accesses / 10 + 1);  // warm up
  std::vector<double> ns_per_access;
  for (long pass = 0; pass < passes; ++pass) {
    std::uint64_t start = bench::now_ns();
    position = chase(position, accesses);
    ns_per_access.push_back(double(bench::now_ns() - start) / double(accesses));
  }
  bench::escape(position);

  const double live_mib = double(live_bytes) / double(1 << 20);
  const double huge_mib = double(proc_kib("/proc/self/smaps_rollup", "AnonHugePages")) / 1024.0;
  const double peak_mib = double(proc_kib("/proc/self/status", "VmHWM")) / 1024.0;
  std::fprintf(stderr, "%zu blocks, %.0f MiB live, %.0f MiB in huge pages, peak RSS %.0f MiB\n",
               blocks.size(), live_mib, huge_mib, peak_mib);
  for (char* p : blocks) std::free(p);

  bench::Params params = {{"live_mib", std::to_string(target >> 20)},
                          {"blocks", std::to_string(blocks.size())},
                          {"accesses", std::to_string(accesses)}};
  bench::emit("hugepage_live_set", "ns_per_access", bench::median(ns_per_access), "ns", params);
  bench::emit("hugepage_live_set", "setup_seconds", setup_seconds, "s", params);
  bench::emit("hugepage_live_set", "huge_page_mib", huge_mib, "MiB", params);
  bench::emit("hugepage_live_set", "rss_over_live", peak_mib / live_mib, "ratio", params);
  // The blocks at their peak, plus the program's arrays (pointer, size and
  // order of every block).
  bench::emit_peak_live("hugepage_live_set",
                        double(peak_live) + double(blocks.size()) * (sizeof(char*) + 2 * sizeof(std::size_t)),
                        params);
}
