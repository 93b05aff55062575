// Thread churn with random lifetimes (issue 10): threads that allocate,
// exchange and free blocks of random sizes, then exit and are replaced.
//
// --slots threads run at once. Each lives for a random number of operations
// (--min-ops..--max-ops). One operation replaces a random entry of the
// thread's own table of --table blocks: the old block is freed, or, one time
// in four, swapped into a random slot of a process-wide exchange (an array of
// atomic pointers), and whatever was in that slot (a block of another thread,
// perhaps one that has exited) is freed instead; then a new block of a random
// size (80% 16-256 B, 18% 257 B-2 KiB, 2% 2-16 KiB) is allocated and its first
// and last bytes written. At exit a thread frees half its table and swaps the
// other half into the exchange, so blocks outlive the threads that made them.
// The main thread replaces each finished thread until --total threads have
// run. Reported: wall seconds, ns per operation (over all threads) and
// threads per second.
#include <condition_variable>
#include <mutex>
#include <random>

#include "../common/bench_util.hpp"

namespace {

// Each block starts with its size, so that whoever frees it can keep the
// live-bytes bookkeeping without a lookup.
void* new_block(std::mt19937& engine, long& live) {
  unsigned r = engine() % 100;
  std::size_t size = r < 80 ? 16 + engine() % 241 : r < 98 ? 257 + engine() % 1792 : 2049 + engine() % 14336;
  char* p = static_cast<char*>(std::malloc(size));
  *reinterpret_cast<std::size_t*>(p) = size;
  p[size - 1] = 1;
  live += static_cast<long>(size);
  return p;
}

void free_block(void* p, long& live) {
  live -= static_cast<long>(*static_cast<std::size_t*>(p));
  std::free(p);
}

// Bytes allocated minus bytes freed by all the threads that ran in one slot
// (a block freed by another thread counts there), published by the slot's
// current thread with plain stores: their sum over all slots is what the
// program holds, the exchange's blocks included.
struct alignas(64) SlotLive {
  std::atomic<long> bytes{0};
};

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"slots", "total", "min-ops", "max-ops", "table", "exchange", "seed"});
  const long slots = args.integer("slots", 4);
  const long total = args.integer("total", 400);
  const long min_ops = args.integer("min-ops", 2000);
  const long max_ops = args.integer("max-ops", 20000);
  const long table_size = args.integer("table", 256);
  const long exchange_size = args.integer("exchange", 1024);
  const unsigned seed = static_cast<unsigned>(args.integer("seed", 11));

  std::vector<std::atomic<void*>> exchange(static_cast<std::size_t>(exchange_size));
  for (auto& e : exchange) e.store(nullptr);
  std::vector<SlotLive> slot_live(static_cast<std::size_t>(slots));
  std::atomic<long> total_ops{0};
  std::mutex mutex;
  std::condition_variable finished_cv;
  // Slots whose thread has finished its work (fixed arrays: the main thread
  // allocates nothing but the threads it starts).
  std::vector<long> finished(static_cast<std::size_t>(slots)), now_finished(static_cast<std::size_t>(slots));
  std::size_t finished_count = 0;

  auto body = [&](long slot, unsigned thread_seed) {
    std::mt19937 engine(thread_seed);
    const long ops = min_ops + static_cast<long>(engine() % static_cast<unsigned>(max_ops - min_ops + 1));
    std::atomic<long>& published = slot_live[static_cast<std::size_t>(slot)].bytes;
    long live = published.load(std::memory_order_relaxed);
    std::vector<void*> table(static_cast<std::size_t>(table_size), nullptr);
    auto swap_out = [&](void* p) {  // into the exchange; frees whatever comes back
      std::size_t at = engine() % exchange.size();
      if (void* old = exchange[at].exchange(p, std::memory_order_acq_rel)) free_block(old, live);
    };
    for (long op = 0; op < ops; ++op) {
      void*& entry = table[engine() % table.size()];
      if (entry) {
        if (engine() % 4 == 0) {
          swap_out(entry);
        } else {
          free_block(entry, live);
        }
      }
      entry = new_block(engine, live);
      if ((op & 63) == 0) published.store(live, std::memory_order_relaxed);
    }
    for (std::size_t i = 0; i < table.size(); ++i) {
      if (!table[i]) continue;
      if (i % 2) free_block(table[i], live);
      else swap_out(table[i]);
    }
    published.store(live, std::memory_order_relaxed);
    total_ops.fetch_add(ops);
    std::lock_guard guard(mutex);
    finished[finished_count++] = slot;
    finished_cv.notify_one();
  };

  bench::become_multithreaded();
  std::uint64_t t0 = bench::now_ns();
  std::vector<std::thread> running(static_cast<std::size_t>(slots));
  long started = 0;
  for (long s = 0; s < slots && started < total; ++s, ++started)
    running[static_cast<std::size_t>(s)] = std::thread(body, s, seed + static_cast<unsigned>(started));
  // Live bytes are sampled every millisecond while threads run.
  double peak_live = 0;
  long done = 0;
  while (done < started) {
    std::unique_lock lock(mutex);
    finished_cv.wait_for(lock, std::chrono::milliseconds(1), [&] { return finished_count > 0; });
    const std::size_t count = finished_count;
    std::copy(finished.begin(), finished.begin() + static_cast<long>(count), now_finished.begin());
    finished_count = 0;
    lock.unlock();
    long sum = 0;
    for (auto& s : slot_live) sum += s.bytes.load(std::memory_order_relaxed);
    peak_live = std::max(peak_live, double(sum));
    for (std::size_t k = 0; k < count; ++k) {
      const long s = now_finished[k];
      running[static_cast<std::size_t>(s)].join();
      ++done;
      if (started < total) {
        running[static_cast<std::size_t>(s)] = std::thread(body, s, seed + static_cast<unsigned>(started));
        ++started;
      }
    }
  }
  double elapsed = double(bench::now_ns() - t0);
  for (auto& e : exchange) {
    if (void* p = e.exchange(nullptr)) std::free(p);
  }

  bench::Params params = {{"slots", std::to_string(slots)}, {"total", std::to_string(total)}};
  bench::emit("thread_churn", "seconds", elapsed / 1e9, "s", params);
  bench::emit("thread_churn", "ns_per_op", elapsed / double(total_ops.load()), "ns", params);
  bench::emit("thread_churn", "threads_per_sec", double(total) / (elapsed / 1e9), "threads/s", params);
  bench::emit_peak_live("thread_churn", peak_live, params);
}
