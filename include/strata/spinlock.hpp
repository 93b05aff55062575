// strata/spinlock.hpp — a test-and-test-and-set spinlock.
//
// Waiters spin on a plain load (the cache line stays shared until the owner
// writes it), execute `pause` between reads (frees the core's resources for
// the sibling hyper-thread and avoids the memory-order flush when the lock
// is released), back off exponentially, and after a bounded number of
// rounds yield the CPU: with more runnable threads than cores (seed 003's
// single-core table) the owner may be descheduled, and spinning further
// only burns its time slice.
#ifndef STRATA_SPINLOCK_HPP
#define STRATA_SPINLOCK_HPP

#include <atomic>
#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace strata {

namespace detail {
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}
}  // namespace detail

class spinlock {
 public:
  constexpr spinlock() noexcept = default;
  spinlock(const spinlock&) = delete;
  spinlock& operator=(const spinlock&) = delete;

  void lock() noexcept {
    // Uncontended: one exchange, no loop.
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    lock_slow();
  }

  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }

  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  [[gnu::noinline]] void lock_slow() noexcept {
    unsigned pauses = 1;
    for (;;) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (pauses <= max_pauses) {
          for (unsigned i = 0; i < pauses; ++i) detail::cpu_relax();
          pauses *= 2;
        } else {
          sched_yield();
        }
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  static constexpr unsigned max_pauses = 64;
  std::atomic<bool> locked_{false};
};

}  // namespace strata

#endif
