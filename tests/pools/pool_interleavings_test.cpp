// The shared pools with their hand-over points stretched (built with
// STRATA_POOL_STEP_HOOK=1, see strata/pool_steps.hpp and pool_step_hook.hpp).
//
// 1. Perturbed churn, for every pool with per-thread caches: short-lived
//    threads come and go beside long-lived ones, objects cross threads and
//    outlive the thread that took them, threads free from thread_local
//    destructors and from pthread key destructors that run after their slot
//    went back; at every hand-over point threads yield or sleep at random
//    (STRATA_POOL_STEPS="seed=N,yield=P,sleep=Q,max_us=U" changes the odds
//    and the seed; STRATA_POOL_STRESS="long=..,spawners=..,generations=..,
//    per_generation=..,ops=.." the shape; scripts/soak.sh varies both).
//    Every object is written and verified, and a side table proves that no
//    object is held by two threads at once.
// 2. Forced interleavings of the thread slot hand-over: a thread parked
//    half-way through its exit while new threads start and use the pool.
#include "mailbox.hpp"
#include "ownership_table.hpp"
#include "pool_step_hook.hpp"

#include <strata/per_type_pool.hpp>
#include <strata/pmr_synchronized_pool_resource.hpp>
#include <strata/thread_cached_pool.hpp>
#include <strata/thread_slots.hpp>

#include <gtest/gtest.h>

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using pool_steps_test::hits;
using strata::detail::pool_step;

constexpr std::size_t object_size = 48;  // the forced interleavings' pool
constexpr std::size_t object_words = 6;  // written and verified in every object

// --- the pools under test, behind one interface ------------------------------
// Two object sizes: 48 bytes (magazines of 341, the CI crash's test) and
// 2 KiB (magazines of 8: a thread trades with the depot every few calls).

template <std::size_t Size>
struct thread_cached_pool_under_test {
  static constexpr bool uses_thread_slots = true;
  static constexpr bool has_magazine_exchange = true;  // steps cache_publish / cache_traded
  strata::thread_cached_pool pool{Size};
  void* allocate() { return pool.allocate(); }
  void deallocate(void* p) { pool.deallocate(p); }
};

template <class Slots, std::size_t Size>
struct per_type_pool_under_test {
  static constexpr bool uses_thread_slots = false;  // a thread_local cache instead
  static constexpr bool has_magazine_exchange = false;
  struct tag {};
  using pool = strata::detail::per_type_pool<tag, Size, 16, Slots>;
  void* allocate() { return pool::allocate(); }
  void deallocate(void* p) { pool::deallocate(p); }
};

template <std::size_t Size>
struct synchronized_pool_resource_under_test {
  static constexpr bool uses_thread_slots = true;
  static constexpr bool has_magazine_exchange = false;
  strata::pmr::synchronized_pool_resource resource;
  void* allocate() { return resource.allocate(Size, 16); }
  void deallocate(void* p) { resource.deallocate(p, Size, 16); }
};

// --- bookkeeping that checks a pool -------------------------------------------

using strata_test::ownership_table;

struct held {
  std::uint64_t* object;
  std::uint64_t stamp;  // holder << 32 | sequence number
};

// A pool with the side table and counters that check it. `allocate` and
// `deallocate` are the pool's; take/give write, verify and record.
template <class Pool>
struct checked {
  Pool& pool;
  ownership_table owners{18};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> next_holder{1};
  std::atomic<std::uint64_t> late_frees{0};            // frees after the thread's slot went back
  std::atomic<std::uint64_t> late_frees_with_slot{0};  // ... that still found a slot (must stay 0)

  explicit checked(Pool& p) : pool(p) {}

  held take(std::uint64_t holder, std::uint64_t seq) {
    auto* o = static_cast<std::uint64_t*>(pool.allocate());
    const std::uint64_t stamp = holder << 32 | seq;
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
    pool.deallocate(h.object);
  }
};

using mailbox = strata_test::mailbox<held>;

// --- perturbed churn ------------------------------------------------------------

struct stress_shape {
  int long_lived = 3;      // threads that live through the whole test
  int spawners = 2;        // threads that start short-lived ones, `per_generation` at a time
  int generations = 60;
  int per_generation = 4;  // so 3 + 2 * 4 = 11 threads at once: more than cores
  int ops = 500;           // operations of a short-lived thread
};

stress_shape shape_from_environment() {
  stress_shape s;
  const char* text = std::getenv("STRATA_POOL_STRESS");
  if (text == nullptr) return s;
  while (*text != '\0') {
    const char* eq = std::strchr(text, '=');
    if (eq == nullptr) break;
    const std::string_view name(text, static_cast<std::size_t>(eq - text));
    char* end = nullptr;
    const int value = static_cast<int>(std::strtol(eq + 1, &end, 10));
    if (name == "long") s.long_lived = value;
    else if (name == "spawners") s.spawners = value;
    else if (name == "generations") s.generations = value;
    else if (name == "per_generation") s.per_generation = value;
    else if (name == "ops") s.ops = value;
    else std::fprintf(stderr, "STRATA_POOL_STRESS: unknown field '%.*s'\n", int(name.size()), name.data());
    if (end == eq + 1) break;
    text = *end == ',' ? end + 1 : end;
  }
  return s;
}

// Objects a thread frees from a pthread key destructor in the second round
// of key destructors: by then the thread slot's key destructor (first round)
// has returned the slot, so these frees race the slot's next owner.
template <class Pool>
struct late_parcel {
  checked<Pool>* pool;
  std::vector<held> objects;
  bool armed_again = false;
};

template <class Pool>
pthread_key_t late_key() {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    const int rc = pthread_key_create(&k, [](void* value) {
      auto* parcel = static_cast<late_parcel<Pool>*>(value);
      if (!parcel->armed_again) {  // wait one round: the slot's key has run then
        parcel->armed_again = true;
        pthread_setspecific(late_key<Pool>(), parcel);
        return;
      }
      if (Pool::uses_thread_slots && strata::detail::current_thread_slot() != strata::detail::no_thread_slot)
        parcel->pool->late_frees_with_slot.fetch_add(1);
      for (held h : parcel->objects) parcel->pool->give(h);
      parcel->pool->late_frees.fetch_add(parcel->objects.size());
      delete parcel;
    });
    if (rc != 0) std::abort();
    return k;
  }();
  return key;
}

// Objects freed from a thread_local destructor (before the slot goes back).
template <class Pool>
struct exit_parcel {
  checked<Pool>* pool = nullptr;
  std::vector<held> objects;
  ~exit_parcel() {
    for (held h : objects) pool->give(h);
  }
};

template <class Pool>
void short_life(checked<Pool>& cp, mailbox& box, std::uint64_t seed, int ops) {
  const std::uint64_t me = cp.next_holder.fetch_add(1);
  std::mt19937_64 rng(seed);
  std::vector<held> mine;
  std::uint64_t seq = 0;
  constexpr int burst = 8;
  for (int op = 0; op < ops; op += burst) {
    const unsigned r = static_cast<unsigned>(rng() % 100);
    if (r < 45 || mine.size() < burst) {
      for (int k = 0; k < burst; ++k) mine.push_back(cp.take(me, seq++));
    } else if (r < 80) {
      for (int k = 0; k < burst; ++k) {
        const std::size_t i = rng() % mine.size();
        cp.give(mine[i]);
        mine[i] = mine.back();
        mine.pop_back();
      }
    } else if (r < 90) {
      for (int k = 0; k < burst; ++k) {
        box.put(mine.back());
        mine.pop_back();
      }
    } else {
      held h;
      for (int k = 0; k < burst && box.get(h); ++k) cp.give(h);
    }
  }
  // What is left: a quarter to the mailbox (freed by others after this
  // thread is gone), a quarter from a thread_local destructor, a quarter
  // from the late key destructor, the rest now.
  static thread_local exit_parcel<Pool> at_exit;
  at_exit.pool = &cp;
  auto* late = new late_parcel<Pool>{&cp, {}, false};
  for (std::size_t i = 0; i < mine.size(); ++i) {
    switch (i % 4) {
      case 0: box.put(mine[i]); break;
      case 1: at_exit.objects.push_back(mine[i]); break;
      case 2: late->objects.push_back(mine[i]); break;
      default: cp.give(mine[i]); break;
    }
  }
  if (pthread_setspecific(late_key<Pool>(), late) != 0) std::abort();
}

template <class Pool>
void long_life(checked<Pool>& cp, mailbox& box, std::uint64_t seed, const std::atomic<bool>& churning) {
  const std::uint64_t me = cp.next_holder.fetch_add(1);
  std::mt19937_64 rng(seed);
  std::vector<held> mine;
  std::uint64_t seq = 0;
  while (churning.load(std::memory_order_relaxed)) {
    const unsigned r = static_cast<unsigned>(rng() % 10);
    held h;
    if (mine.size() < 16 || (r < 5 && mine.size() < 3000)) {
      for (int k = 0; k < 16; ++k) mine.push_back(cp.take(me, seq++));
    } else if (r < 9) {
      for (int k = 0; k < 16; ++k) {
        const std::size_t i = rng() % mine.size();
        cp.give(mine[i]);
        mine[i] = mine.back();
        mine.pop_back();
      }
    } else {
      while (box.get(h)) cp.give(h);
    }
    // Leave the CPU to the short-lived threads (the test's point) rather
    // than spin through whole time slices on the fast path.
    std::this_thread::yield();
  }
  for (held h : mine) cp.give(h);
}

template <class T>
class PerturbedHandOvers : public ::testing::Test {};
using PoolsUnderTest = ::testing::Types<
    thread_cached_pool_under_test<48>, thread_cached_pool_under_test<2048>,
    per_type_pool_under_test<strata::detail::magazine_slots, 48>,
    per_type_pool_under_test<strata::detail::magazine_slots, 2048>,
    per_type_pool_under_test<strata::detail::free_list_slots, 2048>, synchronized_pool_resource_under_test<48>,
    synchronized_pool_resource_under_test<2048>>;
TYPED_TEST_SUITE(PerturbedHandOvers, PoolsUnderTest);

TYPED_TEST(PerturbedHandOvers, ChurningThreadsNeverShareAnObject) {
  using Pool = TypeParam;
  const auto perturbation = pool_steps_test::perturbation_from_environment(
      {/*seed=*/1, /*yield_per_mille=*/300, /*sleep_per_mille=*/20, /*max_sleep_us=*/200});
  const stress_shape shape = shape_from_environment();
  std::printf("perturbation seed=%llu yield=%u sleep=%u max_us=%u; shape long=%d spawners=%d generations=%d "
              "per_generation=%d ops=%d\n",
              static_cast<unsigned long long>(perturbation.seed), perturbation.yield_per_mille,
              perturbation.sleep_per_mille, perturbation.max_sleep_us, shape.long_lived, shape.spawners,
              shape.generations, shape.per_generation, shape.ops);
  pool_steps_test::set_perturbation(perturbation);
  pool_steps_test::reset_hits();

  auto pool = std::make_unique<Pool>();
  checked<Pool> cp(*pool);
  mailbox box;
  std::atomic<bool> churning{true};
  std::vector<std::thread> long_lived;
  for (int w = 0; w < shape.long_lived; ++w)
    long_lived.emplace_back(long_life<Pool>, std::ref(cp), std::ref(box), perturbation.seed * 1000 + w,
                            std::cref(churning));
  std::vector<std::thread> spawners;
  for (int s = 0; s < shape.spawners; ++s)
    spawners.emplace_back([&, s] {
      for (int g = 0; g < shape.generations; ++g) {
        std::vector<std::thread> generation;
        for (int t = 0; t < shape.per_generation; ++t) {
          const std::uint64_t seed = perturbation.seed * 1000003 + std::uint64_t(s) * 100003 + std::uint64_t(g) * 101 + t;
          generation.emplace_back(short_life<Pool>, std::ref(cp), std::ref(box), seed, shape.ops);
        }
        for (auto& t : generation) t.join();
      }
    });
  for (auto& t : spawners) t.join();
  churning.store(false);
  for (auto& t : long_lived) t.join();
  held h;
  while (box.get(h)) cp.give(h);
  pool_steps_test::set_perturbation({});

  EXPECT_EQ(cp.errors.load(), 0u) << "an object was held by two threads, or written while free";
  EXPECT_EQ(cp.late_frees_with_slot.load(), 0u) << "a thread still used its slot after returning it";
  EXPECT_GT(cp.late_frees.load(), 0u);
  // The hand-over points were really reached (else the delays stretched nothing).
  std::printf("step hits:");
  for (std::size_t s = 0; s < static_cast<std::size_t>(pool_step::count_); ++s)
    std::printf(" %s=%llu", pool_steps_test::step_name(pool_step(s)),
                static_cast<unsigned long long>(hits(pool_step(s))));
  std::printf("\n");
  EXPECT_GT(hits(pool_step::depot_take_locked), 0u);
  EXPECT_GT(hits(pool_step::depot_give_locked), 0u);
  if constexpr (Pool::uses_thread_slots) {
    EXPECT_GT(hits(pool_step::slot_claimed), 0u);
    EXPECT_GT(hits(pool_step::slot_returned), 0u);
  } else {
    EXPECT_GT(hits(pool_step::cache_flush), 0u);
  }
  if constexpr (Pool::has_magazine_exchange) {
    EXPECT_GT(hits(pool_step::cache_publish), 0u);
    EXPECT_GT(hits(pool_step::cache_traded), 0u);
  }
}

// --- forced interleavings of the thread slot hand-over --------------------------

// Who a thread is in the script (the observer acts on these threads only).
enum class role : int { none, exiting_owner, exiting_owner_late };
constinit thread_local role t_role = role::none;

// The script's shared state. Waits are bounded: a broken hand-over fails
// the test instead of hanging it.
struct handover_script {
  std::atomic<bool> owner_exiting{false};    // A reached slot_exiting (parked there)
  std::atomic<bool> newcomer_checked{false};  // C took a slot while A was parked
  std::atomic<bool> owner_returned{false};   // A passed slot_returned
  std::atomic<bool> successor_parked{false};  // B uses A's slot and is parked
  std::atomic<bool> owner_done{false};       // A's late frees are done
  std::atomic<bool> finish{false};
  std::atomic<int> late_depot_steps{0};      // depot steps taken by A after its slot went back
  std::atomic<bool> timed_out{false};
};
handover_script* g_script = nullptr;

void wait_for(const std::atomic<bool>& flag) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > deadline) {
      g_script->timed_out.store(true);
      return;
    }
    std::this_thread::yield();
  }
}

void handover_observer(pool_step step) {
  if (t_role == role::exiting_owner && step == pool_step::slot_exiting) {
    g_script->owner_exiting.store(true);
    wait_for(g_script->newcomer_checked);  // A still holds its slot: C must get another
  } else if (t_role == role::exiting_owner && step == pool_step::slot_returned) {
    g_script->owner_returned.store(true);
  } else if (t_role == role::exiting_owner_late &&
             (step == pool_step::depot_take_locked || step == pool_step::depot_give_locked)) {
    g_script->late_depot_steps.fetch_add(1);
  }
}

TEST(SlotHandOver, OwnerParkedHalfWayThroughItsExitWhileOthersStart) {
  // A thread (A) fills its cache and exits. It is parked after it stopped
  // using its slot but before the slot is free: a thread starting then (C)
  // must get another slot. Then A returns the slot and, before it finishes
  // exiting, a new thread (B) takes the slot, inherits A's cache (its first
  // object is the last one A freed) and parks; A, still exiting, frees and
  // allocates from a later key destructor: every one of those operations
  // must go to the depot (A has no slot any more), never into B's cache.
  (void)strata::detail::current_thread_slot();  // the slot key exists before the script's key
  strata::thread_cached_pool pool(object_size);
  checked<strata::thread_cached_pool> cp(pool);
  handover_script script;
  g_script = &script;
  const std::uint32_t capacity = strata::detail::batch_size_for(object_size);

  std::uint32_t a_slot = strata::detail::no_thread_slot;
  void* a_last_freed = nullptr;
  std::vector<held> a_kept;                     // freed by A after its slot went back
  std::uint32_t a_late_slot = 0;                // A's slot as seen from its late destructor
  std::atomic<std::uint64_t> late_errors{0};

  struct late_work {
    static void run(void* value) {
      auto* self = static_cast<late_work*>(value);
      if (!g_script->owner_returned.load()) {  // this key ran before the slot's: one more round
        pthread_setspecific(self->key, self);
        return;
      }
      wait_for(g_script->successor_parked);
      *self->late_slot = strata::detail::current_thread_slot();
      t_role = role::exiting_owner_late;
      for (held h : *self->kept) self->cp->give(h);
      std::vector<held> more;
      for (std::uint64_t i = 0; i < 10; ++i) more.push_back(self->cp->take(0xA1, i));
      for (held h : more) self->cp->give(h);
      t_role = role::none;
      g_script->owner_done.store(true);
    }
    pthread_key_t key;
    checked<strata::thread_cached_pool>* cp;
    std::vector<held>* kept;
    std::uint32_t* late_slot;
  };
  late_work work{{}, &cp, &a_kept, &a_late_slot};
  ASSERT_EQ(pthread_key_create(&work.key, late_work::run), 0);
  pool_steps_test::set_observer(handover_observer);

  std::thread a([&] {
    t_role = role::exiting_owner;
    a_slot = strata::detail::current_thread_slot();
    std::vector<held> mine;
    for (std::uint64_t i = 0; i < 2 * capacity + 10; ++i) mine.push_back(cp.take(0xA0, i));
    for (std::uint32_t i = 0; i < capacity / 2; ++i) {  // these stay in A's cache
      a_last_freed = mine.back().object;
      cp.give(mine.back());
      mine.pop_back();
    }
    a_kept = std::move(mine);
    pthread_setspecific(work.key, &work);
  });

  wait_for(script.owner_exiting);
  std::uint32_t c_slot = strata::detail::no_thread_slot;
  std::thread c([&] {
    c_slot = strata::detail::current_thread_slot();
    held h = cp.take(0xC0, 0);
    cp.give(h);
    script.newcomer_checked.store(true);
    wait_for(script.finish);  // keeps its slot: B must find A's
  });

  wait_for(script.owner_returned);
  std::uint32_t b_slot = strata::detail::no_thread_slot;
  void* b_first = nullptr;
  std::thread b([&] {
    b_slot = strata::detail::current_thread_slot();
    held first = cp.take(0xB0, 0);
    b_first = first.object;
    std::vector<held> mine{first};
    for (std::uint64_t i = 1; i < capacity / 4; ++i) mine.push_back(cp.take(0xB0, i));
    script.successor_parked.store(true);
    wait_for(script.owner_done);
    // Go on with the inherited cache, across several depot exchanges.
    std::mt19937_64 rng(7);
    for (std::uint64_t i = capacity / 4; i < 6 * capacity; ++i) {
      if (mine.empty() || rng() % 3 != 0) {
        mine.push_back(cp.take(0xB0, i));
      } else {
        cp.give(mine.back());
        mine.pop_back();
      }
    }
    for (held h : mine) cp.give(h);
  });
  a.join();
  b.join();
  script.finish.store(true);
  c.join();
  pool_steps_test::set_observer(nullptr);
  pthread_key_delete(work.key);
  g_script = nullptr;

  ASSERT_FALSE(script.timed_out.load()) << "the script stalled";
  ASSERT_LT(a_slot, strata::detail::max_thread_slots);
  EXPECT_NE(c_slot, a_slot) << "a slot was handed out while its owner still held it";
  EXPECT_EQ(b_slot, a_slot) << "the slot A returned was not the next one handed out";
  EXPECT_EQ(b_first, a_last_freed) << "B did not inherit A's cache";
  EXPECT_EQ(a_late_slot, strata::detail::no_thread_slot) << "A used its slot after returning it";
  EXPECT_GE(static_cast<std::size_t>(script.late_depot_steps.load()), a_kept.size() + 20)
      << "A's late frees and allocations did not all go to the depot one by one";
  EXPECT_EQ(cp.errors.load() + late_errors.load(), 0u);
}

}  // namespace
