// A server-like workload in the spirit of Larson & Krishnan's benchmark.
//
// T worker threads run for a fixed time. Each keeps a table of live objects of
// mixed sizes (most small, some medium, a few buffer-sized) and repeatedly
// replaces a random one. The size of the live set changes every epoch (between
// 1/8 and all of the table), so the heap grows and shrinks as a server's does
// under changing load. One freed object in four is not freed by its owner but
// handed to the next thread, which frees it (a request finished on another
// worker): the cross-thread free path. Reported: million mallocs per second
// over all threads, and the peak of the live bytes (each thread keeps the
// size of every block in its table beside it and publishes its count every
// 64 operations, mailboxes count what they hold, and the main thread sums
// them every 10 ms); bench/run adds the peak RSS. With --ops N every thread
// stops after N operations instead of after --seconds: with one thread the
// run is then the same sequence of mallocs and frees every time, for exact
// instruction counts (valgrind --tool=callgrind) and for timing whole runs.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <random>

#include "../common/bench_util.hpp"

namespace {

// Blocks handed to a thread for freeing. Fixed capacity, so it never
// allocates; when full the sender frees the block itself.
// Sizes travel beside the pointers (never read from the blocks, so that the
// bookkeeping adds no memory access to a block the allocator would not make).
struct Mailbox {
  std::mutex mutex;
  std::vector<void*> blocks;
  std::vector<std::uint32_t> sizes;
  std::size_t count = 0;
  std::atomic<long> bytes{0};  // of the blocks posted here, for the live count
  explicit Mailbox(std::size_t capacity) : blocks(capacity), sizes(capacity) {}
  bool try_post(void* p, std::uint32_t size) {
    std::lock_guard guard(mutex);
    if (count == blocks.size()) return false;
    sizes[count] = size;
    blocks[count++] = p;
    bytes.store(bytes.load(std::memory_order_relaxed) + size, std::memory_order_relaxed);
    return true;
  }
  void free_all() {
    std::lock_guard guard(mutex);
    long freed = 0;
    for (std::size_t i = 0; i < count; ++i) {
      freed += sizes[i];
      std::free(blocks[i]);
    }
    bytes.store(bytes.load(std::memory_order_relaxed) - freed, std::memory_order_relaxed);
    count = 0;
  }
};

// One thread's live bytes (its table), on its own cache line.
struct alignas(64) LiveCount {
  std::atomic<long> bytes{0};
};

std::size_t server_size(std::mt19937& engine) {
  unsigned r = engine() % 100;
  if (r < 70) return 16 + engine() % 113;    // headers, small strings: 16..128
  if (r < 95) return 129 + engine() % 896;   // records: 129..1024
  return 1025 + engine() % 7168;             // buffers: 1 KiB..8 KiB
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"threads", "seconds", "slots", "epoch", "ops"});
  const long threads = args.integer("threads", std::thread::hardware_concurrency());
  const double seconds = double(args.integer("seconds", 2000)) / 1000.0;  // given in ms
  const long slots = args.integer("slots", 8192);
  const long epoch = args.integer("epoch", 20000);
  const long ops = args.integer("ops", 0);  // 0: run for --seconds

  std::vector<std::unique_ptr<Mailbox>> mailboxes;
  for (long t = 0; t < threads; ++t) mailboxes.push_back(std::make_unique<Mailbox>(4096));
  std::atomic<bool> stop{false};
  std::atomic<long> started{0};
  std::atomic<long> finished{0};
  // With --ops each thread's own start and finish: a short run can end
  // before the main thread even reads the clock.
  std::vector<std::uint64_t> start_ns(static_cast<std::size_t>(threads), 0);
  std::vector<std::uint64_t> finish_ns(static_cast<std::size_t>(threads), 0);
  std::vector<long> mallocs(static_cast<std::size_t>(threads), 0);
  std::vector<LiveCount> live_counts(static_cast<std::size_t>(threads));

  std::vector<std::thread> workers;
  for (long w = 0; w < threads; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937 engine(static_cast<unsigned>(1234 + w));
      std::vector<void*> table(static_cast<std::size_t>(slots), nullptr);
      std::vector<std::uint32_t> sizes(static_cast<std::size_t>(slots), 0);
      Mailbox& mine = *mailboxes[static_cast<std::size_t>(w)];
      Mailbox& next = *mailboxes[static_cast<std::size_t>((w + 1) % threads)];
      long count = 0, live = 0;
      // Gives a table block up: freed here, or posted to the next thread.
      auto release = [&](std::size_t slot, bool may_post) {
        live -= sizes[slot];
        if (!may_post || !next.try_post(table[slot], sizes[slot])) std::free(table[slot]);
      };
      started.fetch_add(1);
      while (started.load() < threads) {
      }
      start_ns[static_cast<std::size_t>(w)] = bench::now_ns();
      for (long op = 0; ops > 0 ? op < ops : !stop.load(std::memory_order_relaxed); ++op) {
        if (op % epoch == 0) {
          // New load level: the live set will drift towards this many objects.
          long live_target = slots / 8 + static_cast<long>(engine() % (7 * slots / 8 + 1));
          for (long i = live_target; i < slots; ++i) {
            if (table[static_cast<std::size_t>(i)]) {
              release(static_cast<std::size_t>(i), i % 4 == 0);
              table[static_cast<std::size_t>(i)] = nullptr;
            }
          }
          count = live_target;  // slots in use from now on: [0, live_target)
        }
        if (count == 0) continue;
        std::size_t slot = engine() % static_cast<std::size_t>(count);
        if (table[slot]) release(slot, slot % 4 == 0);
        std::size_t size = server_size(engine);
        char* p = static_cast<char*>(std::malloc(size));
        p[0] = static_cast<char>(op);  // touch first and last byte, as a
        p[size - 1] = 0;               // server writing a message would
        live += static_cast<long>(size);
        sizes[slot] = static_cast<std::uint32_t>(size);
        table[slot] = p;
        ++mallocs[static_cast<std::size_t>(w)];
        if (op % 64 == 0) {
          mine.free_all();
          live_counts[static_cast<std::size_t>(w)].bytes.store(live, std::memory_order_relaxed);
        }
      }
      for (void* p : table) std::free(p);
      live_counts[static_cast<std::size_t>(w)].bytes.store(0, std::memory_order_relaxed);
      mine.free_all();
      finish_ns[static_cast<std::size_t>(w)] = bench::now_ns();
      finished.fetch_add(1);
    });
  }
  while (started.load() < threads) {
  }
  std::uint64_t t0 = bench::now_ns();
  const std::uint64_t end = t0 + static_cast<std::uint64_t>(seconds * 1e9);
  double peak_live = 0;
  for (std::uint64_t now = t0; ops > 0 ? finished.load() < threads : now < end; now = bench::now_ns()) {
    const std::uint64_t nap = ops > 0 ? 10000000 : std::min<std::uint64_t>(end - now, 10000000);
    std::this_thread::sleep_for(std::chrono::nanoseconds(nap));
    long sum = 0;
    for (auto& c : live_counts) sum += c.bytes.load(std::memory_order_relaxed);
    for (auto& m : mailboxes) sum += m->bytes.load(std::memory_order_relaxed);
    peak_live = std::max(peak_live, double(sum));
  }
  stop.store(true);
  for (auto& t : workers) t.join();
  const double elapsed = ops > 0 ? double(*std::max_element(finish_ns.begin(), finish_ns.end()) -
                                          *std::min_element(start_ns.begin(), start_ns.end())) / 1e9
                                 : double(bench::now_ns() - t0) / 1e9;
  for (auto& m : mailboxes) m->free_all();  // blocks posted after their owner finished

  long total = 0;
  for (long m : mallocs) total += m;
  bench::Params params = {{"threads", std::to_string(threads)}, {"slots", std::to_string(slots)}};
  bench::emit("server_larson", "mallocs_per_sec", double(total) / elapsed / 1e6, "M/s", params);
  // Plus each thread's table of pointers and sizes.
  bench::emit_peak_live("server_larson", peak_live + double(threads * slots) * (sizeof(void*) + 4), params);
}
