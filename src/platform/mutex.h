// A small futex mutex (three states, after Drepper's "Futexes Are Tricky").
// Why not pthread_mutex_t: it is zero-initialised (usable before any
// constructor runs, inside the first malloc of the process) and can be
// reset in a fork child without the ceremony of pthread_mutex_init.
#pragma once

#include <atomic>

#include "platform/os.h"

namespace strata::detail {

class Mutex {
 public:
  constexpr Mutex() noexcept = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() noexcept {
    int expected = kUnlocked;
    if (state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                       std::memory_order_relaxed))
      return;
    lock_slow();
  }

  bool try_lock() noexcept {
    int expected = kUnlocked;
    return state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }

  void unlock() noexcept {
    if (state_.exchange(kUnlocked, std::memory_order_release) == kContended)
      os_futex_wake(futex_word(), 1);
  }

  // Only for a fork child, where the holder no longer exists.
  void reset_after_fork() noexcept { state_.store(kUnlocked, std::memory_order_relaxed); }

  // Number of times a lock() found the mutex taken (for contention stats).
  unsigned long contended_count() const noexcept {
    return contended_.load(std::memory_order_relaxed);
  }

 private:
  static constexpr int kUnlocked = 0, kLocked = 1, kContended = 2;

  volatile int* futex_word() noexcept { return reinterpret_cast<volatile int*>(&state_); }

  void lock_slow() noexcept {
    contended_.fetch_add(1, std::memory_order_relaxed);
    // Spin briefly: most critical sections here are a few dozen instructions.
    for (int spin = 0; spin < 64; ++spin) {
      __builtin_ia32_pause();
      if (state_.load(std::memory_order_relaxed) == kUnlocked && try_lock()) return;
    }
    int previous = state_.exchange(kContended, std::memory_order_acquire);
    while (previous != kUnlocked) {
      os_futex_wait(futex_word(), kContended);
      previous = state_.exchange(kContended, std::memory_order_acquire);
    }
  }

  std::atomic<int> state_{kUnlocked};
  std::atomic<unsigned long> contended_{0};
};

class LockGuard {
 public:
  explicit LockGuard(Mutex& mutex) noexcept : mutex_(mutex) { mutex_.lock(); }
  ~LockGuard() { mutex_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Mutex& mutex_;
};

}  // namespace strata::detail
