// Random stress: every thread allocates blocks of random sizes and kinds
// (malloc, calloc, aligned), keeps them for random lifetimes, grows and shrinks
// them through realloc chains, and swaps blocks with other threads through a
// shared exchange so that about one free in five is a cross-thread free.
// Every block carries a pattern of its address and size, checked before free.
#include "stress_support.hpp"

#include <mutex>
#include <thread>
#include <vector>

namespace {

using namespace stress;

struct Block {
  void* p = nullptr;
  std::size_t n = 0;
};

// Slots shared by all threads; putting a block in takes out the one there.
struct Exchange {
  static constexpr int kSlots = 64;
  struct Slot {
    std::mutex lock;
    Block block;
  } slots[kSlots];

  Block swap(std::size_t index, Block in) {
    Slot& s = slots[index % kSlots];
    std::lock_guard<std::mutex> guard(s.lock);
    Block out = s.block;
    s.block = in;
    return out;
  }
};

Exchange g_exchange;
Totals g_totals;

void release_checked(Block& b, std::uint64_t& bytes) {
  check(b.p, b.n);
  bytes += b.n;
  release(b.p);
  b = Block{};
}

Block allocate_random(Random& rng, const Options& o) {
  Block b;
  b.n = rng.block_size();
  unsigned kind = static_cast<unsigned>(rng.below(10));
  if (kind < 6) {
    b.p = allocate(b.n);
    if (!b.p) fail("malloc returned NULL", nullptr, b.n);
    check_natural_alignment(b.p, b.n);
  } else if (kind < 8) {
    b.p = allocate_zeroed(1, b.n);
    if (!b.p) fail("calloc returned NULL", nullptr, b.n);
    check_zero(b.p, b.n);
  } else {
    std::size_t alignment = std::size_t{1} << rng.below(static_cast<std::size_t>(o.max_alignment_log2) + 1);
    b.p = allocate_aligned(alignment, b.n);
    if (!b.p) fail("aligned_alloc returned NULL", nullptr, b.n);
    check_alignment(b.p, b.n, alignment);
  }
  if (usable_size(b.p) < b.n) fail("usable size below request", b.p, b.n);
  fill(b.p, b.n);
  return b;
}

// A realloc chain step: contents up to the smaller size must survive.
void realloc_step(Block& b, Random& rng, std::uint64_t& bytes) {
  // Never 0: realloc(p, 0) may free p and return NULL (glibc semantics).
  std::size_t n = rng.percent(50) ? b.n + rng.below(b.n + 64) : 1 + rng.below(b.n + 1);
  void* q = reallocate(b.p, n);
  if (!q) fail("realloc returned NULL", b.p, n);
  std::size_t kept = n < b.n ? n : b.n;
  check(q, kept, b.p, b.n);
  bytes += kept;
  fill(q, n);
  b.p = q;
  b.n = n;
}

void worker(int id, const Options& o, Clock::time_point deadline) {
  Random rng(o.seed * 1000 + static_cast<std::uint64_t>(id));
  // Slots of different lifetimes: a few long-lived, most churned quickly.
  std::vector<Block> slots(2048);
  std::uint64_t ops = 0, bytes = 0;
  while (Clock::now() < deadline) {
    for (int burst = 0; burst < 256; ++burst, ++ops) {
      std::size_t i = rng.percent(90) ? rng.below(64) : rng.below(slots.size());
      Block& b = slots[i];
      if (!b.p) {
        b = allocate_random(rng, o);
      } else if (rng.percent(20)) {
        realloc_step(b, rng, bytes);
      } else if (rng.percent(20)) {
        Block theirs = g_exchange.swap(rng.next(), b);
        b = Block{};
        if (theirs.p) release_checked(theirs, bytes);  // often another thread's block
      } else {
        release_checked(b, bytes);
      }
    }
  }
  for (Block& b : slots)
    if (b.p) release_checked(b, bytes);
  g_totals.add(ops, bytes);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Options::parse(argc, argv);
  auto start = Clock::now();
  auto deadline = deadline_after(o.seconds);
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) threads.emplace_back(worker, t, std::cref(o), deadline);
  for (auto& t : threads) t.join();
  std::uint64_t bytes = 0;
  for (int i = 0; i < Exchange::kSlots; ++i) {
    Block left = g_exchange.swap(static_cast<std::size_t>(i), Block{});
    if (left.p) release_checked(left, bytes);
  }
  g_totals.add(0, bytes);
  g_totals.print("stress_random", o, seconds_since(start));
  return 0;
}
