// strata::detail::pool_step_hook for the test programs built with
// STRATA_POOL_STEP_HOOK=1: counts, observes and perturbs (pool_step_hook.hpp).
#include "pool_step_hook.hpp"

#include <sched.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace pool_steps_test {
namespace {

constexpr std::size_t step_count = static_cast<std::size_t>(pool_step::count_);
static_assert(step_count == 12, "name every step in step_name");

std::atomic<std::uint64_t> g_seed{1};
std::atomic<unsigned> g_yield{0};
std::atomic<unsigned> g_sleep{0};
std::atomic<unsigned> g_max_sleep_us{0};
std::atomic<observer> g_observer{nullptr};
std::atomic<std::uint64_t> g_threads_seen{0};
std::atomic<std::uint64_t> g_hits[step_count];

// Trivially destructible: the hook runs in thread exit paths, after the
// thread's other thread_locals are gone.
constinit thread_local std::uint64_t t_random = 0;

std::uint64_t next_random() noexcept {
  if (t_random == 0) {
    // splitmix64 of (seed, order of arrival): a different sequence per thread.
    std::uint64_t z = g_seed.load(std::memory_order_relaxed) * 0x9E3779B97F4A7C15ull +
                      (g_threads_seen.fetch_add(1, std::memory_order_relaxed) + 1) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    t_random = (z ^ (z >> 31)) | 1;
  }
  std::uint64_t x = t_random;  // xorshift64
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  t_random = x;
  return x;
}

}  // namespace

perturbation perturbation_from_environment(perturbation fallback) {
  const char* text = std::getenv("STRATA_POOL_STEPS");
  if (text == nullptr) return fallback;
  perturbation p = fallback;
  while (*text != '\0') {
    const char* eq = std::strchr(text, '=');
    if (eq == nullptr) break;
    const std::string_view name(text, static_cast<std::size_t>(eq - text));
    char* end = nullptr;
    const unsigned long long value = std::strtoull(eq + 1, &end, 10);
    if (name == "seed") p.seed = value;
    else if (name == "yield") p.yield_per_mille = static_cast<unsigned>(value);
    else if (name == "sleep") p.sleep_per_mille = static_cast<unsigned>(value);
    else if (name == "max_us") p.max_sleep_us = static_cast<unsigned>(value);
    else std::fprintf(stderr, "STRATA_POOL_STEPS: unknown field '%.*s'\n", int(name.size()), name.data());
    text = *end == ',' ? end + 1 : end;
    if (end == eq + 1) break;  // not a number
  }
  return p;
}

void set_perturbation(const perturbation& p) {
  g_seed.store(p.seed == 0 ? 1 : p.seed, std::memory_order_relaxed);
  g_yield.store(p.yield_per_mille, std::memory_order_relaxed);
  g_sleep.store(p.sleep_per_mille, std::memory_order_relaxed);
  g_max_sleep_us.store(p.max_sleep_us, std::memory_order_relaxed);
}

void set_observer(observer o) { g_observer.store(o, std::memory_order_release); }

std::uint64_t hits(pool_step step) { return g_hits[static_cast<std::size_t>(step)].load(std::memory_order_relaxed); }

void reset_hits() {
  for (auto& h : g_hits) h.store(0, std::memory_order_relaxed);
}

const char* step_name(pool_step step) {
  static constexpr const char* names[step_count] = {
      "slot_claim_locked", "slot_claimed", "slot_exiting",      "slot_return_locked", "slot_returned",
      "cache_publish",     "cache_refill", "cache_spill",       "cache_traded",       "depot_take_locked",
      "depot_give_locked", "cache_flush"};
  const auto i = static_cast<std::size_t>(step);
  return i < step_count ? names[i] : "?";
}

}  // namespace pool_steps_test

namespace strata::detail {

void pool_step_hook(pool_step step) noexcept {
  using namespace pool_steps_test;
  g_hits[static_cast<std::size_t>(step)].fetch_add(1, std::memory_order_relaxed);
  if (observer o = g_observer.load(std::memory_order_acquire)) o(step);
  const unsigned yield = g_yield.load(std::memory_order_relaxed);
  const unsigned sleep = g_sleep.load(std::memory_order_relaxed);
  if (yield == 0 && sleep == 0) return;
  const std::uint64_t r = next_random();
  if (r % 1000 < yield) sched_yield();
  if ((r >> 10) % 1000 < sleep) {
    const unsigned max_us = g_max_sleep_us.load(std::memory_order_relaxed);
    timespec t{0, static_cast<long>(1 + (r >> 20) % (max_us == 0 ? 1 : max_us)) * 1000};
    nanosleep(&t, nullptr);
  }
}

}  // namespace strata::detail
