#include "backend/background_thread.h"

#include <atomic>
#include <ctime>
#include <pthread.h>

#include "backend/page_heap.h"
#include "platform/options.h"

namespace strata::detail {

namespace {

std::atomic<bool> g_background_running{false};

void* background_main(void*) {
  while (g_options.background_thread) {
    std::uint64_t decay_ns = g_options.decay_ms * 1000000ull;
    std::uint64_t nap = decay_ns / 4;
    if (nap < 1000000ull) nap = 1000000ull;  // at least 1 ms
    timespec ts{static_cast<time_t>(nap / 1000000000ull), static_cast<long>(nap % 1000000000ull)};
    nanosleep(&ts, nullptr);
    g_page_heap.decommit_free(monotonic_ns(), decay_ns);
  }
  g_background_running.store(false);
  return nullptr;
}

}  // namespace

void start_background_thread_if_wanted() noexcept {
  if (!g_options.background_thread) return;
  bool expected = false;
  if (!g_background_running.compare_exchange_strong(expected, true)) return;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  if (pthread_create(&thread, &attr, background_main, nullptr) != 0) g_background_running.store(false);
  pthread_attr_destroy(&attr);
}

void background_thread_after_fork_child() noexcept { g_background_running.store(false); }

}  // namespace strata::detail
