// N producers against N consumers (issue 10): objects allocated on some
// threads and freed on others, with more threads than cores.
//
// P producer threads malloc batches of --batch small blocks (sizes 16..256 B
// from a fixed table, first byte written) and hand each full batch to a
// shared queue; C consumer threads take batches from it and free every block.
// The queue holds batch descriptors that are allocated once, before the
// clock starts (a second queue returns empty descriptors to producers), so
// the only allocator traffic is the measured one. When a queue is empty or
// full a thread yields, which is what lets 2x2 and 4x4 run on 2 cores.
// Reported per configuration (--configs 1,2,4 means 1x1, 2x2, 4x4): wall ns
// per object handed over and million objects per second.
#include <mutex>
#include <random>

#include "../common/bench_util.hpp"

namespace {

struct Batch {
  std::vector<void*> blocks;
  std::size_t bytes = 0;
};

// A bounded queue of batch pointers behind one mutex: one lock per batch of
// objects, not per object.
class BatchQueue {
 public:
  explicit BatchQueue(std::size_t capacity) : slots_(capacity) {}
  bool try_push(Batch* b) {
    std::lock_guard guard(mutex_);
    if (count_ == slots_.size()) return false;
    slots_[(head_ + count_++) % slots_.size()] = b;
    return true;
  }
  Batch* try_pop() {
    std::lock_guard guard(mutex_);
    if (count_ == 0) return nullptr;
    Batch* b = slots_[head_];
    head_ = (head_ + 1) % slots_.size();
    --count_;
    return b;
  }

 private:
  std::mutex mutex_;
  std::vector<Batch*> slots_;
  std::size_t head_ = 0, count_ = 0;
};

struct Result {
  double ns_per_object;
  double peak_live_bytes;
};

Result run(long producers, long consumers, long objects, long batch, long descriptors) {
  const long batches_per_producer = std::max(1L, objects / producers / batch);
  const long total_batches = batches_per_producer * producers;
  std::vector<Batch> storage(static_cast<std::size_t>(descriptors));
  BatchQueue full(static_cast<std::size_t>(descriptors)), empty(static_cast<std::size_t>(descriptors));
  for (auto& b : storage) {
    b.blocks.resize(static_cast<std::size_t>(batch));
    empty.try_push(&b);
  }
  std::atomic<long> taken{0}, live{0}, peak{0}, ready{0};
  std::atomic<bool> go{false};

  auto producer = [&](long id) {
    std::mt19937 engine(static_cast<unsigned>(100 + id));
    std::uniform_int_distribution<std::uint32_t> dist(16, 256);
    std::vector<std::uint32_t> sizes(4096);
    for (auto& s : sizes) s = dist(engine);
    std::size_t next_size = 0;
    ready.fetch_add(1);
    while (!go.load()) std::this_thread::yield();
    for (long n = 0; n < batches_per_producer; ++n) {
      Batch* b;
      while ((b = empty.try_pop()) == nullptr) std::this_thread::yield();
      b->bytes = 0;
      for (auto& p : b->blocks) {
        std::uint32_t size = sizes[next_size++ & 4095];
        p = std::malloc(size);
        static_cast<char*>(p)[0] = 1;
        b->bytes += size;
      }
      // Bookkeeping of live bytes, once per batch (not per object).
      long now = live.fetch_add(static_cast<long>(b->bytes)) + static_cast<long>(b->bytes);
      for (long seen = peak.load(); now > seen && !peak.compare_exchange_weak(seen, now);) {
      }
      while (!full.try_push(b)) std::this_thread::yield();
    }
  };
  auto consumer = [&] {
    ready.fetch_add(1);
    while (!go.load()) std::this_thread::yield();
    while (taken.load() < total_batches) {
      Batch* b = full.try_pop();
      if (b == nullptr) {
        std::this_thread::yield();
        continue;
      }
      taken.fetch_add(1);
      for (void* p : b->blocks) std::free(p);
      live.fetch_sub(static_cast<long>(b->bytes));
      while (!empty.try_push(b)) std::this_thread::yield();
    }
  };
  std::vector<std::thread> threads;
  for (long p = 0; p < producers; ++p) threads.emplace_back(producer, p);
  for (long c = 0; c < consumers; ++c) threads.emplace_back(consumer);
  while (ready.load() < producers + consumers) std::this_thread::yield();
  std::uint64_t t0 = bench::now_ns();
  go.store(true);
  for (auto& t : threads) t.join();
  double elapsed = double(bench::now_ns() - t0);
  // The descriptors' pointer arrays are requested bytes too.
  const double arrays = double(descriptors) * double(batch) * sizeof(void*);
  return {elapsed / double(total_batches * batch), double(peak.load()) + arrays};
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"configs", "objects", "batch", "descriptors"});
  const auto configs = args.integers("configs", {1, 2, 4});
  const long objects = args.integer("objects", 4000000);
  const long batch = args.integer("batch", 64);
  const long descriptors_per_thread = args.integer("descriptors", 8);

  bench::become_multithreaded();
  double peak_live = 0;
  for (long n : configs) {
    Result r = run(n, n, objects, batch, descriptors_per_thread * 2 * n);
    peak_live = std::max(peak_live, r.peak_live_bytes);
    bench::Params params = {{"producers", std::to_string(n)}, {"consumers", std::to_string(n)},
                            {"config", bench::quoted(std::to_string(n) + "x" + std::to_string(n))},
                            {"objects", std::to_string(objects)}, {"batch", std::to_string(batch)}};
    bench::emit("handoff_nxn", "ns_per_object", r.ns_per_object, "ns", params);
    bench::emit("handoff_nxn", "mobjects_per_sec", 1e3 / r.ns_per_object, "M/s", params);
  }
  bench::emit_peak_live("handoff_nxn", peak_live);
}
