// strata/thread_slots.hpp — small integer ids for live threads.
//
// A pool object (thread_cached_pool, synchronized_pool_resource) keeps one
// cache per thread in an array indexed by the thread's slot, so it needs no
// thread_local of its own and no registration with threads (a thread never
// holds a pointer into a pool, and a pool may die before or after any
// thread). A thread takes a slot on first use and returns it at exit; the
// next thread that takes the slot inherits whatever the old one left in the
// pools' caches, so nothing cached by an exited thread is lost.
// At most max_thread_slots threads hold a slot at once; the others (and
// threads that are exiting) get no_thread_slot and use the pools' shared
// tier directly.
// The slot goes back from a pthread key destructor, not a thread_local
// one: glibc runs thread_local destructors first and key destructors after
// (repeating rounds while destructors set keys), so a thread keeps its slot
// through all its thread_local destructors, and a thread whose first pool
// call comes from another key's destructor still returns its slot (a
// thread_local destructor registered that late would never run, and 256
// such threads would leave every later thread without a slot). If no key
// can be created (all PTHREAD_KEYS_MAX taken) a thread_local destructor
// returns the slot instead.
#ifndef STRATA_THREAD_SLOTS_HPP
#define STRATA_THREAD_SLOTS_HPP

#include <strata/pool_steps.hpp>
#include <strata/spinlock.hpp>

#include <cstdint>
#include <mutex>
#include <pthread.h>

namespace strata::detail {

inline constexpr std::uint32_t max_thread_slots = 256;
inline constexpr std::uint32_t no_thread_slot = ~std::uint32_t{0};

class thread_slot_registry {
 public:
  std::uint32_t acquire() noexcept {
    std::lock_guard guard(lock_);
    std::uint32_t slot = no_thread_slot;
    if (free_count_ > 0)
      slot = free_[--free_count_];
    else if (next_unused_ < max_thread_slots)
      slot = next_unused_++;
    STRATA_POOL_STEP(slot_claim_locked);
    return slot;
  }
  void release(std::uint32_t slot) noexcept {
    std::lock_guard guard(lock_);
    STRATA_POOL_STEP(slot_return_locked);
    free_[free_count_++] = slot;
  }

 private:
  spinlock lock_;
  std::uint32_t next_unused_ = 0;
  std::uint32_t free_count_ = 0;
  std::uint32_t free_[max_thread_slots] = {};
};

inline constinit thread_slot_registry thread_slots{};

// 0 = not asked yet; otherwise slot + 1, or no_thread_slot.
inline constinit thread_local std::uint32_t thread_slot_plus_one = 0;

// The order is the hand-over (docs/design.md, "thread slots"): the thread
// stops using the slot before the slot is free for another thread, so the
// destructors that run after this one (other keys) use the shared tiers.
inline void release_thread_slot(std::uint32_t slot) noexcept {
  thread_slot_plus_one = no_thread_slot;  // exiting: no cache from now on
  STRATA_POOL_STEP(slot_exiting);
  if (slot != no_thread_slot) thread_slots.release(slot);
  STRATA_POOL_STEP(slot_returned);
}

// The key whose destructor returns a thread's slot (value: slot + 1).
struct thread_slot_key {
  pthread_key_t key;
  bool created;
  thread_slot_key() noexcept
      : created(pthread_key_create(&key, [](void* value) noexcept {
                  release_thread_slot(static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(value) - 1));
                }) == 0) {}
};

// Fallback when no key could be created.
struct thread_slot_owner {
  std::uint32_t slot;
  ~thread_slot_owner() { release_thread_slot(slot); }
};

[[gnu::noinline]] inline std::uint32_t assign_thread_slot() noexcept {
  if (thread_slot_plus_one != 0) return thread_slot_plus_one == no_thread_slot ? no_thread_slot : thread_slot_plus_one - 1;
  std::uint32_t slot = thread_slots.acquire();
  STRATA_POOL_STEP(slot_claimed);
  thread_slot_plus_one = slot == no_thread_slot ? no_thread_slot : slot + 1;
  if (slot == no_thread_slot) return slot;
  static const thread_slot_key release_key;
  if (!release_key.created ||
      pthread_setspecific(release_key.key, reinterpret_cast<void*>(std::uintptr_t{slot} + 1)) != 0) {
    static thread_local thread_slot_owner owner{slot};
  }
  return slot;
}

// The calling thread's slot, or no_thread_slot.
inline std::uint32_t current_thread_slot() noexcept {
  std::uint32_t v = thread_slot_plus_one;
  if (v - 1 < max_thread_slots) [[likely]] return v - 1;
  return assign_thread_slot();
}

}  // namespace strata::detail

#endif
