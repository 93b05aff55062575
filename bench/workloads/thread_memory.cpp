// Memory per thread (issue 11): many threads alive at once, each holding
// one small block, as in a thread-per-connection server.
//
// Each thread does 100 small malloc/free pairs (sizes 16..256 B, each block
// written), then mallocs and writes one 1,000 B block and holds it until all
// threads are alive; the main thread then reads the resident set
// (/proc/self/statm) and lets them finish. This is done first with 1 thread,
// then with --threads threads, in the same process. Reported: resident KiB
// before any thread, with 1 thread alive, with all alive, and the cost per
// thread, (all alive - 1 alive) / (threads - 1). The figure includes what
// every thread costs whatever the allocator (its stack pages and TLS,
// about the same for every row); the differences between rows are the
// allocators'.
#include <condition_variable>
#include <mutex>
#include <random>

#include "../common/bench_util.hpp"

namespace {

long resident_with(long threads) {
  std::mutex mutex;
  std::condition_variable released_cv;
  bool released = false;
  std::atomic<long> holding{0};
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(threads));
  for (long t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::minstd_rand engine(static_cast<unsigned>(t + 1));
      for (int i = 0; i < 100; ++i) {
        std::size_t size = 16 + engine() % 241;
        char* p = static_cast<char*>(std::malloc(size));
        std::memset(p, i, size);
        bench::escape(p);
        std::free(p);
      }
      char* held = static_cast<char*>(std::malloc(1000));
      std::memset(held, 1, 1000);
      holding.fetch_add(1);
      {
        std::unique_lock lock(mutex);
        released_cv.wait(lock, [&] { return released; });
      }
      bench::escape(held);
      std::free(held);
    });
  }
  while (holding.load() < threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  long kib = bench::resident_kib();
  {
    std::lock_guard guard(mutex);
    released = true;
  }
  released_cv.notify_all();
  for (auto& w : workers) w.join();
  return kib;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"threads"});
  const long threads = std::max(2L, args.integer("threads", 2000));

  const long before = bench::resident_kib();
  const long one = resident_with(1);
  const long all = resident_with(threads);

  bench::Params params = {{"threads", std::to_string(threads)}};
  bench::emit("thread_memory", "rss_before_kib", double(before), "KiB", params);
  bench::emit("thread_memory", "rss_one_thread_kib", double(one), "KiB", params);
  bench::emit("thread_memory", "rss_all_alive_kib", double(all), "KiB", params);
  bench::emit("thread_memory", "kib_per_thread", double(all - one) / double(threads - 1), "KiB", params);
  // Peak live: every thread's held block and its largest small block at once,
  // plus the std::thread handles.
  bench::emit_peak_live("thread_memory", double(threads) * (1000.0 + 256.0 + sizeof(std::thread)), params);
}
