// Seed 003: two threads, one allocates and one frees, objects handed over
// through a queue.
//
// The seed timed Alloc() and Free() of per-type pools under a mutex, a
// spinlock and a lock-free CAS list (0.000857 / 0.000573 / 0.000243 for Alloc).
// Here the pool is the preloaded malloc: every block is freed by a thread that
// did not allocate it, which is the remote-free path of a thread-caching
// allocator. The queue is a fixed single-producer/single-consumer ring that
// never allocates, so the only allocator traffic is the measured one.
// Reported: average cycles inside one malloc and one free (rdtsc around each
// call, as the seed timed each call) and the wall time per object handed over.
#include <atomic>

#include "../common/bench_util.hpp"

namespace {

// Bounded SPSC ring of pointers; head and tail on separate cache lines.
class HandoverRing {
 public:
  explicit HandoverRing(std::size_t capacity_pow2) : slots_(capacity_pow2), mask_(capacity_pow2 - 1) {}
  bool try_push(void* p) {
    std::size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_.load(std::memory_order_acquire) == slots_.size()) return false;
    slots_[tail & mask_] = p;
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }
  void* try_pop() {
    std::size_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_.load(std::memory_order_acquire)) return nullptr;
    void* p = slots_[head & mask_];
    head_.store(head + 1, std::memory_order_release);
    return p;
  }

 private:
  std::vector<void*> slots_;
  std::size_t mask_;
  alignas(64) std::atomic<std::size_t> head_{0};
  alignas(64) std::atomic<std::size_t> tail_{0};
};

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"objects", "size", "ring"});
  const long objects = args.integer("objects", 2000000);
  const long size = args.integer("size", 64);
  const long ring_size = args.integer("ring", 4096);

  HandoverRing ring(static_cast<std::size_t>(ring_size));
  std::atomic<int> ready{0};
  std::uint64_t alloc_cycles = 0, free_cycles = 0;

  std::uint64_t t0 = 0;
  std::thread producer([&] {
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    for (long i = 0; i < objects; ++i) {
      std::uint64_t c0 = bench::cycles();
      void* p = std::malloc(static_cast<std::size_t>(size));
      alloc_cycles += bench::cycles() - c0;
      static_cast<char*>(p)[0] = 1;  // touch it, as a real producer would
      while (!ring.try_push(p)) std::this_thread::yield();
    }
  });
  std::thread consumer([&] {
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    for (long i = 0; i < objects; ++i) {
      void* p;
      while ((p = ring.try_pop()) == nullptr) std::this_thread::yield();
      std::uint64_t c0 = bench::cycles();
      std::free(p);
      free_cycles += bench::cycles() - c0;
    }
  });
  while (ready.load() < 2) {
  }
  t0 = bench::now_ns();
  producer.join();
  consumer.join();
  std::uint64_t t = bench::now_ns() - t0;

  bench::Params params = {{"objects", std::to_string(objects)}, {"size", std::to_string(size)},
                          {"threads", "2"}};
  bench::emit("seed003_producer_consumer", "alloc_cycles_per_op", double(alloc_cycles) / double(objects),
              "cycles", params);
  bench::emit("seed003_producer_consumer", "free_cycles_per_op", double(free_cycles) / double(objects),
              "cycles", params);
  bench::emit("seed003_producer_consumer", "ns_per_object", double(t) / double(objects), "ns", params);
  // At most the ring's worth of objects in flight, plus one being made and
  // one being freed; and the ring itself.
  bench::emit_peak_live("seed003_producer_consumer",
                        double(ring_size + 2) * double(size) + double(ring_size) * sizeof(void*), params);
}
