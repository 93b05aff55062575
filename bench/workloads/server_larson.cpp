// A server-like workload in the spirit of Larson & Krishnan's benchmark.
//
// T worker threads run for a fixed time. Each keeps a table of live objects of
// mixed sizes (most small, some medium, a few buffer-sized) and repeatedly
// replaces a random one. The size of the live set changes every epoch (between
// 1/8 and all of the table), so the heap grows and shrinks as a server's does
// under changing load. One freed object in four is not freed by its owner but
// handed to the next thread, which frees it (a request finished on another
// worker): the cross-thread free path. Reported: million mallocs per second
// over all threads; bench/run adds the peak RSS of the process.
#include <atomic>
#include <memory>
#include <mutex>
#include <random>

#include "../common/bench_util.hpp"

namespace {

// Blocks handed to a thread for freeing. Fixed capacity, so it never
// allocates; when full the sender frees the block itself.
struct Mailbox {
  std::mutex mutex;
  std::vector<void*> blocks;
  std::size_t count = 0;
  explicit Mailbox(std::size_t capacity) : blocks(capacity) {}
  bool try_post(void* p) {
    std::lock_guard guard(mutex);
    if (count == blocks.size()) return false;
    blocks[count++] = p;
    return true;
  }
  void free_all() {
    std::lock_guard guard(mutex);
    for (std::size_t i = 0; i < count; ++i) std::free(blocks[i]);
    count = 0;
  }
};

std::size_t server_size(std::mt19937& engine) {
  unsigned r = engine() % 100;
  if (r < 70) return 16 + engine() % 113;    // headers, small strings: 16..128
  if (r < 95) return 129 + engine() % 896;   // records: 129..1024
  return 1025 + engine() % 7168;             // buffers: 1 KiB..8 KiB
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"threads", "seconds", "slots", "epoch"});
  const long threads = args.integer("threads", std::thread::hardware_concurrency());
  const double seconds = double(args.integer("seconds", 2000)) / 1000.0;  // given in ms
  const long slots = args.integer("slots", 8192);
  const long epoch = args.integer("epoch", 20000);

  std::vector<std::unique_ptr<Mailbox>> mailboxes;
  for (long t = 0; t < threads; ++t) mailboxes.push_back(std::make_unique<Mailbox>(4096));
  std::atomic<bool> stop{false};
  std::atomic<long> started{0};
  std::vector<long> mallocs(static_cast<std::size_t>(threads), 0);

  std::vector<std::thread> workers;
  for (long w = 0; w < threads; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937 engine(static_cast<unsigned>(1234 + w));
      std::vector<void*> table(static_cast<std::size_t>(slots), nullptr);
      Mailbox& mine = *mailboxes[static_cast<std::size_t>(w)];
      Mailbox& next = *mailboxes[static_cast<std::size_t>((w + 1) % threads)];
      long count = 0;
      started.fetch_add(1);
      while (started.load() < threads) {
      }
      for (long op = 0; !stop.load(std::memory_order_relaxed); ++op) {
        if (op % epoch == 0) {
          // New load level: the live set will drift towards this many objects.
          long live_target = slots / 8 + static_cast<long>(engine() % (7 * slots / 8 + 1));
          for (long i = live_target; i < slots; ++i) {
            if (void* p = table[static_cast<std::size_t>(i)]) {
              if (i % 4 != 0 || !next.try_post(p)) std::free(p);
              table[static_cast<std::size_t>(i)] = nullptr;
            }
          }
          count = live_target;  // slots in use from now on: [0, live_target)
        }
        if (count == 0) continue;
        std::size_t slot = engine() % static_cast<std::size_t>(count);
        if (void* old = table[slot]) {
          if (slot % 4 != 0 || !next.try_post(old)) std::free(old);
        }
        std::size_t size = server_size(engine);
        char* p = static_cast<char*>(std::malloc(size));
        p[0] = static_cast<char>(op);  // touch first and last byte, as a
        p[size - 1] = 0;               // server writing a message would
        table[slot] = p;
        ++mallocs[static_cast<std::size_t>(w)];
        if (op % 64 == 0) mine.free_all();
      }
      for (void* p : table) std::free(p);
      mine.free_all();
    });
  }
  while (started.load() < threads) {
  }
  std::uint64_t t0 = bench::now_ns();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto& t : workers) t.join();
  double elapsed = double(bench::now_ns() - t0) / 1e9;
  for (auto& m : mailboxes) m->free_all();  // blocks posted after their owner finished

  long total = 0;
  for (long m : mallocs) total += m;
  bench::Params params = {{"threads", std::to_string(threads)}, {"slots", std::to_string(slots)}};
  bench::emit("server_larson", "mallocs_per_sec", double(total) / elapsed / 1e6, "M/s", params);
}
