// Thread creation and exit in a loop: short-lived threads allocate, free some
// blocks, and leave the rest behind in a shared pool. Those are freed later by
// other threads after their owner has exited, so the memory a dead thread's
// cache held must have gone back correctly.
#include "stress_support.hpp"

#include <mutex>
#include <thread>
#include <vector>

namespace {

using namespace stress;

struct Block {
  void* p;
  std::size_t n;
};

std::mutex g_orphans_lock;
std::vector<Block> g_orphans;  // blocks whose allocating thread may have exited
Totals g_totals;

void short_lived(std::uint64_t seed) {
  Random rng(seed);
  std::vector<Block> mine;
  std::uint64_t ops = 0, bytes = 0;
  const int count = 50 + static_cast<int>(rng.below(400));
  for (int i = 0; i < count; ++i, ++ops) {
    std::size_t n = rng.block_size() / (rng.percent(90) ? 16 : 1);
    void* p = allocate(n);
    if (!p) fail("malloc returned NULL", nullptr, n);
    fill(p, n);
    mine.push_back({p, n});
  }
  // Free what other (maybe dead) threads left, keep the pool bounded.
  std::vector<Block> adopted;
  {
    std::lock_guard<std::mutex> guard(g_orphans_lock);
    std::size_t take = g_orphans.size() / 2;
    adopted.assign(g_orphans.end() - static_cast<std::ptrdiff_t>(take), g_orphans.end());
    g_orphans.resize(g_orphans.size() - take);
  }
  for (Block& b : adopted) {
    check(b.p, b.n);
    bytes += b.n;
    release(b.p);
    ++ops;
  }
  // Free two thirds of our own, orphan the rest.
  std::vector<Block> leave;
  for (Block& b : mine) {
    if (rng.below(3) == 0) {
      leave.push_back(b);
    } else {
      check(b.p, b.n);
      bytes += b.n;
      release(b.p);
      ++ops;
    }
  }
  {
    std::lock_guard<std::mutex> guard(g_orphans_lock);
    g_orphans.insert(g_orphans.end(), leave.begin(), leave.end());
  }
  g_totals.add(ops, bytes);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Options::parse(argc, argv);
  auto start = Clock::now();
  auto deadline = deadline_after(o.seconds);
  std::uint64_t generation = 0, created = 0;
  while (Clock::now() < deadline) {
    std::vector<std::thread> threads;
    for (int t = 0; t < o.threads; ++t) threads.emplace_back(short_lived, o.seed * 104729 + generation++);
    for (auto& t : threads) t.join();
    created += static_cast<std::uint64_t>(o.threads);
  }
  std::uint64_t bytes = 0;
  for (Block& b : g_orphans) {
    check(b.p, b.n);
    bytes += b.n;
    release(b.p);
  }
  g_totals.add(g_orphans.size(), bytes);
  std::fprintf(stderr, "stress_thread_churn: %llu threads created and exited\n",
               static_cast<unsigned long long>(created));
  g_totals.print("stress_thread_churn", o, seconds_since(start));
  return 0;
}
