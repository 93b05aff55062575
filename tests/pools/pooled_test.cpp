// strata::pooled<T>: class-specific new/delete from a per-type pool, with
// fallbacks for derived classes of another size, arrays and over-alignment.
#include <strata/pooled.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <vector>

namespace {

struct Obj : strata::pooled<Obj> {};

struct Base : strata::pooled<Base> {
  virtual ~Base() = default;
  int a = 1;
};
struct SameSize : Base {};
struct Larger : Base {
  char extra[200] = {};
};

struct alignas(64) OverAligned : strata::pooled<OverAligned> {
  char x[64];
};

struct Payload : strata::pooled<Payload> {
  explicit Payload(std::uint64_t v) : value(v) {}
  std::uint64_t value;
  char pad[40];
};

using ObjPool = strata::detail::per_type_pool<Obj, sizeof(Obj), __STDCPP_DEFAULT_NEW_ALIGNMENT__>;
using BasePool = strata::detail::per_type_pool<Base, sizeof(Base), __STDCPP_DEFAULT_NEW_ALIGNMENT__>;
using PayloadPool = strata::detail::per_type_pool<Payload, sizeof(Payload), __STDCPP_DEFAULT_NEW_ALIGNMENT__>;

}  // namespace

TEST(Pooled, NewAndDeleteUseThePool) {
  std::vector<Obj*> v;
  std::set<Obj*> distinct;
  for (int i = 0; i < 10000; ++i) {
    v.push_back(new Obj);
    EXPECT_TRUE(distinct.insert(v.back()).second);
  }
  for (Obj* o : v) EXPECT_TRUE(ObjPool::owns(o));
  for (Obj* o : v) delete o;
  // Freed slots are reused.
  Obj* again = new Obj;
  EXPECT_TRUE(distinct.count(again));
  delete again;
}

TEST(Pooled, DerivedClassOfTheSameSizeSharesThePool) {
  Base* b = new SameSize;
  EXPECT_TRUE(BasePool::owns(b));
  delete b;
}

TEST(Pooled, LargerDerivedClassFallsBackToTheGeneralAllocator) {
  std::vector<Base*> v;
  for (int i = 0; i < 100; ++i) {
    Larger* l = new Larger;
    l->extra[199] = 7;
    EXPECT_FALSE(BasePool::owns(l));
    v.push_back(l);
  }
  // Deleted through the base pointer: the virtual destructor passes the real size.
  for (Base* b : v) delete b;
}

TEST(Pooled, ArraysWork) {
  Obj* arr = new Obj[1000];
  EXPECT_FALSE(ObjPool::owns(arr));
  delete[] arr;
  Larger* larr = new Larger[10];
  larr[9].extra[0] = 1;
  delete[] larr;
}

TEST(Pooled, OverAlignedClassesAreAligned) {
  std::vector<OverAligned*> v;
  for (int i = 0; i < 100; ++i) {
    v.push_back(new OverAligned);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.back()) % 64, 0u);
  }
  for (auto* p : v) delete p;
  auto* arr = new OverAligned[3];
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(arr) % 64, 0u);
  delete[] arr;
}

TEST(Pooled, DeletedOnAnotherThreadAndReused) {
  std::vector<Payload*> v;
  for (std::uint64_t i = 0; i < 20000; ++i) v.push_back(new Payload(i));
  std::thread([&] {
    for (std::uint64_t i = 0; i < v.size(); ++i) {
      ASSERT_EQ(v[i]->value, i);
      delete v[i];
    }
  }).join();
  // The exited thread gave its cached slots back to the depot: allocating
  // as many again needs no new chunk.
  const std::size_t chunks = PayloadPool::chunk_count();
  std::vector<Payload*> w;
  for (std::uint64_t i = 0; i < 20000; ++i) w.push_back(new Payload(i));
  EXPECT_EQ(PayloadPool::chunk_count(), chunks);
  for (auto* p : w) delete p;
}

TEST(Pooled, UniquePtrAndManyThreads) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t] {
      std::vector<std::unique_ptr<Payload>> mine;
      for (int round = 0; round < 20; ++round) {
        for (int i = 0; i < 500; ++i) mine.push_back(std::make_unique<Payload>(t * 1'000'000 + i));
        for (int i = 0; i < 500; ++i) ASSERT_EQ(mine[i]->value, static_cast<std::uint64_t>(t * 1'000'000 + i));
        mine.clear();
      }
    });
  for (auto& th : threads) th.join();
}
