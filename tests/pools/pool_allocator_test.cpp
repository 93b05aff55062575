// strata::pool_allocator<T>: a standard Allocator whose single-object
// requests come from per-type pools cached per thread.
#include <strata/pool_allocator.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <forward_list>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

template <class T>
using alloc = strata::pool_allocator<T>;

using IntSet = std::unordered_set<int, std::hash<int>, std::equal_to<int>, alloc<int>>;
using IntList = std::list<int, alloc<int>>;

struct Recursive {
  int value;
  std::list<Recursive, alloc<Recursive>> children;  // allocator named while T is incomplete
};

}  // namespace

TEST(PoolAllocator, SatisfiesAllocatorTraits) {
  using traits = std::allocator_traits<alloc<int>>;
  static_assert(std::is_same_v<traits::rebind_alloc<double>, alloc<double>>);
  static_assert(traits::is_always_equal::value);
  static_assert(traits::propagate_on_container_move_assignment::value);
  alloc<int> a;
  alloc<double> b(a);
  EXPECT_TRUE(a == alloc<int>(b));
  EXPECT_FALSE(a != alloc<int>(b));
  int* one = a.allocate(1);
  *one = 5;
  alloc<int>(b).deallocate(one, 1);  // any instance frees what another allocated
  int* many = a.allocate(1000);
  std::fill(many, many + 1000, 9);
  a.deallocate(many, 1000);
  EXPECT_THROW((void)a.allocate(std::size_t(-1) / 2), std::bad_array_new_length);
}

TEST(PoolAllocator, SingleObjectsComeFromThePoolArraysDoNot) {
  alloc<std::uint64_t> a;
  std::uint64_t* one = a.allocate(1);
  std::uint64_t* many = a.allocate(64);
  EXPECT_TRUE(alloc<std::uint64_t>::pool<>::owns(one));
  EXPECT_FALSE(alloc<std::uint64_t>::pool<>::owns(many));
  a.deallocate(one, 1);
  a.deallocate(many, 64);
}

TEST(PoolAllocator, NodeContainersWork) {
  IntSet s;
  std::map<int, std::string, std::less<int>, alloc<std::pair<const int, std::string>>> m;
  IntList l;
  std::forward_list<int, alloc<int>> fl;
  std::set<int, std::less<int>, alloc<int>> ordered;
  for (int i = 0; i < 20000; ++i) {
    s.insert(i * 7);
    m.emplace(i, std::to_string(i));
    l.push_back(i);
    fl.push_front(i);
    ordered.insert(-i);
  }
  for (int i = 0; i < 20000; i += 2) s.erase(i * 7);
  EXPECT_EQ(s.size(), 10000u);
  EXPECT_EQ(m.at(12345), "12345");
  EXPECT_EQ(l.size(), 20000u);
  EXPECT_EQ(*ordered.begin(), -19999);
  Recursive r{1, {}};
  r.children.push_back({2, {}});
  r.children.back().children.push_back({3, {}});
  EXPECT_EQ(r.children.back().children.back().value, 3);
  std::vector<int, alloc<int>> v(100, 1);  // works, though not pooled (n > 1)
  EXPECT_EQ(v.size(), 100u);
}

TEST(PoolAllocator, SeedUnorderedSetWorkload) {
  std::mt19937 engine;
  std::uniform_int_distribution<int> dist;
  std::vector<int> nums(5000);
  for (int& n : nums) n = dist(engine);
  IntSet s;
  for (int n : nums) s.insert(n);
  std::shuffle(nums.begin(), nums.end(), engine);
  for (int n : nums) s.erase(n);
  EXPECT_TRUE(s.empty());
  std::shuffle(nums.begin(), nums.end(), engine);
  for (int n : nums) s.insert(n);
  std::set<int> expected(nums.begin(), nums.end());
  EXPECT_EQ(s.size(), expected.size());
}

TEST(PoolAllocator, ContainerMovedToAnotherThreadIsDestroyedThere) {
  IntList l;
  for (int i = 0; i < 10000; ++i) l.push_back(i);
  std::thread([moved = std::move(l)]() mutable {
    long sum = 0;
    for (int x : moved) sum += x;
    EXPECT_EQ(sum, 10000L * 9999 / 2);
    moved.clear();
  }).join();
}

TEST(PoolAllocator, ThreadExitsWhileItsNodesLiveInAnotherThreadsContainer) {
  IntList survivor;
  std::thread([&] {
    IntList local;
    for (int i = 0; i < 10000; ++i) local.push_back(i);
    survivor.splice(survivor.end(), local);  // nodes change owner, not memory
  }).join();
  // The allocating thread is gone; its nodes are intact and freeable here.
  int expected = 0;
  for (int x : survivor) ASSERT_EQ(x, expected++);
  survivor.clear();
}

TEST(PoolAllocator, NodesFreedByAnotherThreadBecomeReusable) {
  // A producer allocates, a consumer frees: memory must not grow without bound.
  using node_pool = alloc<std::array<char, 48>>::pool<>;
  auto round = [] {
    std::vector<std::array<char, 48>*> batch;
    alloc<std::array<char, 48>> a;
    for (int i = 0; i < 20000; ++i) batch.push_back(a.allocate(1));
    std::thread([&] {
      for (auto* p : batch) a.deallocate(p, 1);
    }).join();
  };
  round();
  const std::size_t chunks_after_first = node_pool::chunk_count();
  for (int i = 0; i < 20; ++i) round();
  EXPECT_EQ(node_pool::chunk_count(), chunks_after_first);
}

TEST(PoolAllocator, ManyThreadsShareNodesAcrossThreads) {
  // Every thread builds a map and hands it to the next thread, which checks
  // and destroys it: all frees are remote.
  constexpr int threads = 8;
  using Map = std::map<int, int, std::less<int>, alloc<std::pair<const int, int>>>;
  std::vector<Map> maps(threads);
  std::vector<std::thread> ts;
  std::atomic<int> built{0};
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) maps[t].emplace(i, i * t);
      built.fetch_add(1);
      while (built.load() < threads) std::this_thread::yield();
      Map& other = maps[(t + 1) % threads];
      int owner = (t + 1) % threads;
      for (auto& [k, v] : other) ASSERT_EQ(v, k * owner);
    });
  for (auto& th : ts) th.join();
  std::vector<std::thread> destroyers;
  for (int t = 0; t < threads; ++t) destroyers.emplace_back([&, t] { maps[t].clear(); });
  for (auto& th : destroyers) th.join();
}

TEST(PoolAllocator, ThreadChurnDoesNotLeakChunks) {
  using node_pool = alloc<std::array<char, 24>>::pool<>;
  auto work = [] {
    alloc<std::array<char, 24>> a;
    std::vector<std::array<char, 24>*> v;
    for (int i = 0; i < 3000; ++i) v.push_back(a.allocate(1));
    for (auto* p : v) a.deallocate(p, 1);
  };
  std::thread(work).join();
  const std::size_t chunks = node_pool::chunk_count();
  for (int i = 0; i < 50; ++i) std::thread(work).join();
  EXPECT_EQ(node_pool::chunk_count(), chunks);
}

namespace {
struct alignas(64) CacheLine {
  int value;
};
}  // namespace

TEST(PoolAllocator, OverAlignedNodesAreAligned) {
  std::list<CacheLine, alloc<CacheLine>> l;
  for (int i = 0; i < 5000; ++i) {
    l.push_back({i});
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(&l.back()) % 64, 0u);
  }
  int i = 0;
  for (const CacheLine& c : l) ASSERT_EQ(c.value, i++);
}

TEST(PoolAllocator, NodesAreAlignedToTheirSizesLargestPowerOfTwo) {
  // A 16-byte node must never straddle two cache lines: slots are aligned
  // to the largest power of two dividing the slot size (up to 64).
  auto check = [](auto tag, std::size_t expected_alignment) {
    using T = decltype(tag);
    alloc<T> a;
    std::vector<T*> v;
    for (int i = 0; i < 3000; ++i) {
      v.push_back(a.allocate(1));
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(v.back()) % expected_alignment, 0u) << sizeof(T);
    }
    for (T* p : v) a.deallocate(p, 1);
  };
  check(std::array<char, 16>{}, 16);
  check(std::array<char, 32>{}, 32);
  check(std::array<char, 48>{}, 16);
  check(std::array<char, 128>{}, 64);
}

TEST(PoolAllocator, InterleavedFreesAndAllocationsAcrossBatchBoundaries) {
  // The thread cache is two free lists threaded through the nodes, traded
  // with the depot a batch at a time. Allocate and free in an irregular
  // pattern that crosses many batch boundaries; no node may be handed out
  // twice, and every node keeps what was written into it.
  using Node = std::array<std::uint64_t, 2>;
  alloc<Node> a;
  std::mt19937 engine(7);
  std::vector<Node*> live;
  std::set<Node*> handed_out;
  for (int step = 0; step < 200000; ++step) {
    const bool allocate = live.empty() || (engine() % 100) < (step % 20000 < 10000 ? 70u : 30u);
    if (allocate) {
      Node* p = a.allocate(1);
      ASSERT_TRUE(handed_out.insert(p).second) << "node handed out twice";
      (*p)[0] = reinterpret_cast<std::uintptr_t>(p);
      (*p)[1] = ~reinterpret_cast<std::uintptr_t>(p);
      live.push_back(p);
    } else {
      std::size_t i = engine() % live.size();
      Node* p = live[i];
      ASSERT_EQ((*p)[0], reinterpret_cast<std::uintptr_t>(p));
      ASSERT_EQ((*p)[1], ~reinterpret_cast<std::uintptr_t>(p));
      live[i] = live.back();
      live.pop_back();
      handed_out.erase(p);
      a.deallocate(p, 1);
    }
  }
  for (Node* p : live) a.deallocate(p, 1);
}
