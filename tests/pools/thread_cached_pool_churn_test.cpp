// thread_cached_pool under thread churn: threads that start and exit while
// others allocate, slots (thread_slots.hpp) passing from exited threads to
// new ones, objects freed from thread_local destructors before and after the
// thread's slot is returned, pools destroyed while the threads that used
// them live on, more threads than slots. Every object is written and
// verified, and side tables prove that no object and no slot is ever held by
// two threads at once.
//
// The first test is the regression test of the CI crash seen once in
// ConcurrentPool/3.StressManyThreadsNoObjectHandedOutTwice (ASan: SEGV in
// several threads, "nested bug"): run alone by ctest, that test makes the
// process's first strata allocation from 16 threads at once (each thread's
// first allocate() makes its cache), and the engine's set-up
// (ensure_initialized in src/frontend/thread_cache.cpp) let the threads that
// came while it ran go on before its thread-exit key existed. They
// registered their caches under pthread key 0 (under ASan and TSan the
// sanitizer's own key) and crashed at exit. The window is a few
// microseconds; the test widens it by making pthread_key_create slow
// (linked with -Wl,--wrap=pthread_key_create, see CMakeLists.txt), which
// makes it fail every time while the bug is there.
#include <strata/strata.h>
#include <strata/thread_cached_pool.hpp>
#include <strata/thread_slots.hpp>

#include "mailbox.hpp"
#include "ownership_table.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#if STRATA_TEST_WRAPS_PTHREAD_KEY_CREATE
namespace {
std::atomic<bool> slow_key_create{false};
}  // namespace
extern "C" int __real_pthread_key_create(pthread_key_t* key, void (*destructor)(void*));
// While slow_key_create is set, every pthread_key_create of the program
// (the engine's among them) takes 20 ms: threads racing the engine's set-up
// reach their first allocation inside that window.
extern "C" int __wrap_pthread_key_create(pthread_key_t* key, void (*destructor)(void*)) {
  if (slow_key_create.load()) usleep(20000);
  return __real_pthread_key_create(key, destructor);
}
#endif

namespace {

using strata_test::ownership_table;

constexpr std::size_t object_words = 6;  // 48-byte objects, as in the stress test

struct held {
  std::uint64_t* object;
  std::uint64_t stamp;  // holder id << 32 | sequence number
};

// One pool plus the bookkeeping that checks it.
struct checked_pool {
  explicit checked_pool(std::size_t table_log2 = 18) : owners(table_log2) {}
  strata::thread_cached_pool* pool = nullptr;
  ownership_table owners;
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> next_holder{1};
  std::atomic<std::uint64_t> exit_slot_errors{0};  // see exit_time_objects

  held take(std::uint64_t holder, std::uint64_t seq) {
    auto* o = static_cast<std::uint64_t*>(pool->allocate());
    std::uint64_t stamp = holder << 32 | seq;
    if (owners.take(o, stamp) != 0) errors.fetch_add(1);  // someone else holds it
    for (std::size_t i = 0; i < object_words; ++i) o[i] = stamp + i;
    return {o, stamp};
  }
  void give(held h) {
    for (std::size_t i = 0; i < object_words; ++i)
      if (h.object[i] != h.stamp + i) {
        errors.fetch_add(1);  // written by someone else meanwhile
        break;
      }
    if (owners.give_back(h.object) != h.stamp) errors.fetch_add(1);
    pool->deallocate(h.object);
  }
};

using mailbox = strata_test::mailbox<held>;

// Slot -> thread holding it. A thread claims its slot right after its first
// pool call (the slot owner exists then) and unclaims it from a thread_local
// made after the slot owner, hence destroyed before the slot is returned: a
// slot handed to two live threads shows up as a claim that finds a holder.
struct slot_claims {
  std::atomic<std::uint64_t> holder[strata::detail::max_thread_slots] = {};
  std::atomic<std::uint64_t> double_claims{0};
  std::atomic<std::uint64_t> threads_without_slot{0};
};

struct slot_claim {
  slot_claims* claims = nullptr;
  std::uint32_t slot = strata::detail::no_thread_slot;
  std::uint64_t me = 0;
  ~slot_claim() {
    if (claims != nullptr && slot < strata::detail::max_thread_slots &&
        claims->holder[slot].exchange(0) != me)
      claims->double_claims.fetch_add(1);
  }
};

void claim_current_slot(slot_claims& claims, std::uint64_t me) {
  static thread_local slot_claim claim;
  claim.claims = &claims;
  claim.me = me;
  claim.slot = strata::detail::current_thread_slot();
  if (claim.slot >= strata::detail::max_thread_slots) {
    claims.threads_without_slot.fetch_add(1);
    return;
  }
  if (claims.holder[claim.slot].exchange(me) != 0) claims.double_claims.fetch_add(1);
}

// Frees its objects when the thread's thread_locals are destroyed, and
// checks the rule of the hand-over: the slot goes back from a pthread key
// destructor, after every thread_local destructor, so each of them still
// runs with the thread's slot (made before or after the first pool call).
struct exit_time_objects {
  checked_pool* pool = nullptr;
  std::vector<held> objects;
  ~exit_time_objects() {
    if (pool == nullptr) return;
    if (strata::detail::current_thread_slot() >= strata::detail::max_thread_slots)
      pool->exit_slot_errors.fetch_add(1);
    for (held h : objects) pool->give(h);
  }
};

// Made on first call, destroyed in reverse order of making (relative to the
// thread's slot owner, made at its first pool call).
exit_time_objects& early_exit_objects() {
  static thread_local exit_time_objects objects;
  return objects;
}
exit_time_objects& late_exit_objects() {
  static thread_local exit_time_objects objects;
  return objects;
}

// A short-lived thread: a few hundred operations, leaves objects in the
// mailbox for others, frees some from thread_local destructors. mode 0:
// nothing at exit; mode 1: a thread_local made before the thread's first pool
// call; mode 2: one made after (both destroyed while the slot is still the
// thread's).
void short_life(checked_pool& cp, mailbox& box, slot_claims& claims, std::uint64_t seed, int mode) {
  const std::uint64_t me = cp.next_holder.fetch_add(1);
  std::mt19937_64 rng(seed);
  if (mode == 1) early_exit_objects().pool = &cp;
  std::vector<held> mine;
  mine.push_back(cp.take(me, 0));
  claim_current_slot(claims, me);
  const int ops = 50 + static_cast<int>(rng() % 400);
  for (int i = 1; i < ops; ++i) {
    unsigned r = static_cast<unsigned>(rng() % 10);
    held h;
    if (r < 5 || mine.empty()) {
      mine.push_back(cp.take(me, static_cast<std::uint64_t>(i)));
    } else if (r < 8) {
      cp.give(mine.back());
      mine.pop_back();
    } else if (r < 9) {
      box.put(mine.back());
      mine.pop_back();
    } else if (box.get(h)) {
      cp.give(h);
    }
  }
  if (mode == 1) {
    exit_time_objects& early = early_exit_objects();
    early.objects.assign(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(mine.size() / 2));
    mine.erase(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(mine.size() / 2));
  } else if (mode == 2) {
    exit_time_objects& late = late_exit_objects();
    late.pool = &cp;
    late.objects.swap(mine);
  }
  for (held h : mine) {
    if (rng() % 3 == 0)
      box.put(h);
    else
      cp.give(h);
  }
}

// Several threads make the process's first strata allocation together (the
// first allocate() of each makes its cache). Exits 0 when every object was
// sound and every thread's engine cache was handed back at its exit.
[[noreturn]] void first_use_race() {
  alarm(10);  // a thread exit that hangs (seen under TSan) fails the test quickly
#if STRATA_TEST_WRAPS_PTHREAD_KEY_CREATE
  slow_key_create.store(true);
#endif
  constexpr int threads = 16;
  checked_pool cp;
  strata::thread_cached_pool pool(object_words * sizeof(std::uint64_t));
  cp.pool = &pool;
  std::atomic<int> ready{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      const std::uint64_t me = cp.next_holder.fetch_add(1);
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      std::vector<held> mine;
      for (std::uint64_t i = 0; i < 500; ++i) mine.push_back(cp.take(me, i));
      for (held h : mine) cp.give(h);
    });
  for (auto& t : ts) t.join();
  strata_stats_t stats;
  strata_stats(&stats);
  std::fprintf(stderr, "errors %llu, live thread caches after all exited %zu\n",
               static_cast<unsigned long long>(cp.errors.load()), stats.threads);
  std::exit(cp.errors.load() == 0 && stats.threads == 0 ? 0 : 1);
}

}  // namespace

TEST(ThreadCachedPoolChurnDeathTest, ManyThreadsMakeTheFirstAllocationTogether) {
  // threadsafe: the child re-executes this program, so the allocator is
  // fresh in it whatever ran before in this process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int run = 0; run < 2; ++run)
    EXPECT_EXIT(first_use_race(), ::testing::ExitedWithCode(0), "errors 0, live thread caches after all exited 0");
}

TEST(ThreadCachedPoolChurn, SlotsPassFromExitedThreadsToNewOnesNeverToTwo) {
  checked_pool cp;
  strata::thread_cached_pool pool(object_words * sizeof(std::uint64_t));
  cp.pool = &pool;
  mailbox box;
  slot_claims claims;
  std::atomic<bool> churning{true};

  // Long-lived threads keep allocating and freeing (locally and remotely)
  // while short-lived ones come and go around them.
  constexpr int long_lived = 4;
  std::vector<std::thread> workers;
  for (int w = 0; w < long_lived; ++w)
    workers.emplace_back([&, w] {
      const std::uint64_t me = cp.next_holder.fetch_add(1);
      std::mt19937_64 rng(static_cast<std::uint64_t>(w));
      std::vector<held> mine;
      std::uint64_t seq = 0;
      mine.push_back(cp.take(me, seq++));
      claim_current_slot(claims, me);
      while (churning.load(std::memory_order_relaxed)) {
        unsigned r = static_cast<unsigned>(rng() % 10);
        held h;
        if (mine.size() < 16 || (r < 5 && mine.size() < 2000)) {
          for (int k = 0; k < 16; ++k) mine.push_back(cp.take(me, seq++));
        } else if (r < 9) {
          for (int k = 0; k < 16; ++k) {
            std::size_t i = rng() % mine.size();
            cp.give(mine[i]);
            mine[i] = mine.back();
            mine.pop_back();
          }
        } else {
          while (box.get(h)) cp.give(h);
        }
      }
      for (held h : mine) cp.give(h);
    });

  // Two spawners each run 300 short-lived threads one after another, so
  // threads exit and start (and slots change hands) all the time.
  constexpr int per_spawner = 300;
  std::vector<std::thread> spawners;
  for (int s = 0; s < 2; ++s)
    spawners.emplace_back([&, s] {
      for (int i = 0; i < per_spawner; ++i)
        std::thread(short_life, std::ref(cp), std::ref(box), std::ref(claims),
                     static_cast<std::uint64_t>(s * per_spawner + i), i % 3)
            .join();
    });
  for (auto& t : spawners) t.join();
  churning.store(false);
  for (auto& t : workers) t.join();
  held h;
  while (box.get(h)) cp.give(h);

  EXPECT_EQ(cp.errors.load(), 0u);
  EXPECT_EQ(claims.double_claims.load(), 0u) << "a thread slot was held by two live threads";
  EXPECT_EQ(cp.exit_slot_errors.load(), 0u) << "a thread kept (or lost) its slot at the wrong point of its exit";
  EXPECT_EQ(claims.threads_without_slot.load(), 0u) << "at most 7 threads live at once: each gets a slot";
}

// A thread whose first pool call comes from a pthread key destructor (after
// its thread_locals are gone) must still return its slot: more such threads
// than there are slots, one after another, and a thread after them still
// gets one.
TEST(ThreadCachedPoolChurn, FirstPoolCallFromAKeyDestructorStillReturnsTheSlot) {
  static strata::thread_cached_pool* pool = nullptr;
  strata::thread_cached_pool the_pool(64);
  pool = &the_pool;
  pthread_key_t key;
  ASSERT_EQ(pthread_key_create(&key, [](void*) {
              void* p = pool->allocate();
              std::memset(p, 0x5a, 64);
              pool->deallocate(p);
            }),
            0);
  constexpr int threads = static_cast<int>(strata::detail::max_thread_slots) + 44;
  for (int i = 0; i < threads; ++i)
    std::thread([key] { ASSERT_EQ(pthread_setspecific(key, reinterpret_cast<void*>(1)), 0); }).join();
  std::uint32_t slot = strata::detail::no_thread_slot;
  std::thread([&] { slot = strata::detail::current_thread_slot(); }).join();
  EXPECT_LT(slot, strata::detail::max_thread_slots) << "slots taken from key destructors were never returned";
  pthread_key_delete(key);
}

TEST(ThreadCachedPoolChurn, PoolsDieAndAreRebornWhileTheirThreadsLiveOn) {
  // The same threads use a pool, the pool is destroyed (its caches with it)
  // and a new one takes its place (often at the same address): no thread
  // may see a cache of the old pool.
  constexpr int threads = 4;
  constexpr int generations = 40;
  mailbox box;
  std::unique_ptr<checked_pool> cp;
  std::unique_ptr<strata::thread_cached_pool> pool;
  std::mutex turn_lock;
  std::condition_variable turn_changed;
  int generation = -1;  // -1: not started; `generations`: stop
  int done_in_generation = 0;

  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t));
      for (int seen = 0;; ++seen) {
        {
          std::unique_lock g(turn_lock);
          turn_changed.wait(g, [&] { return generation >= seen; });
          if (generation == generations) return;
        }
        const std::uint64_t me = cp->next_holder.fetch_add(1);
        std::vector<held> mine;
        for (int i = 0; i < 300; ++i) {
          if (mine.empty() || rng() % 3 != 0)
            mine.push_back(cp->take(me, static_cast<std::uint64_t>(i)));
          else {
            cp->give(mine.back());
            mine.pop_back();
          }
        }
        // Half are freed by another thread (every object is back before
        // the pool dies).
        for (std::size_t i = 0; i < mine.size(); ++i) {
          if (i % 2 == 0)
            box.put(mine[i]);
          else
            cp->give(mine[i]);
        }
        {
          std::lock_guard g(turn_lock);
          ++done_in_generation;
        }
        turn_changed.notify_all();
      }
    });

  for (int g = 0; g < generations; ++g) {
    pool = std::make_unique<strata::thread_cached_pool>(object_words * sizeof(std::uint64_t));
    cp = std::make_unique<checked_pool>(15);  // a few thousand addresses per generation
    cp->pool = pool.get();
    {
      std::lock_guard l(turn_lock);
      generation = g;
      done_in_generation = 0;
    }
    turn_changed.notify_all();
    {
      std::unique_lock l(turn_lock);
      turn_changed.wait(l, [&] { return done_in_generation == threads; });
    }
    // A short-lived thread frees the objects left in the mailbox: remote
    // frees into slots whose caches belong to the dying pool.
    std::thread([&] {
      held h;
      while (box.get(h)) cp->give(h);
    }).join();
    EXPECT_EQ(cp->errors.load(), 0u) << "generation " << g;
    pool.reset();  // frees every chunk: a stale cache would now point at freed memory
  }
  {
    std::lock_guard l(turn_lock);
    generation = generations;
  }
  turn_changed.notify_all();
  for (auto& t : ts) t.join();
}

TEST(ThreadCachedPoolChurn, ThreadsBeyondTheSlotLimitShareTheDepot) {
  // More threads alive at once than there are slots: the extra ones get no
  // slot and use the depot one object at a time, beside the cached ones.
  constexpr int threads = static_cast<int>(strata::detail::max_thread_slots) + 40;
  checked_pool cp;
  strata::thread_cached_pool pool(object_words * sizeof(std::uint64_t));
  cp.pool = &pool;
  slot_claims claims;
  mailbox box;
  std::atomic<int> started{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  ts.reserve(threads);
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      const std::uint64_t me = cp.next_holder.fetch_add(1);
      std::vector<held> mine;
      mine.push_back(cp.take(me, 0));
      claim_current_slot(claims, me);
      started.fetch_add(1);
      while (!go.load()) std::this_thread::yield();  // every thread holds its slot (or none) now
      for (std::uint64_t i = 1; i < 60; ++i) mine.push_back(cp.take(me, i));
      for (std::size_t i = 0; i < mine.size(); ++i) {
        if (i % 4 == 0)
          box.put(mine[i]);
        else
          cp.give(mine[i]);
      }
      held h;
      for (int i = 0; i < 15 && box.get(h); ++i) cp.give(h);
    });
  while (started.load() < threads) std::this_thread::yield();
  go.store(true);
  for (auto& t : ts) t.join();
  held h;
  while (box.get(h)) cp.give(h);

  EXPECT_EQ(cp.errors.load(), 0u);
  EXPECT_EQ(claims.double_claims.load(), 0u);
  // This (main) thread may hold a slot from an earlier test; all others are free.
  EXPECT_GE(claims.threads_without_slot.load(), static_cast<std::uint64_t>(threads) - strata::detail::max_thread_slots);
  EXPECT_LE(claims.threads_without_slot.load(), static_cast<std::uint64_t>(threads) - strata::detail::max_thread_slots + 1);
}
