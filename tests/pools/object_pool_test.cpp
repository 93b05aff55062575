// strata::object_pool<T>: allocation, make/destroy, exception safety,
// live counting, release, chunk sizing and the checking mode.
#include <strata/object_pool.hpp>

#include <gtest/gtest.h>

#include <array>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Counted {
  static inline int constructed = 0;
  static inline int destroyed = 0;
  int value;
  explicit Counted(int v) : value(v) { ++constructed; }
  ~Counted() { ++destroyed; }
};

struct ThrowsOn13 {
  explicit ThrowsOn13(int v) : value(v) {
    if (v == 13) throw std::runtime_error("unlucky");
  }
  int value;
};

struct alignas(64) Aligned64 {
  char bytes[40];
};

struct Big {
  char bytes[100 * 1024];
};

struct Custom {
  int x;
};

}  // namespace

template <>
inline constexpr std::size_t strata::pool_chunk_bytes<Custom> = 256;

TEST(ObjectPool, AllocatesDistinctWritableSlots) {
  strata::object_pool<std::uint64_t> pool;
  std::set<std::uint64_t*> seen;
  std::vector<std::uint64_t*> all;
  for (int i = 0; i < 5000; ++i) {
    std::uint64_t* p = pool.allocate();
    ASSERT_TRUE(seen.insert(p).second) << "slot handed out twice";
    *p = 0x1234'0000u + static_cast<unsigned>(i);
    all.push_back(p);
  }
  EXPECT_EQ(pool.live(), 5000u);
  for (int i = 0; i < 5000; ++i) EXPECT_EQ(*all[i], 0x1234'0000u + static_cast<unsigned>(i));
  for (auto* p : all) pool.deallocate(p);
  EXPECT_EQ(pool.live(), 0u);
}

TEST(ObjectPool, ReusesFreedSlotsWithoutGrowing) {
  strata::object_pool<double> pool;
  std::vector<double*> v;
  for (int i = 0; i < 3000; ++i) v.push_back(pool.allocate());
  const std::size_t chunks = pool.chunks();
  std::set<double*> first(v.begin(), v.end());
  for (auto* p : v) pool.deallocate(p);
  v.clear();
  for (int i = 0; i < 3000; ++i) {
    v.push_back(pool.allocate());
    EXPECT_TRUE(first.count(v.back())) << "a fresh slot although freed ones were available";
  }
  EXPECT_EQ(pool.chunks(), chunks);
  for (auto* p : v) pool.deallocate(p);
}

TEST(ObjectPool, MakeConstructsAndDestroyDestructs) {
  Counted::constructed = Counted::destroyed = 0;
  {
    strata::object_pool<Counted> pool;
    Counted* a = pool.make(7);
    Counted* b = pool.make(8);
    EXPECT_EQ(a->value, 7);
    EXPECT_EQ(b->value, 8);
    EXPECT_EQ(Counted::constructed, 2);
    pool.destroy(a);
    pool.destroy(b);
    pool.destroy(nullptr);
    EXPECT_EQ(Counted::destroyed, 2);
    EXPECT_EQ(pool.live(), 0u);
  }
}

TEST(ObjectPool, NonTrivialTypes) {
  strata::object_pool<std::string> pool;
  std::vector<std::string*> v;
  for (int i = 0; i < 1000; ++i) v.push_back(pool.make(std::string(50, static_cast<char>('a' + i % 26))));
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(*v[i], std::string(50, static_cast<char>('a' + i % 26)));
  for (auto* s : v) pool.destroy(s);
}

TEST(ObjectPool, ConstructorExceptionLeavesPoolConsistent) {
  strata::object_pool<ThrowsOn13> pool;
  ThrowsOn13* ok = pool.make(1);
  EXPECT_THROW((void)pool.make(13), std::runtime_error);
  EXPECT_EQ(pool.live(), 1u);
  // The slot of the failed construction is free again: the next make gets it.
  ThrowsOn13* next = pool.make(2);
  EXPECT_EQ(next->value, 2);
  pool.destroy(ok);
  pool.destroy(next);
  EXPECT_EQ(pool.live(), 0u);
  EXPECT_TRUE(pool.release());
}

TEST(ObjectPool, HonoursAlignment) {
  strata::object_pool<Aligned64> pool;
  std::vector<Aligned64*> v;
  for (int i = 0; i < 500; ++i) {
    v.push_back(pool.allocate());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.back()) % 64, 0u);
  }
  for (auto* p : v) pool.deallocate(p);
}

TEST(ObjectPool, ChunkSizeIsInBytesAndSpecialisable) {
  // Default: about 16 KiB per chunk, whatever the object size.
  EXPECT_LE(strata::object_pool<std::uint64_t>::chunk_bytes(), 16u * 1024 + 16 * 1024 / 8);
  EXPECT_GE(strata::object_pool<std::uint64_t>::slots_per_chunk, 1000u);
  // A large T gets a chunk of one object, not 64 of them.
  EXPECT_EQ(strata::object_pool<Big>::slots_per_chunk, 1u);
  // The specialisation for Custom asks for 256-byte chunks.
  EXPECT_LE(strata::object_pool<Custom>::chunk_bytes(), 256u + 256 / sizeof(Custom));
  strata::object_pool<Custom> pool;
  std::vector<Custom*> v;
  for (int i = 0; i < 200; ++i) v.push_back(pool.allocate());
  EXPECT_GE(pool.chunks(), 200 / strata::object_pool<Custom>::slots_per_chunk);
  for (auto* p : v) pool.deallocate(p);
}

TEST(ObjectPool, ReleaseOnlyWhenNothingIsLive) {
  strata::object_pool<int> pool;
  int* a = pool.allocate();
  EXPECT_FALSE(pool.release());
  EXPECT_EQ(pool.chunks(), 1u);
  pool.deallocate(a);
  EXPECT_TRUE(pool.release());
  EXPECT_EQ(pool.chunks(), 0u);
  // Usable again afterwards.
  int* b = pool.allocate();
  *b = 3;
  pool.deallocate(b);
}

using ObjectPoolDeathTest = ::testing::Test;

TEST(ObjectPoolDeathTest, DoubleFreeIsCaught) {
  EXPECT_DEATH(
      {
        strata::object_pool<int> pool;
        int* p = pool.allocate();
        int* keep = pool.allocate();
        (void)keep;
        pool.deallocate(p);
        pool.deallocate(p);
      },
      "object_pool .*double free");
}

TEST(ObjectPoolDeathTest, PointerFromAnotherPoolIsCaught) {
  EXPECT_DEATH(
      {
        strata::object_pool<int> a;
        strata::object_pool<int> b;
        int* p = a.allocate();
        (void)b.allocate();
        b.deallocate(p);
      },
      "object_pool .*pointer from another pool");
}

TEST(ObjectPoolDeathTest, InteriorPointerIsCaught) {
  EXPECT_DEATH(
      {
        strata::object_pool<Aligned64> pool;
        Aligned64* p = pool.allocate();
        pool.deallocate(reinterpret_cast<Aligned64*>(reinterpret_cast<char*>(p) + 8));
      },
      "object_pool .*not an object start");
}

TEST(ObjectPoolDeathTest, LeakAtDestructionIsCaught) {
  EXPECT_DEATH(
      {
        strata::object_pool<int> pool;
        (void)pool.allocate();
      },
      "object_pool .*destroyed while objects are live");
}

#if STRATA_ASAN
using Longs8 = std::array<long, 8>;
TEST(ObjectPoolDeathTest, UseAfterDestroyIsCaughtByAddressSanitizer) {
  EXPECT_DEATH(
      {
        strata::object_pool<Longs8> pool;
        auto* p = pool.make();
        auto* keep = pool.make();
        pool.destroy(p);
        volatile long x = (*p)[5];  // freed slot: poisoned
        (void)x;
        pool.destroy(keep);
      },
      "use-after-poison");
}
#endif
