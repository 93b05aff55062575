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
// Known limit: the slot goes back from a thread_local destructor, so a
// thread whose first pool call comes after its thread_locals are gone (from
// a pthread key destructor) never returns its slot; 256 such threads leave
// every later thread without one (the shared tier: correct, but slower).
#ifndef STRATA_THREAD_SLOTS_HPP
#define STRATA_THREAD_SLOTS_HPP

#include <strata/spinlock.hpp>

#include <cstdint>
#include <mutex>

namespace strata::detail {

inline constexpr std::uint32_t max_thread_slots = 256;
inline constexpr std::uint32_t no_thread_slot = ~std::uint32_t{0};

class thread_slot_registry {
 public:
  std::uint32_t acquire() noexcept {
    std::lock_guard guard(lock_);
    if (free_count_ > 0) return free_[--free_count_];
    if (next_unused_ < max_thread_slots) return next_unused_++;
    return no_thread_slot;
  }
  void release(std::uint32_t slot) noexcept {
    std::lock_guard guard(lock_);
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

struct thread_slot_owner {
  std::uint32_t slot;
  ~thread_slot_owner() {
    thread_slot_plus_one = no_thread_slot;  // exiting: no cache from now on
    if (slot != no_thread_slot) thread_slots.release(slot);
  }
};

[[gnu::noinline]] inline std::uint32_t assign_thread_slot() noexcept {
  if (thread_slot_plus_one != 0) return thread_slot_plus_one == no_thread_slot ? no_thread_slot : thread_slot_plus_one - 1;
  std::uint32_t slot = thread_slots.acquire();
  static thread_local thread_slot_owner owner{slot};
  thread_slot_plus_one = slot == no_thread_slot ? no_thread_slot : slot + 1;
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
