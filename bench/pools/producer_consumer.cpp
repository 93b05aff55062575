// seed003_producer_consumer: seed 003's two-thread test. One thread only
// allocates, the other only frees; objects travel from the first to the
// second through a single-producer/single-consumer ring (the same ring for
// every pool, so only the pool differs). Each side times its pool calls
// with rdtsc in bursts of 32 calls (a timer read per call would cost more
// than a lock-free pop), and the run's wall time is reported too.
//
// Rows: concurrent_pool<mutex>, <spinlock>, <lock_free>, thread_cached_pool.
// Each row runs unpinned (as the preloaded allocators' version of this test
// does) and pinned (the seed's two-core setting, where the pools really
// contend; seed 003's ratios are about this case); lines carry "pinned".
// Usage: pool_bench_producer_consumer [--quick] [--reps N] [--objects N] [--size N] [--pin 0|1]
//        (--pin: only that placement; default both)
#include <strata/concurrent_pool.hpp>
#include <strata/thread_cached_pool.hpp>

#include "bench_common.hpp"

#include <atomic>
#include <pthread.h>
#include <sched.h>
#include <thread>

namespace {

constexpr std::size_t burst = 32;

// Pinned: producer on CPU 0, consumer on CPU 1, as in the seed's two-core
// run, so that the pools really contend. On a machine shared with other
// work a pinned thread cannot move away from a busy CPU and its timed
// bursts absorb whole time slices of other processes: read pinned figures
// together with the load average the report prints.
void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// A bounded single-producer/single-consumer queue of bursts of pointers.
class spsc_ring {
 public:
  void push(void* const* items) {
    std::uint64_t t = tail_.load(std::memory_order_relaxed);
    while (t - head_.load(std::memory_order_acquire) == capacity) sched_yield();
    std::copy(items, items + burst, slots_[t % capacity]);
    tail_.store(t + 1, std::memory_order_release);
  }
  void pop(void** items) {
    std::uint64_t h = head_.load(std::memory_order_relaxed);
    while (tail_.load(std::memory_order_acquire) == h) sched_yield();
    std::copy(slots_[h % capacity], slots_[h % capacity] + burst, items);
    head_.store(h + 1, std::memory_order_release);
  }

 private:
  static constexpr std::uint64_t capacity = 256;  // bursts
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  alignas(64) void* slots_[capacity][burst];
};

template <class Pool>
void run(const char* row, long reps, long objects, long size, bool pin) {
  for (long rep = 0; rep < reps; ++rep) {
    Pool pool(static_cast<std::size_t>(size));
    auto ring = std::make_unique<spsc_ring>();
    const long bursts = objects / static_cast<long>(burst);
    std::uint64_t alloc_cycles = 0, free_cycles = 0;
    std::uint64_t n0 = bench::now_ns();
    std::thread producer([&] {
      if (pin) pin_to_cpu(0);
      void* items[burst];
      for (long b = 0; b < bursts; ++b) {
        std::uint64_t t0 = bench::cycles();
        for (std::size_t i = 0; i < burst; ++i) items[i] = pool.allocate();
        alloc_cycles += bench::cycles() - t0;
        for (std::size_t i = 0; i < burst; ++i) *static_cast<long*>(items[i]) = b;  // the object is used
        ring->push(items);
      }
    });
    std::thread consumer([&] {
      if (pin) pin_to_cpu(1);
      void* items[burst];
      for (long b = 0; b < bursts; ++b) {
        ring->pop(items);
        for (std::size_t i = 0; i < burst; ++i)
          if (*static_cast<long*>(items[i]) != b) std::abort();
        std::uint64_t t0 = bench::cycles();
        for (std::size_t i = 0; i < burst; ++i) pool.deallocate(items[i]);
        free_cycles += bench::cycles() - t0;
      }
    });
    producer.join();
    consumer.join();
    std::uint64_t n1 = bench::now_ns();
    const double n = static_cast<double>(bursts) * burst;
    std::string extra = ",\"rep\":" + std::to_string(rep) + ",\"pinned\":" + (pin ? "true" : "false") + ",\"threads\":2,\"size\":" + std::to_string(size) +
                        ",\"objects\":" + std::to_string(static_cast<long>(n));
    bench::emit("seed003_producer_consumer", row, "alloc_cycles_per_op", static_cast<double>(alloc_cycles) / n,
                "cycles", extra);
    bench::emit("seed003_producer_consumer", row, "free_cycles_per_op", static_cast<double>(free_cycles) / n,
                "cycles", extra);
    bench::emit("seed003_producer_consumer", row, "wall_ns_per_object", static_cast<double>(n1 - n0) / n, "ns",
                extra);
    std::fprintf(stderr, "%-36s rep %ld: alloc %6.1f  free %6.1f cycles/op, wall %6.1f ns/object\n", row, rep,
                 static_cast<double>(alloc_cycles) / n, static_cast<double>(free_cycles) / n,
                 static_cast<double>(n1 - n0) / n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long reps = bench::arg(argc, argv, "--reps", 5);
  const long objects = bench::arg(argc, argv, "--objects", bench::flag(argc, argv, "--quick") ? 500'000 : 2'000'000);
  const long size = bench::arg(argc, argv, "--size", 64);
  const long only = bench::arg(argc, argv, "--pin", -1);
  for (bool pin : {false, true}) {
    if (only >= 0 && pin != (only != 0)) continue;
    run<strata::concurrent_pool<strata::mutex_policy>>("strata::concurrent_pool<mutex>", reps, objects, size, pin);
    run<strata::concurrent_pool<strata::spinlock_policy>>("strata::concurrent_pool<spinlock>", reps, objects, size, pin);
    run<strata::concurrent_pool<strata::lock_free_policy>>("strata::concurrent_pool<lock_free>", reps, objects, size, pin);
    run<strata::thread_cached_pool>("strata::thread_cached_pool", reps, objects, size, pin);
  }
}
