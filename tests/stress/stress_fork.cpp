// fork() in a loop while other threads allocate and free. The allocator's
// locks must be in a consistent state in the child (pthread_atfork): the child
// checks and frees a block inherited from the parent, allocates and frees,
// starts a thread of its own, and exits. A child that does not finish within
// the bound is a deadlock: it is killed and the test fails.
#include "stress_support.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

namespace {

using namespace stress;

constexpr double kChildBoundSeconds = 10.0;

std::atomic<bool> g_stop{false};
Totals g_totals;

void churn(int id, std::uint64_t seed) {
  Random rng(seed * 31 + static_cast<std::uint64_t>(id));
  struct Block {
    void* p = nullptr;
    std::size_t n = 0;
  };
  std::vector<Block> slots(128);  // small heaps: fork copies page tables, children run quickly
  std::uint64_t ops = 0, bytes = 0;
  while (!g_stop.load(std::memory_order_relaxed)) {
    Block& b = slots[rng.below(slots.size())];
    if (b.p) {
      check(b.p, b.n);
      bytes += b.n;
      release(b.p);
      b = Block{};
    } else {
      b.n = rng.block_size() / 4;
      b.p = allocate(b.n);
      if (!b.p) fail("malloc returned NULL", nullptr, b.n);
      fill(b.p, b.n);
    }
    ++ops;
  }
  for (Block& b : slots)
    if (b.p) {
      check(b.p, b.n);
      release(b.p);
    }
  g_totals.add(ops, bytes);
}

// Runs in the child; returns the exit code.
int child_work(void* inherited, std::size_t inherited_size, std::uint64_t seed) {
  check(inherited, inherited_size);
  release(inherited);
  Random rng(seed);
  std::vector<void*> blocks;
  for (int i = 0; i < 2000; ++i) {
    std::size_t n = rng.block_size() / 4;
    void* p = allocate(n);
    if (!p) return 3;
    fill(p, n);
    check(p, n);
    if (rng.percent(50)) release(p);
    else blocks.push_back(p);
  }
  for (void* p : blocks) release(p);
  // The child can still create threads that allocate.
  std::thread t([] {
    for (int i = 0; i < 1000; ++i) {
      void* p = allocate(static_cast<std::size_t>(i) * 8);
      if (!p) std::_Exit(4);
      release(p);
    }
  });
  t.join();
  return 0;
}

// Waits for the child, at most kChildBoundSeconds. Returns false on a hang.
bool wait_bounded(pid_t pid, int* status) {
  auto bound = deadline_after(kChildBoundSeconds);
  while (Clock::now() < bound) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0) fail("waitpid failed", nullptr, 0);
    usleep(1000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, status, 0);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Options::parse(argc, argv);
  auto start = Clock::now();
  auto deadline = deadline_after(o.seconds);
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) threads.emplace_back(churn, t, o.seed);
  Random rng(o.seed);
  std::uint64_t forks = 0;
  int failures = 0;
  while (Clock::now() < deadline && failures == 0) {
    std::size_t n = rng.block_size();
    void* inherited = allocate(n);
    if (!inherited) fail("malloc returned NULL", nullptr, n);
    fill(inherited, n);
    pid_t pid = fork();
    if (pid < 0) fail("fork failed", nullptr, 0);
    if (pid == 0) {
      int code = child_work(inherited, n, o.seed + forks);
      if (forks % 2) std::exit(code);  // runs atexit handlers and destructors too
      _exit(code);
    }
    ++forks;
    int status = 0;
    if (!wait_bounded(pid, &status)) {
      std::fprintf(stderr, "stress_fork: child %d did not finish within %.0f s: deadlock after fork\n", pid,
                   kChildBoundSeconds);
      ++failures;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "stress_fork: child failed: %s %d\n", WIFEXITED(status) ? "exit code" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      ++failures;
    }
    check(inherited, n);  // the parent's copy is untouched by the child
    release(inherited);
  }
  g_stop = true;
  for (auto& t : threads) t.join();
  std::fprintf(stderr, "stress_fork: %llu forks while %d threads allocated\n",
               static_cast<unsigned long long>(forks), o.threads);
  if (failures) return 1;
  g_totals.print("stress_fork", o, seconds_since(start));
  return 0;
}
