// Producer/consumer handoff: half the threads only allocate, the other half
// only free, so every free is remote (the case where a classic thread-caching
// allocator stalls). Blocks travel in batches through bounded queues.
#include "stress_support.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using namespace stress;

struct Block {
  void* p;
  std::size_t n;
};
using Batch = std::vector<Block>;

// A bounded queue of batches; the bound keeps producers from running away.
class BatchQueue {
 public:
  void push(Batch batch) {
    std::unique_lock<std::mutex> guard(lock_);
    not_full_.wait(guard, [&] { return batches_.size() < kCapacity; });
    batches_.push_back(std::move(batch));
    not_empty_.notify_one();
  }
  // Returns false once closed and drained.
  bool pop(Batch& out) {
    std::unique_lock<std::mutex> guard(lock_);
    not_empty_.wait(guard, [&] { return !batches_.empty() || closed_; });
    if (batches_.empty()) return false;
    out = std::move(batches_.front());
    batches_.pop_front();
    not_full_.notify_one();
    return true;
  }
  void close() {
    std::lock_guard<std::mutex> guard(lock_);
    closed_ = true;
    not_empty_.notify_all();
  }

 private:
  static constexpr std::size_t kCapacity = 16;
  std::mutex lock_;
  std::condition_variable not_empty_, not_full_;
  std::deque<Batch> batches_;
  bool closed_ = false;
};

Totals g_totals;

void producer(int id, BatchQueue& queue, const Options& o, Clock::time_point deadline) {
  Random rng(o.seed * 7919 + static_cast<std::uint64_t>(id));
  std::uint64_t ops = 0;
  while (Clock::now() < deadline) {
    Batch batch;
    batch.reserve(128);
    for (int i = 0; i < 128; ++i, ++ops) {
      // Small blocks dominate producer/consumer loads; keep a few big ones.
      std::size_t n = rng.percent(97) ? 8 + rng.below(512) : rng.block_size();
      void* p = rng.percent(10) ? allocate_aligned(std::size_t{64} << rng.below(6), n) : allocate(n);
      if (!p) fail("allocation returned NULL", nullptr, n);
      fill(p, n);
      batch.push_back({p, n});
    }
    queue.push(std::move(batch));
  }
  g_totals.add(ops, 0);
}

void consumer(BatchQueue& queue) {
  std::uint64_t ops = 0, bytes = 0;
  Batch batch;
  while (queue.pop(batch)) {
    for (const Block& b : batch) {
      check(b.p, b.n);
      bytes += b.n;
      release(b.p);
      ++ops;
    }
  }
  g_totals.add(ops, bytes);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Options::parse(argc, argv);
  if (o.threads < 2) o.threads = 2;
  const int pairs = o.threads / 2;
  auto start = Clock::now();
  auto deadline = deadline_after(o.seconds);
  std::vector<BatchQueue> queues(static_cast<std::size_t>(pairs));
  std::vector<std::thread> producers, consumers;
  for (int i = 0; i < pairs; ++i) {
    consumers.emplace_back(consumer, std::ref(queues[i]));
    producers.emplace_back(producer, i, std::ref(queues[i]), std::cref(o), deadline);
  }
  for (auto& t : producers) t.join();
  for (auto& q : queues) q.close();
  for (auto& t : consumers) t.join();
  g_totals.print("stress_handoff", o, seconds_since(start));
  return 0;
}
