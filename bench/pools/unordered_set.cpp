// seed000_unordered_set: seed 000's container test. LEN = 5000 ints from
// mt19937 (default seed) with the default uniform_int_distribution<int>;
// insert all into an unordered_set, erase all, insert all again (the array
// is shuffled with the same engine before the erase and before the second
// insert); cycles per op = rdtsc delta / LEN, also ns per op.
//
// Rows: std::allocator (the process's malloc), std::pmr unsynchronized and
// synchronized pool resources, strata::pool_allocator, strata::pmr::
// pool_resource, strata::pmr::synchronized_pool_resource.
// Usage: pool_bench_unordered_set [--quick] [--reps N] [--len N] [--row NAME]
// Every rep builds a new set; resources live across reps, so rep 0 is cold
// and later reps are warm. The rows are interleaved and their order rotates
// from one rep to the next, so no row always runs first (in a cold process)
// or always after the same neighbour (whose data it finds in the caches).
// The default 21 reps make the warm median robust on a shared machine; the
// cold rep 0 is printed apart on stderr. The seed ran one row per process,
// cold: with --row only that row runs, so its rep 0 is a true first use
// (runs of all rows in one process share warm-up between rows of the same
// allocator).
#include <strata/pmr.hpp>
#include <strata/pool_allocator.hpp>

#include <strata/strata.h>

#include "bench_common.hpp"

#include <functional>
#include <iterator>
#include <map>
#include <memory_resource>
#include <random>
#include <unordered_set>

namespace {

struct phase_result {
  double cycles[3];
  double ns[3];
};

// One function per phase, never inlined nor merged with its twin (GCC's
// identical code folding would fold phase_insert_again into phase_insert),
// so that callgrind can count the instructions of each phase exactly, the
// same way for every row:
//   valgrind --tool=callgrind --toggle-collect='*phase_erase<*' pool_bench_unordered_set --row NAME --reps N
#if defined(__clang__)
#define STRATA_BENCH_PHASE [[gnu::noinline]]
#else
#define STRATA_BENCH_PHASE [[gnu::noipa]]
#endif
template <class Set>
STRATA_BENCH_PHASE void phase_insert(Set& s, const std::vector<int>& nums) {
  for (int n : nums) s.insert(n);
}
template <class Set>
STRATA_BENCH_PHASE void phase_erase(Set& s, const std::vector<int>& nums) {
  for (int n : nums) s.erase(n);
}
template <class Set>
STRATA_BENCH_PHASE void phase_insert_again(Set& s, const std::vector<int>& nums) {
  for (int n : nums) s.insert(n);
}

template <class Set>
phase_result run_phases(Set& s, std::vector<int> nums, std::mt19937& engine) {
  phase_result r{};
  const double len = static_cast<double>(nums.size());
  auto timed = [&](int phase, auto&& body) {
    std::uint64_t n0 = bench::now_ns();
    std::uint64_t t0 = bench::cycles();
    body();
    std::uint64_t t1 = bench::cycles();
    std::uint64_t n1 = bench::now_ns();
    r.cycles[phase] = static_cast<double>(t1 - t0) / len;
    r.ns[phase] = static_cast<double>(n1 - n0) / len;
  };
  timed(0, [&] { phase_insert(s, nums); });
  std::shuffle(nums.begin(), nums.end(), engine);
  timed(1, [&] { phase_erase(s, nums); });
  std::shuffle(nums.begin(), nums.end(), engine);
  timed(2, [&] { phase_insert_again(s, nums); });
  bench::keep(s.size());
  return r;
}

using std_set = std::unordered_set<int>;
using strata_set = std::unordered_set<int, std::hash<int>, std::equal_to<int>, strata::pool_allocator<int>>;
using pmr_set = std::pmr::unordered_set<int>;

}  // namespace

int main(int argc, char** argv) {
  const long reps = bench::arg(argc, argv, "--reps", 21);
  const long len = bench::arg(argc, argv, "--len", 5000);
  const std::string only_row = bench::arg_str(argc, argv, "--row", "");

  // Both general allocators start initialised, as glibc's malloc is by the
  // time main runs: one-off set-up is not a per-op cost of any row.
  strata_free(strata_malloc(1));

  std::mt19937 engine;
  std::uniform_int_distribution<int> dist;
  std::vector<int> nums(static_cast<std::size_t>(len));
  for (int& n : nums) n = dist(engine);

  std::pmr::unsynchronized_pool_resource std_unsync;
  std::pmr::synchronized_pool_resource std_sync;
  strata::pmr::pool_resource strata_pool;
  strata::pmr::synchronized_pool_resource strata_sync;

  const char* rows[] = {"std::allocator",         "std::pmr::unsynchronized_pool_resource",
                        "std::pmr::synchronized_pool_resource", "strata::pool_allocator",
                        "strata::pmr::pool_resource", "strata::pmr::synchronized_pool_resource"};
  const char* phases[] = {"insert", "erase", "insert_again"};
  std::map<std::string, std::vector<phase_result>> results;

  constexpr std::size_t row_count = std::size(rows);
  for (long rep = 0; rep < reps; ++rep) {
    for (std::size_t i = 0; i < row_count; ++i) {
      const char* row = rows[(static_cast<std::size_t>(rep) + i) % row_count];
      if (!only_row.empty() && only_row != row) continue;
      std::mt19937 shuffle_engine = engine;  // same shuffles for every row
      phase_result r;
      std::string name = row;
      if (name == "std::allocator") {
        std_set s;
        r = run_phases(s, nums, shuffle_engine);
      } else if (name == "strata::pool_allocator") {
        strata_set s;
        r = run_phases(s, nums, shuffle_engine);
      } else {
        std::pmr::memory_resource* res = name == "std::pmr::unsynchronized_pool_resource" ? static_cast<std::pmr::memory_resource*>(&std_unsync)
                                         : name == "std::pmr::synchronized_pool_resource" ? static_cast<std::pmr::memory_resource*>(&std_sync)
                                         : name == "strata::pmr::pool_resource"           ? static_cast<std::pmr::memory_resource*>(&strata_pool)
                                                                                          : static_cast<std::pmr::memory_resource*>(&strata_sync);
        pmr_set s(res);
        r = run_phases(s, nums, shuffle_engine);
      }
      results[name].push_back(r);
      for (int p = 0; p < 3; ++p) {
        std::string extra = ",\"phase\":\"" + std::string(phases[p]) + "\",\"rep\":" + std::to_string(rep) +
                            ",\"len\":" + std::to_string(len);
        bench::emit("seed000_unordered_set", name, "cycles_per_op", r.cycles[p], "cycles", extra);
        bench::emit("seed000_unordered_set", name, "ns_per_op", r.ns[p], "ns", extra);
      }
    }
  }

  std::fprintf(stderr, "seed000_unordered_set, LEN=%ld, cycles/op: rep 0 (cold) | median of reps 1..%ld (warm)\n", len,
               reps - 1);
  std::fprintf(stderr, "%-42s %24s | %24s\n", "", "insert / erase / again", "insert / erase / again");
  for (const char* row : rows) {
    if (!only_row.empty() && only_row != row) continue;
    const auto& v = results[row];
    double med[3];
    for (int p = 0; p < 3; ++p) {
      std::vector<double> xs;
      for (std::size_t i = 1; i < v.size(); ++i) xs.push_back(v[i].cycles[p]);
      med[p] = bench::median(xs);
    }
    std::fprintf(stderr, "%-42s %7.0f / %6.0f / %6.0f | %7.0f / %6.0f / %6.0f\n", row, v[0].cycles[0],
                 v[0].cycles[1], v[0].cycles[2], med[0], med[1], med[2]);
  }
}
