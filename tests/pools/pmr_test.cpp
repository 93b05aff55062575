// strata::pmr resources, checked against the standard's documented
// behaviour of std::pmr::(un)synchronized_pool_resource ([mem.res.pool]).
#include <strata/pmr.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory_resource>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_set>
#include <vector>

namespace {

// An upstream that counts and checks what passes through it.
class counting_resource : public std::pmr::memory_resource {
 public:
  std::size_t outstanding_bytes() const { return outstanding_bytes_.load(); }
  std::size_t outstanding_blocks() const { return outstanding_blocks_.load(); }
  std::size_t allocations() const { return allocations_.load(); }
  std::size_t largest_request() const { return largest_.load(); }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = strata::pmr::general_resource()->allocate(bytes, alignment);
    outstanding_bytes_ += bytes;
    ++outstanding_blocks_;
    ++allocations_;
    std::size_t prev = largest_.load();
    while (bytes > prev && !largest_.compare_exchange_weak(prev, bytes)) {
    }
    std::lock_guard g(lock_);
    live_[p] = {bytes, alignment};
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    {
      std::lock_guard g(lock_);
      auto it = live_.find(p);
      // The standard requires deallocate to get the same size and alignment.
      EXPECT_NE(it, live_.end()) << "upstream got back a pointer it never gave";
      if (it != live_.end()) {
        EXPECT_EQ(it->second.first, bytes);
        EXPECT_EQ(it->second.second, alignment);
        live_.erase(it);
      }
    }
    outstanding_bytes_ -= bytes;
    --outstanding_blocks_;
    strata::pmr::general_resource()->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }

 private:
  std::atomic<std::size_t> outstanding_bytes_{0}, outstanding_blocks_{0}, allocations_{0}, largest_{0};
  std::mutex lock_;
  std::map<void*, std::pair<std::size_t, std::size_t>> live_;
};

template <class R>
class PmrPool : public ::testing::Test {};
using Resources = ::testing::Types<strata::pmr::pool_resource, strata::pmr::synchronized_pool_resource>;
TYPED_TEST_SUITE(PmrPool, Resources);

}  // namespace

TEST(GeneralResource, AllocatesAlignedAndIsASingleton) {
  std::pmr::memory_resource* r = strata::pmr::general_resource();
  EXPECT_EQ(r, strata::pmr::general_resource());
  EXPECT_TRUE(r->is_equal(*strata::pmr::general_resource()));
  EXPECT_FALSE(r->is_equal(*std::pmr::new_delete_resource()));
  for (std::size_t align = 1; align <= 4096; align *= 2)
    for (std::size_t bytes : {1u, 7u, 8u, 24u, 100u, 5000u}) {
      void* p = r->allocate(bytes, align);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << bytes << " " << align;
      std::memset(p, 0xab, bytes);
      r->deallocate(p, bytes, align);
    }
}

TYPED_TEST(PmrPool, ConstructorsAndUpstream) {
  // Default and options-only constructors: strata's general resource (the
  // standard uses get_default_resource(); strata never reaches malloc).
  TypeParam a;
  EXPECT_EQ(a.upstream_resource(), strata::pmr::general_resource());
  counting_resource up;
  TypeParam b(&up);
  EXPECT_EQ(b.upstream_resource(), &up);
  std::pmr::pool_options o;
  o.max_blocks_per_chunk = 16;
  o.largest_required_pool_block = 1000;
  TypeParam c(o);
  EXPECT_EQ(c.upstream_resource(), strata::pmr::general_resource());
  TypeParam d(o, &up);
  EXPECT_EQ(d.upstream_resource(), &up);
  // is_equal: only with itself.
  EXPECT_TRUE(a.is_equal(a));
  EXPECT_FALSE(a.is_equal(c));
}

TYPED_TEST(PmrPool, OptionsAreAdjustedLikeTheStandardSays) {
  // Zero means "implementation default"; a largest block may be raised
  // (here to a power of two); values above the limit become the limit.
  TypeParam zero(std::pmr::pool_options{0, 0});
  EXPECT_GT(zero.options().max_blocks_per_chunk, 0u);
  EXPECT_GT(zero.options().largest_required_pool_block, 0u);
  TypeParam odd(std::pmr::pool_options{10, 1000});
  EXPECT_LE(odd.options().max_blocks_per_chunk, 10u);
  EXPECT_GE(odd.options().largest_required_pool_block, 1000u);
  TypeParam huge(std::pmr::pool_options{std::size_t(-1), std::size_t(-1)});
  EXPECT_LT(huge.options().max_blocks_per_chunk, std::size_t(-1));
  EXPECT_LT(huge.options().largest_required_pool_block, std::size_t(-1));
}

TYPED_TEST(PmrPool, EveryRequestIsAlignedAndUsable) {
  counting_resource up;
  TypeParam r(&up);
  std::vector<std::tuple<void*, std::size_t, std::size_t>> blocks;
  for (std::size_t align = 1; align <= 8192; align *= 2)
    for (std::size_t bytes : {1u, 3u, 8u, 9u, 16u, 24u, 33u, 100u, 1000u, 4096u, 5000u, 70000u, 300000u}) {
      void* p = r.allocate(bytes, align);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << bytes << " aligned " << align;
      std::memset(p, static_cast<int>(blocks.size() & 0xff), bytes);
      blocks.emplace_back(p, bytes, align);
    }
  // No two blocks overlap: contents survive.
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    auto [p, bytes, align] = blocks[i];
    auto* c = static_cast<unsigned char*>(p);
    for (std::size_t k = 0; k < bytes; ++k) ASSERT_EQ(c[k], i & 0xff);
  }
  for (auto [p, bytes, align] : blocks) r.deallocate(p, bytes, align);
}

TYPED_TEST(PmrPool, OversizeRequestsGoStraightToUpstream) {
  counting_resource up;
  TypeParam r(std::pmr::pool_options{0, 1024}, &up);
  const std::size_t largest = r.options().largest_required_pool_block;
  const std::size_t before = up.allocations();
  void* big = r.allocate(largest * 4, 8);
  EXPECT_EQ(up.allocations(), before + 1);
  EXPECT_GE(up.largest_request(), largest * 4);
  r.deallocate(big, largest * 4, 8);
  EXPECT_EQ(up.outstanding_blocks(), 0u) << "an oversize block is returned on deallocate";
}

TYPED_TEST(PmrPool, PoolsGrowInChunksOfAtMostMaxBlocks) {
  counting_resource up;
  TypeParam r(std::pmr::pool_options{8, 0}, &up);
  std::vector<void*> v;
  for (int i = 0; i < 1000; ++i) v.push_back(r.allocate(32, 8));
  // With at most 8 blocks per chunk, 1000 blocks need at least 125 chunks,
  // and no request is much larger than 8 blocks (chunk headers, and the
  // synchronized resource's per-thread cache row of about 450 bytes).
  EXPECT_GE(up.allocations(), 1000u / 8);
  EXPECT_LE(up.largest_request(), 512u);
  for (void* p : v) r.deallocate(p, 32, 8);
}

TYPED_TEST(PmrPool, ReleaseReturnsEverythingEvenWhatWasNotDeallocated) {
  counting_resource up;
  {
    TypeParam r(&up);
    for (int i = 0; i < 1000; ++i) (void)r.allocate(static_cast<std::size_t>(8 + i % 200), 8);
    (void)r.allocate(1 << 20, 64);  // oversize
    EXPECT_GT(up.outstanding_bytes(), 0u);
    r.release();
    EXPECT_EQ(up.outstanding_bytes(), 0u);
    EXPECT_EQ(up.outstanding_blocks(), 0u);
    // Usable after release.
    void* p = r.allocate(64, 16);
    r.deallocate(p, 64, 16);
  }
  // The destructor releases too.
  EXPECT_EQ(up.outstanding_blocks(), 0u);
}

TYPED_TEST(PmrPool, FreedBlocksAreReused) {
  counting_resource up;
  TypeParam r(&up);
  std::vector<void*> v;
  for (int i = 0; i < 5000; ++i) v.push_back(r.allocate(24, 8));
  for (void* p : v) r.deallocate(p, 24, 8);
  const std::size_t allocations = up.allocations();
  for (int i = 0; i < 5000; ++i) v[i] = r.allocate(24, 8);
  EXPECT_EQ(up.allocations(), allocations);
  for (void* p : v) r.deallocate(p, 24, 8);
}

TYPED_TEST(PmrPool, WorksAsAContainerResource) {
  TypeParam r;
  std::pmr::unordered_set<int> s(&r);
  std::pmr::map<int, std::pmr::string> m(&r);
  for (int i = 0; i < 20000; ++i) {
    s.insert(i);
    m.emplace(i, std::pmr::string(40, 'x'));
  }
  for (int i = 0; i < 20000; i += 2) s.erase(i);
  EXPECT_EQ(s.size(), 10000u);
  EXPECT_EQ(m.at(777).size(), 40u);
}

TEST(SynchronizedPoolResource, ManyThreadsWithCrossThreadFrees) {
  counting_resource up;
  {
    strata::pmr::synchronized_pool_resource r(&up);
    constexpr int threads = 8;
    std::vector<std::vector<std::pair<std::uint64_t*, std::size_t>>> handoff(threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < 20000; ++i) {
          std::size_t bytes = 8 * (1 + (i * 7 + t) % 64);
          auto* p = static_cast<std::uint64_t*>(r.allocate(bytes, 8));
          for (std::size_t k = 0; k < bytes / 8; ++k) p[k] = (std::uint64_t(t) << 32) | std::uint64_t(i);
          handoff[t].emplace_back(p, bytes);
        }
      });
    for (auto& th : ts) th.join();
    ts.clear();
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        int from = (t + 1) % threads;
        for (std::size_t i = 0; i < handoff[from].size(); ++i) {
          auto [p, bytes] = handoff[from][i];
          for (std::size_t k = 0; k < bytes / 8; ++k)
            ASSERT_EQ(p[k], (std::uint64_t(from) << 32) | i);
          r.deallocate(p, bytes, 8);
        }
      });
    for (auto& th : ts) th.join();
  }
  EXPECT_EQ(up.outstanding_blocks(), 0u);
}
