// The concurrent fixed-size pools (concurrent_pool<mutex|spinlock|lock_free>
// and thread_cached_pool): unit tests, and a linearizability-style stress
// test with more threads than cores in which every object is written and
// verified and a side table proves that no object is ever held by two
// threads at once.
#include <strata/concurrent_pool.hpp>
#include <strata/magazine_depot.hpp>
#include <strata/thread_cached_pool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cpuid.h>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace {

template <class Pool>
class ConcurrentPool : public ::testing::Test {};
using Pools = ::testing::Types<strata::concurrent_pool<strata::mutex_policy>,
                               strata::concurrent_pool<strata::spinlock_policy>,
                               strata::concurrent_pool<strata::lock_free_policy>, strata::thread_cached_pool>;
TYPED_TEST_SUITE(ConcurrentPool, Pools);

// Address -> id of the thread holding it (0: nobody). Lock-free open
// addressing; keys are never removed.
class ownership_table {
 public:
  explicit ownership_table(std::size_t capacity_log2)
      : mask_((std::size_t{1} << capacity_log2) - 1),
        keys_(new std::atomic<std::uintptr_t>[mask_ + 1]),
        holders_(new std::atomic<std::uint32_t>[mask_ + 1]) {
    for (std::size_t i = 0; i <= mask_; ++i) {
      keys_[i].store(0, std::memory_order_relaxed);
      holders_[i].store(0, std::memory_order_relaxed);
    }
  }

  // Returns the previous holder (must be 0).
  std::uint32_t take(const void* p, std::uint32_t holder) { return entry(p).exchange(holder, std::memory_order_acq_rel); }
  // Returns the previous holder (must be `holder`).
  std::uint32_t give_back(const void* p) { return entry(p).exchange(0, std::memory_order_acq_rel); }

 private:
  std::atomic<std::uint32_t>& entry(const void* p) {
    auto key = reinterpret_cast<std::uintptr_t>(p);
    std::size_t i = (key * 0x9E3779B97F4A7C15ull >> 20) & mask_;
    for (;;) {
      std::uintptr_t k = keys_[i].load(std::memory_order_acquire);
      if (k == key) return holders_[i];
      if (k == 0) {
        if (keys_[i].compare_exchange_strong(k, key, std::memory_order_acq_rel)) return holders_[i];
        if (k == key) return holders_[i];
      }
      i = (i + 1) & mask_;
    }
  }

  std::size_t mask_;
  std::unique_ptr<std::atomic<std::uintptr_t>[]> keys_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> holders_;
};

constexpr std::size_t object_words = 6;  // 48-byte objects

struct held {
  std::uint64_t* object;
  std::uint64_t stamp;
};

void fill(std::uint64_t* o, std::uint64_t stamp) {
  for (std::size_t i = 0; i < object_words; ++i) o[i] = stamp + i;
}
bool intact(const std::uint64_t* o, std::uint64_t stamp) {
  for (std::size_t i = 0; i < object_words; ++i)
    if (o[i] != stamp + i) return false;
  return true;
}

}  // namespace

TEST(LockFreePool, UsesDoubleWidthCasOnThisMachine) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  ASSERT_TRUE(__get_cpuid(1, &a, &b, &c, &d));
  EXPECT_TRUE(c & bit_CMPXCHG16B) << "this CPU lacks cmpxchg16b";
#if !STRATA_TSAN
  EXPECT_TRUE(strata::detail::tagged_stack::uses_inline_cmpxchg16b);
#endif
}

TEST(LockFreePool, TaggedStackIsLifoAndCountsEveryNode) {
  strata::detail::tagged_stack stack;
  std::vector<strata::detail::tagged_node> nodes(100);
  for (auto& n : nodes) stack.push(&n);
  for (int i = 99; i >= 0; --i) EXPECT_EQ(stack.pop(), &nodes[static_cast<std::size_t>(i)]);
  EXPECT_EQ(stack.pop(), nullptr);
  EXPECT_TRUE(stack.empty());
}

TYPED_TEST(ConcurrentPool, HandsOutDistinctAlignedWritableObjects) {
  TypeParam pool(40, 64);
  std::set<void*> seen;
  std::vector<void*> v;
  for (int i = 0; i < 10000; ++i) {
    void* p = pool.allocate();
    ASSERT_TRUE(seen.insert(p).second);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
    std::memset(p, i & 0xff, 40);
    v.push_back(p);
  }
  for (std::size_t i = 0; i < v.size(); ++i)
    for (int k = 0; k < 40; ++k) ASSERT_EQ(static_cast<unsigned char*>(v[i])[k], i & 0xff);
  for (void* p : v) pool.deallocate(p);
}

// Shapes that exercise the chunk layout: sizes that are not powers of two
// (the lock-free list maps slot <-> link cell with a reciprocal multiply),
// objects larger than a chunk (one slot per chunk, chunks over 64 KiB),
// alignments up to a page. Every object comes back and is handed out again.
TYPED_TEST(ConcurrentPool, OddSizesLargeObjectsAndLargeAlignments) {
  struct shape {
    std::size_t size, alignment;
    int count;
  };
  for (shape sh : {shape{24, 8, 5000}, shape{100, 16, 3000}, shape{3000, 64, 200}, shape{100000, 16, 6},
                   shape{200, 4096, 50}}) {
    TypeParam pool(sh.size, sh.alignment);
    std::set<void*> first;
    std::vector<void*> v;
    for (int i = 0; i < sh.count; ++i) {
      void* p = pool.allocate();
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % sh.alignment, 0u) << sh.size;
      ASSERT_TRUE(first.insert(p).second) << sh.size;
      std::memset(p, i & 0xff, sh.size);
      v.push_back(p);
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      auto* bytes = static_cast<unsigned char*>(v[i]);
      ASSERT_EQ(bytes[0], i & 0xff);
      ASSERT_EQ(bytes[sh.size - 1], i & 0xff);
    }
    for (void* p : v) pool.deallocate(p);
    std::set<void*> again;
    for (int i = 0; i < sh.count; ++i) again.insert(pool.allocate());
    EXPECT_EQ(again, first) << "size " << sh.size << ": the freed objects, and only they, come back";
    for (void* p : again) pool.deallocate(p);
  }
}

TYPED_TEST(ConcurrentPool, ReusesMemoryInTheSteadyState) {
  TypeParam pool(100);
  std::vector<void*> v;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 10000; ++i) v.push_back(pool.allocate());
    for (void* p : v) pool.deallocate(p);
    v.clear();
  }
  // 10,000 x 100 bytes need about 1 MiB; a pool that leaked would hold 50x that.
  EXPECT_LE(pool.chunk_count() * 64 * 1024, 2u * 10000 * 128);
}

TYPED_TEST(ConcurrentPool, StressManyThreadsNoObjectHandedOutTwice) {
  constexpr int threads = 16;  // oversubscribed on purpose (CI has 2 cores)
  constexpr int ops_per_thread = 50000;
  TypeParam pool(object_words * sizeof(std::uint64_t));
  ownership_table owners(18);
  std::atomic<std::uint64_t> errors{0};
  // Objects handed between threads, so that frees are often remote.
  std::mutex exchange_lock;
  std::vector<held> exchange;
  std::atomic<int> ready{0};

  auto worker = [&](std::uint32_t id) {
    std::mt19937 rng(id);
    std::vector<held> mine;
    ready.fetch_add(1);
    while (ready.load() < threads) std::this_thread::yield();
    auto release_one = [&](held h) {
      if (!intact(h.object, h.stamp)) errors.fetch_add(1);
      // The holder recorded in the table is whoever took it; hand-overs
      // move the record below.
      std::uint32_t before = owners.give_back(h.object);
      if (before != static_cast<std::uint32_t>(h.stamp >> 40)) errors.fetch_add(1);
      pool.deallocate(h.object);
    };
    // Pool calls come in back-to-back bursts (bookkeeping before and after),
    // so that threads really collide inside the pools.
    constexpr int burst = 16;
    void* fresh[burst];
    held leaving[burst];
    for (int op = 0; op < ops_per_thread; op += burst) {
      unsigned r = rng() % 100;
      if (r < 50 || mine.size() < burst) {
        for (int k = 0; k < burst; ++k) fresh[k] = pool.allocate();
        for (int k = 0; k < burst; ++k) {
          auto* o = static_cast<std::uint64_t*>(fresh[k]);
          std::uint64_t stamp = (std::uint64_t(id + 1) << 40) | std::uint64_t(op + k) << 8;
          if (owners.take(o, id + 1) != 0) errors.fetch_add(1);  // someone else holds it
          fill(o, stamp);
          mine.push_back({o, stamp});
        }
      } else if (r < 90) {
        for (int k = 0; k < burst; ++k) {
          std::size_t i = rng() % mine.size();
          leaving[k] = mine[i];
          mine[i] = mine.back();
          mine.pop_back();
          if (!intact(leaving[k].object, leaving[k].stamp)) errors.fetch_add(1);
          if (owners.give_back(leaving[k].object) != static_cast<std::uint32_t>(leaving[k].stamp >> 40))
            errors.fetch_add(1);
        }
        for (int k = 0; k < burst; ++k) pool.deallocate(leaving[k].object);
      } else if (r < 95) {
        std::lock_guard g(exchange_lock);
        for (int k = 0; k < burst; ++k) {
          exchange.push_back(mine.back());
          mine.pop_back();
        }
      } else {
        std::vector<held> taken;
        {
          std::lock_guard g(exchange_lock);
          while (!exchange.empty() && taken.size() < burst) {
            taken.push_back(exchange.back());
            exchange.pop_back();
          }
        }
        for (held h : taken) release_one(h);  // freed by a thread that did not allocate it
      }
    }
    for (held h : mine) release_one(h);
  };
  std::vector<std::thread> ts;
  for (std::uint32_t t = 0; t < threads; ++t) ts.emplace_back(worker, t);
  for (auto& th : ts) th.join();
  for (held h : exchange) {
    if (!intact(h.object, h.stamp)) errors.fetch_add(1);
    owners.give_back(h.object);
    pool.deallocate(h.object);
  }
  EXPECT_EQ(errors.load(), 0u);
}

TYPED_TEST(ConcurrentPool, ProducerConsumerThroughAQueue) {
  // Seed 003's shape: one thread only allocates, the other only frees.
  TypeParam pool(64);
  constexpr int count = 200000;
  std::vector<std::atomic<std::uint64_t*>> ring(1024);
  for (auto& slot : ring) slot.store(nullptr);
  std::atomic<std::uint64_t> errors{0};
  std::thread producer([&] {
    for (int i = 0; i < count; ++i) {
      auto* o = static_cast<std::uint64_t*>(pool.allocate());
      o[0] = static_cast<std::uint64_t>(i);
      o[7] = ~static_cast<std::uint64_t>(i);
      auto& slot = ring[static_cast<std::size_t>(i) % ring.size()];
      while (slot.load(std::memory_order_acquire) != nullptr) std::this_thread::yield();
      slot.store(o, std::memory_order_release);
    }
  });
  std::thread consumer([&] {
    for (int i = 0; i < count; ++i) {
      auto& slot = ring[static_cast<std::size_t>(i) % ring.size()];
      std::uint64_t* o;
      while ((o = slot.load(std::memory_order_acquire)) == nullptr) std::this_thread::yield();
      slot.store(nullptr, std::memory_order_release);
      if (o[0] != static_cast<std::uint64_t>(i) || o[7] != ~static_cast<std::uint64_t>(i)) errors.fetch_add(1);
      pool.deallocate(o);
    }
  });
  producer.join();
  consumer.join();
  EXPECT_EQ(errors.load(), 0u);
  // At most ring-size objects are live at once: memory stays bounded.
  EXPECT_LE(pool.chunk_count(), 4u);
}

TEST(ThreadCachedPool, ThreadChurnReusesCachesOfExitedThreads) {
  strata::thread_cached_pool pool(32);
  auto work = [&] {
    std::vector<void*> v;
    for (int i = 0; i < 2000; ++i) v.push_back(pool.allocate());
    for (void* p : v) pool.deallocate(p);
  };
  std::thread(work).join();
  const std::size_t chunks = pool.chunk_count();
  for (int i = 0; i < 100; ++i) std::thread(work).join();
  EXPECT_LE(pool.chunk_count(), chunks + 1);
}

TEST(MagazineDepot, SharedPathForThreadsWithoutACache) {
  // Threads beyond max_thread_slots use take_one/give_one; magazines of 4.
  strata::detail::magazine_depot depot(24, 8, 4096, nullptr, 4);
  std::set<void*> seen;
  std::vector<void*> v;
  for (int i = 0; i < 100; ++i) {
    v.push_back(depot.take_one());
    ASSERT_TRUE(seen.insert(v.back()).second);
  }
  const std::size_t chunks = depot.chunk_count();
  for (void* p : v) depot.give_one(p);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(seen.count(depot.take_one())) << "fresh slot while freed ones exist";
  EXPECT_EQ(depot.chunk_count(), chunks);
  depot.release_all();
}

TEST(MagazineDepot, FullAndEmptyMagazinesTrade) {
  strata::detail::magazine_depot depot(16, 16, 4096, nullptr, 8);
  strata::detail::magazine* m = depot.new_empty();
  m = depot.exchange_for_full(m);
  ASSERT_EQ(m->count, 8u);
  for (std::uint32_t i = 0; i < m->count; ++i) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(m->items()[i]) % 16, 0u);
  strata::detail::magazine* e = depot.exchange_for_empty(m);
  EXPECT_EQ(e->count, 0u);
  strata::detail::magazine* again = depot.exchange_for_full(e);
  EXPECT_EQ(again, m) << "the full magazine given back is the one handed out next";
  depot.release_all();
}

using ConcurrentPoolDeathTest = ::testing::Test;

TEST(ConcurrentPoolDeathTest, DoubleFreeIsCaught) {
  EXPECT_DEATH(
      {
        strata::concurrent_pool<strata::lock_free_policy> pool(32);
        void* p = pool.allocate();
        pool.deallocate(p);
        pool.deallocate(p);
      },
      "concurrent_pool .*double free");
}

TEST(ConcurrentPoolDeathTest, PointerFromAnotherPoolIsCaught) {
  EXPECT_DEATH(
      {
        strata::concurrent_pool<strata::mutex_policy> a(32);
        strata::concurrent_pool<strata::mutex_policy> b(32);
        void* p = a.allocate();
        (void)b.allocate();
        b.deallocate(p);
      },
      "concurrent_pool .*pointer from another pool");
}

TEST(ConcurrentPoolDeathTest, ThreadCachedPoolCatchesForeignPointers) {
  EXPECT_DEATH(
      {
        strata::thread_cached_pool a(32);
        strata::thread_cached_pool b(32);
        void* p = a.allocate();
        (void)b.allocate();
        b.deallocate(p);
      },
      "thread_cached_pool .*pointer from another pool");
}
