// Seed 000: unordered_set<int> insert / erase / insert again, cycles per op.
//
// As in the lecture's public code: mt19937 (default seed) fills LEN random
// ints from a default uniform_int_distribution; insert all, shuffle, erase
// all, shuffle, insert all again; each phase timed with rdtsc and divided by
// LEN. The seed measured one pass per process; we report that cold first pass
// and the median of further passes (each pass uses a fresh set), which is far
// less noisy. Every node allocation goes through std::allocator -> operator
// new -> malloc, i.e. through the preloaded allocator.
#include <random>
#include <unordered_set>

#include "../common/bench_util.hpp"

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"len", "passes"});
  const long len = args.integer("len", 5000);
  const long passes = args.integer("passes", 200);

  bench::become_multithreaded();
  std::mt19937 engine;
  std::uniform_int_distribution<int> dist;
  std::vector<int> numbers(static_cast<std::size_t>(len));
  for (int& n : numbers) n = dist(engine);

  const char* phases[3] = {"insert", "erase", "insert_again"};
  std::vector<double> cycles[3], nanos[3];
  std::size_t peak_buckets = 0;
  for (long pass = 0; pass < passes; ++pass) {
    std::unordered_set<int> set;
    std::uint64_t c[3], t[3];
    {
      std::uint64_t t0 = bench::now_ns(), c0 = bench::cycles();
      for (int n : numbers) set.insert(n);
      c[0] = bench::cycles() - c0, t[0] = bench::now_ns() - t0;
    }
    peak_buckets = std::max(peak_buckets, set.bucket_count());
    std::shuffle(numbers.begin(), numbers.end(), engine);
    {
      std::uint64_t t0 = bench::now_ns(), c0 = bench::cycles();
      for (int n : numbers) set.erase(n);
      c[1] = bench::cycles() - c0, t[1] = bench::now_ns() - t0;
    }
    std::shuffle(numbers.begin(), numbers.end(), engine);
    {
      std::uint64_t t0 = bench::now_ns(), c0 = bench::cycles();
      for (int n : numbers) set.insert(n);
      c[2] = bench::cycles() - c0, t[2] = bench::now_ns() - t0;
    }
    for (int p = 0; p < 3; ++p) {
      cycles[p].push_back(double(c[p]) / double(len));
      nanos[p].push_back(double(t[p]) / double(len));
    }
  }
  for (int p = 0; p < 3; ++p) {
    bench::Params first = {{"phase", bench::quoted(phases[p])}, {"pass", "\"first\""},
                           {"len", std::to_string(len)}};
    bench::emit("seed000_unordered_set", "cycles_per_op", cycles[p].front(), "cycles", first);
    bench::Params steady = {{"phase", bench::quoted(phases[p])}, {"pass", "\"median\""},
                            {"len", std::to_string(len)}, {"passes", std::to_string(passes)}};
    bench::emit("seed000_unordered_set", "cycles_per_op", bench::median(cycles[p]), "cycles",
                steady);
    bench::emit("seed000_unordered_set", "ns_per_op", bench::median(nanos[p]), "ns", steady);
  }
  // Peak live, computed from the structure: one node per element (a next
  // pointer and the int: 16 B), the bucket array, and the numbers.
  struct Node {
    void* next;
    int value;
  };
  bench::emit_peak_live("seed000_unordered_set",
                        double(len) * (sizeof(Node) + sizeof(int)) + double(peak_buckets) * sizeof(void*),
                        {{"len", std::to_string(len)}});
}
