// Heap profiling through the strata_* API, inside the process (also under
// the sanitizers): sampled blocks behave like unsampled ones, frees from any
// thread and through realloc find their sample, fork and thread exit, the
// profile file and its errors, the sampler's distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <strata/strata.h>

#include "frontend/recent_blocks.h"
#include "frontend/thread_cache.h"
#include "profile/fast_math.h"
#include "profile/pointer_index.h"
#include "profile/sampler.h"

namespace {

strata_stats_t stats() {
  static strata_stats_t s;  // large: keep it off the stack
  strata_stats(&s);
  return s;
}

std::size_t samples_total() { return stats().profile_samples_total; }
std::size_t samples_live() { return stats().profile_samples; }

// Every allocation of the calling thread crosses a sampling point (mean
// interval 1 byte), or none does (0).
void sample_everything() { ASSERT_EQ(strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, 1), 0); }
void sample_nothing() { ASSERT_EQ(strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, 0), 0); }

// Allocates until the allocator samples one (with interval 1 nearly every
// allocation is; the draw can leave room for a tiny one).
template <class Allocate>
void* sampled(Allocate allocate) {
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::size_t before = samples_total();
    void* p = allocate();
    if (samples_total() == before + 1) return p;
    strata_free(p);
  }
  ADD_FAILURE() << "no allocation was sampled";
  return nullptr;
}

std::string temp_path(const char* name) {
  return std::string(::testing::TempDir()) + "strata_profile_" + std::to_string(getpid()) + "_" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class Profiling : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = strata_option_get(STRATA_OPTION_PROFILE_SAMPLE); }
  void TearDown() override { strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, saved_); }
  long saved_ = 0;
};

// (A 0-byte request weighs nothing: it is never sampled.)
const std::size_t kSizes[] = {1, 8, 17, 24, 100, 1000, 1025, 5000, 70000, 262144, 262145, 1 << 20};

}  // namespace

TEST_F(Profiling, SampledBlocksReportTheUsableSizeOfUnsampledOnes) {
  for (std::size_t size : kSizes) {
    sample_nothing();
    void* plain = strata_malloc(size);
    std::size_t usable = strata_usable_size(plain);
    sample_everything();
    std::size_t live_before = samples_live();
    void* p = sampled([&] { return strata_malloc(size); });
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(samples_live(), live_before + 1);
    EXPECT_EQ(strata_usable_size(p), usable) << "size " << size;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u);
    std::memset(p, 0x5a, usable);  // every usable byte is writable
    strata_free(p);
    EXPECT_EQ(samples_live(), live_before) << "size " << size;
    sample_nothing();
    strata_free(plain);
  }
}

TEST_F(Profiling, StatisticsCountLiveSampledBytes) {
  sample_everything();
  strata_stats_t before = stats();
  void* p = sampled([] { return strata_malloc(1234); });
  strata_stats_t during = stats();
  EXPECT_EQ(during.profile_samples, before.profile_samples + 1);
  EXPECT_EQ(during.profile_sampled_bytes, before.profile_sampled_bytes + 1234);
  EXPECT_GT(during.profile_samples_total, before.profile_samples_total);
  strata_free(p);
  EXPECT_EQ(stats().profile_sampled_bytes, before.profile_sampled_bytes);
}

TEST_F(Profiling, AlignedSampledBlocksKeepTheirAlignment) {
  for (std::size_t alignment = 32; alignment <= (std::size_t{4} << 20); alignment <<= 1) {
    for (std::size_t size : {std::size_t{1}, std::size_t{100}, alignment, std::size_t{300000}}) {
      sample_nothing();
      void* plain = strata_aligned_alloc(alignment, size);
      std::size_t usable = strata_usable_size(plain);
      sample_everything();
      void* p = sampled([&] { return strata_aligned_alloc(alignment, size); });
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignment, 0u) << alignment;
      EXPECT_EQ(strata_usable_size(p), usable) << "alignment " << alignment << " size " << size;
      std::memset(p, 1, size);
      strata_free(p);
      sample_nothing();
      strata_free(plain);
    }
  }
}

TEST_F(Profiling, SampledCallocIsZeroEvenOnReusedPages) {
  sample_everything();
  for (int round = 0; round < 20; ++round) {
    void* dirty = sampled([] { return strata_malloc(20000); });
    std::memset(dirty, 0xff, 20000);
    strata_free(dirty);  // its page goes back to the page heap, dirty
    auto* p = static_cast<unsigned char*>(sampled([] { return strata_calloc(100, 200); }));
    ASSERT_NE(p, nullptr);
    for (std::size_t i = 0; i < 20000; ++i) ASSERT_EQ(p[i], 0) << i;
    strata_free(p);
  }
}

TEST_F(Profiling, ReallocOfSampledBlocksKeepsContentsAndFindsTheSample) {
  std::size_t live_before = samples_live();
  sample_everything();
  auto* p = static_cast<unsigned char*>(sampled([] { return strata_malloc(40); }));
  for (int i = 0; i < 40; ++i) p[i] = static_cast<unsigned char>(i);
  std::size_t valid = 40;  // leading bytes that still hold the pattern
  // Grow and shrink across small, large and back; samples on and off.
  for (std::size_t next : {std::size_t{48}, std::size_t{100}, std::size_t{3000}, std::size_t{400000},
                           std::size_t{300000}, std::size_t{70}, std::size_t{20}, std::size_t{5000}}) {
    if (next % 2 == 0) sample_everything(); else sample_nothing();
    auto* q = static_cast<unsigned char*>(strata_realloc(p, next));
    ASSERT_NE(q, nullptr);
    if (next < valid) valid = next;
    for (std::size_t i = 0; i < valid; ++i) ASSERT_EQ(q[i], static_cast<unsigned char>(i)) << next;
    EXPECT_GE(strata_usable_size(q), next);
    p = q;
  }
  sample_nothing();
  strata_free(p);
  EXPECT_EQ(samples_live(), live_before);
  // realloc(NULL, n) samples like malloc.
  sample_everything();
  void* r = sampled([] { return strata_realloc(nullptr, 64); });
  EXPECT_EQ(samples_live(), live_before + 1);
  strata_free(r);
  EXPECT_EQ(samples_live(), live_before);
}

TEST_F(Profiling, SampledBlocksFreedByOtherThreadsLeaveTheLiveSet) {
  std::size_t live_before = samples_live();
  std::vector<void*> blocks;
  std::thread producer([&] {
    sample_everything();
    for (int i = 0; i < 200; ++i) blocks.push_back(strata_malloc(16 + i * 8));
  });
  producer.join();  // the thread exits while its sampled blocks live
  EXPECT_GE(samples_live(), live_before + 150);
  std::thread consumer([&] {
    for (void* p : blocks) strata_free(p);
  });
  consumer.join();
  EXPECT_EQ(samples_live(), live_before);
}

// A thread that lists (frontend/recent_blocks.h) hands out the blocks it
// freed from its lists, not from allocation words: each is counted for
// sampling as it is taken, so the samples still follow the bytes.
TEST_F(Profiling, BlocksAListingThreadReusesAreCountedForSampling) {
  constexpr long kInterval = 64 * 1024;
  ASSERT_EQ(strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, kInterval), 0);
  constexpr int kPairs = 100000;
  const std::size_t before = samples_total();
  bool listing = false;
  std::thread([&] {
    using namespace strata::detail;
    for (int i = 0; i < 300; ++i) strata_free(strata_malloc(16));  // busy: a cache of its own
    ThreadCache* cache = current_cache(false);
    ASSERT_NE(cache, nullptr);
    for (int i = 0; i < kPairs; ++i) {
      // Listing, as after a window of sparse words. (The sampled
      // allocations' words are dense: a window of them would stop it.)
      if (i % 1000 == 0) {
        cache->window = kListingWindowWords << 16;
        close_listing_window(cache);
      }
      char* p = static_cast<char*>(strata_malloc(1000));
      p[0] = 1;
      strata_free(p);
    }
    listing = ((cache->listing >> size_to_class(1000)) & 1) != 0;
  }).join();
  // Each sampled allocation takes a word (its block is the sampled one);
  // nearly every other one is the block freed just before, from the list.
  EXPECT_TRUE(listing);
  const double expected = double(kPairs) * 1024 / kInterval;  // 1000 B requests take 1 KiB blocks
  const double taken = double(samples_total() - before);
  EXPECT_NEAR(taken / expected, 1.0, 0.2) << taken << " samples, " << expected << " expected";
}

TEST_F(Profiling, ManyThreadsSampleAndFreeEachOthersBlocks) {
  constexpr int kThreads = 8;
  std::size_t live_before = samples_live();
  std::vector<std::atomic<void*>> slots(4096);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, 4096);
      std::uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1);
      for (int i = 0; i < 20000; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::size_t size = 8 + x % 3000;
        void* fresh = strata_malloc(size);
        std::memset(fresh, t, size < 64 ? size : 64);
        void* old = slots[x % slots.size()].exchange(fresh);
        if (old != nullptr) strata_free(old);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(samples_total(), 0u);
  for (auto& s : slots) strata_free(s.exchange(nullptr));
  EXPECT_EQ(samples_live(), live_before);
}

TEST_F(Profiling, DumpWritesAHeapProfileWithTheCallSite) {
  sample_everything();
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(sampled([] { return strata_malloc(1000); }));
  std::string path = temp_path("dump.heap");
  ASSERT_EQ(strata_profile_dump(path.c_str()), 0) << std::strerror(errno);
  std::string text = read_file(path);
  EXPECT_EQ(text.rfind("heap profile: ", 0), 0u) << text.substr(0, 200);
  EXPECT_NE(text.find("@ heapprofile\n"), std::string::npos) << text.substr(0, 200);
  EXPECT_NE(text.find("\nMAPPED_LIBRARIES:\n"), std::string::npos);
  EXPECT_NE(text.find("r-xp"), std::string::npos);  // a copy of /proc/self/maps
  // A line for 10 live blocks of 1000 bytes (size range 512..1023).
  EXPECT_NE(text.find("    10:    10000 ["), std::string::npos) << text.substr(0, 600);
  for (void* p : blocks) strata_free(p);
  std::remove(path.c_str());
}

TEST_F(Profiling, DumpReportsErrorsThroughErrno) {
  errno = 0;
  EXPECT_EQ(strata_profile_dump(nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(strata_profile_dump(""), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(strata_profile_dump("/nonexistent-strata-dir/x.heap"), -1);
  EXPECT_EQ(errno, ENOENT);
  errno = 0;
  EXPECT_EQ(strata_profile_dump(::testing::TempDir().c_str()), -1);  // a directory
  EXPECT_EQ(errno, EISDIR);
  if (access("/dev/full", W_OK) == 0) {
    errno = 0;
    EXPECT_EQ(strata_profile_dump("/dev/full"), -1);
    EXPECT_EQ(errno, ENOSPC);
  }
}

TEST_F(Profiling, ForkChildCanDumpAndFreeParentsSampledBlocks) {
  sample_everything();
  void* parents = sampled([] { return strata_malloc(3000); });
  std::string path = temp_path("child.heap");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // In the child: sample, free a sampled block of the parent's, dump.
    void* mine = strata_malloc(5000);
    strata_free(parents);
    int rc = strata_profile_dump(path.c_str());
    strata_free(mine);
    _exit(rc == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(read_file(path).rfind("heap profile: ", 0), 0u);
  std::remove(path.c_str());
  strata_free(parents);  // still live here
}

// Which of `count` allocations of 64 B the sampler picks, as a string of
// 0 and 1; the blocks are freed afterwards.
std::string sampled_pattern(int count) {
  std::vector<void*> blocks;
  std::string pattern;
  for (int i = 0; i < count; ++i) {
    std::size_t before = samples_total();
    blocks.push_back(strata_malloc(64));
    pattern += samples_total() > before ? '1' : '0';
  }
  for (void* p : blocks) strata_free(p);
  return pattern;
}

// Forks a child that writes its sampled_pattern(4000) into a pipe and
// exits (0 when all of it was written). Returns the child's pid (-1 when
// the pipe or the fork failed), the pipe's read end in `from`.
pid_t fork_pattern_writer(int& from) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    std::string mine = sampled_pattern(4000);
    _exit(write(pipefd[1], mine.data(), mine.size()) == static_cast<ssize_t>(mine.size()) ? 0 : 1);
  }
  close(pipefd[1]);
  from = pipefd[0];
  return pid;
}

// Everything written into the pipe `from` until its writer is gone.
std::string read_all(int from) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(from, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  close(from);
  return text;
}

// Parent and child continue from one sampler state; the child must draw
// its own points (a fork from a single-threaded process runs no fork
// handler: the sampler notices the new thread id).
TEST_F(Profiling, ForkChildDrawsItsOwnSamplingPoints) {
  ASSERT_EQ(strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, 4096), 0);
  strata_free(strata_malloc(64));  // this thread's sampler is seeded
  int from = -1;
  pid_t pid = fork_pattern_writer(from);
  ASSERT_GE(pid, 0);
  std::string parents = sampled_pattern(4000);
  std::string childs = read_all(from);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(childs.size(), parents.size());
  // About 62 samples each (4,000 x 64 B over a 4 KiB mean): equal patterns
  // mean the child replayed the parent's draws.
  EXPECT_GT(std::count(parents.begin(), parents.end(), '1'), 20);
  EXPECT_GT(std::count(childs.begin(), childs.end(), '1'), 20);
  EXPECT_NE(childs, parents) << "the fork child sampled exactly the parent's allocations";
}

// What a fork child of a single-threaded process is told by is inherited: a
// child that has drawn afresh and then forks must not hand its own draws to
// its child either. The child compares its pattern with the grandchild's.
TEST_F(Profiling, ForkGrandchildDrawsItsOwnSamplingPoints) {
  ASSERT_EQ(strata_option_set(STRATA_OPTION_PROFILE_SAMPLE, 4096), 0);
  strata_free(strata_malloc(64));  // this thread's sampler is seeded
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sampled_pattern(400);  // the child notices the fork and draws afresh
    int from = -1;
    pid_t grandchild = fork_pattern_writer(from);
    if (grandchild < 0) _exit(2);
    std::string childs = sampled_pattern(4000);
    std::string grandchilds = read_all(from);
    int status = 0;
    waitpid(grandchild, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || grandchilds.size() != childs.size()) _exit(2);
    if (std::count(childs.begin(), childs.end(), '1') < 20 || std::count(grandchilds.begin(), grandchilds.end(), '1') < 20) _exit(3);
    _exit(childs == grandchilds ? 4 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_NE(WEXITSTATUS(status), 4) << "the grandchild sampled exactly the child's allocations";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: a fork, pipe or read failed; 3: too few samples";
}

TEST(Sampler, IntervalsAreExponentialWithTheRequestedMean) {
  strata::detail::SamplerState state;
  constexpr int kDraws = 1000000;
  constexpr double kMean = 524288;
  double sum = 0;
  int above_mean = 0, above_3_means = 0;
  for (int i = 0; i < kDraws; ++i) {
    auto x = static_cast<double>(strata::detail::next_interval(state, 524288));
    ASSERT_GE(x, 0);
    sum += x;
    above_mean += x > kMean;
    above_3_means += x > 3 * kMean;
  }
  EXPECT_NEAR(sum / kDraws / kMean, 1.0, 0.005);                   // sd of the mean: 0.1 %
  EXPECT_NEAR(above_mean / double(kDraws), std::exp(-1.0), 0.002);   // P(X > mean) = 1/e
  EXPECT_NEAR(above_3_means / double(kDraws), std::exp(-3.0), 0.001);
}

TEST(Sampler, FastMathMatchesLibm) {
  for (double x = 1e-16; x <= 1.0; x *= 1.37) EXPECT_NEAR(strata::detail::fast_ln(x), std::log(x), 1e-9 * std::fabs(std::log(x)) + 1e-12);
  for (double x = -60; x <= 0; x += 0.01) EXPECT_NEAR(strata::detail::fast_exp_nonpositive(x), std::exp(x), 1e-9 * std::exp(x));
  EXPECT_NEAR(strata::detail::unsampling_factor(1, 524288), 524288.5, 1.0);
  EXPECT_NEAR(strata::detail::unsampling_factor(524288, 524288), 1 / (1 - std::exp(-1.0)), 1e-9);
}

namespace {
struct IndexedRecord {
  std::uint64_t hash = 0;
  int id = 0;
};
}  // namespace

// The sample store's index starts at one page and grows: every record stays
// findable across each doubling, each is visited once, and the index stops
// at three quarters of its largest table instead of probing forever.
TEST(PointerIndex, GrowsAndKeepsEveryRecordFindable) {
  using Index = strata::detail::PointerIndex<IndexedRecord, 4096>;
  static IndexedRecord records[Index::kMaxRecords + 1];
  Index index;
  EXPECT_EQ(index.table_bytes(), 0u);
  for (int i = 0; i < static_cast<int>(Index::kMaxRecords); ++i) {
    records[i].hash = ((static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ull) & ~std::uint64_t{0xff}) | (i & 3);
    records[i].id = i;
    auto same = [&](const IndexedRecord& r) { return r.id == i; };
    ASSERT_EQ(index.find(records[i].hash, same), nullptr);
    ASSERT_TRUE(index.reserve_one());
    index.insert(&records[i]);
    if (i == 0) {
      EXPECT_EQ(index.table_bytes(), 4096u);  // one page to start
    }
  }
  EXPECT_EQ(index.size(), Index::kMaxRecords);
  EXPECT_EQ(index.table_bytes(), 4096u * sizeof(void*));
  EXPECT_FALSE(index.reserve_one());  // full: the caller counts the sample elsewhere
  std::vector<int> seen(Index::kMaxRecords, 0);
  index.for_each([&](IndexedRecord& r) { ++seen[r.id]; });
  for (int i = 0; i < static_cast<int>(Index::kMaxRecords); ++i) {
    ASSERT_EQ(seen[i], 1) << i;
    ASSERT_EQ(index.find(records[i].hash, [&](const IndexedRecord& r) { return r.id == i; }), &records[i]);
  }
  // Equal hashes are told apart by the comparison.
  EXPECT_EQ(index.find(records[5].hash, [](const IndexedRecord&) { return false; }), nullptr);
}
