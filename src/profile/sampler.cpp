#include "profile/sampler.h"

#include <atomic>
#include <sys/syscall.h>
#include <unistd.h>

#include "platform/options.h"
#include "platform/os.h"
#include "profile/fast_math.h"

namespace strata::detail {

constinit thread_local std::int64_t t_bytes_until_sample __attribute__((tls_model("initial-exec"))) = 0;

namespace {

struct SamplerThread {
  SamplerState state;
  bool inside_profiler = false;
  int thread_id = 0;
  std::uint32_t fork_generation = 0;  // the last g_fork_generation this thread saw
};
constinit thread_local SamplerThread t_sampler __attribute__((tls_model("initial-exec")));

// While sampling is off, threads still look again every so many bytes, so
// that turning it on at run time (strata_option_set) reaches every thread.
constexpr std::int64_t kRecheckWhileOffBytes = std::int64_t{1} << 30;

// Seeds differ per thread: a process-wide random base, a counter, and the
// thread's own TLS address.
std::atomic<std::uint64_t> g_seed_base{0};
std::atomic<std::uint64_t> g_seed_counter{0};
std::atomic<std::uint64_t> g_interval_of_samples{0};

int kernel_thread_id() noexcept { return static_cast<int>(syscall(SYS_gettid)); }

std::uint64_t mix(std::uint64_t z) noexcept {  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void seed(SamplerState& state) noexcept {
  std::uint64_t base = g_seed_base.load(std::memory_order_relaxed);
  if (base == 0) {
    std::uint64_t fresh = os_random_u64() | 1;
    g_seed_base.compare_exchange_strong(base, fresh, std::memory_order_relaxed);
    base = g_seed_base.load(std::memory_order_relaxed);
  }
  std::uint64_t n = g_seed_counter.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t s = mix(base + n * 0x9e3779b97f4a7c15ull + reinterpret_cast<std::uintptr_t>(&state));
  state.random = s != 0 ? s : 0x2545f4914f6cdd1dull;
}

}  // namespace

std::int64_t next_interval(SamplerState& state, std::uint64_t mean_bytes) noexcept {
  if (state.random == 0) seed(state);
  // xorshift64*: 53 good bits give a uniform U in (0, 1].
  std::uint64_t x = state.random;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  state.random = x;
  std::uint64_t bits = (x * 0x2545f4914f6cdd1dull) >> 11;
  double u = static_cast<double>(bits + 1) * (1.0 / 9007199254740992.0);
  double interval = -fast_ln(u) * static_cast<double>(mean_bytes);
  // The largest draw (U = 2^-53) is 36.7 means: always fits.
  return static_cast<std::int64_t>(interval);
}

std::uint64_t sampling_interval() noexcept {
  return __atomic_load_n(&g_options.profile_sample, __ATOMIC_RELAXED);
}

std::uint64_t sampling_interval_of_samples() noexcept {
  std::uint64_t used = g_interval_of_samples.load(std::memory_order_relaxed);
  return used != 0 ? used : sampling_interval();
}

namespace {

// The child of a fork from a single-threaded process ran no fork handler
// (they are registered with the second thread: frontend/thread_cache.cpp),
// so its thread still holds the parent's sampler; children of one parent
// that replayed its draws would all sample the same allocations. The child
// is told without a system call per sampling point (a gettid there was
// half of a sample's time, docs/design.md): a word on a page of its own that
// the kernel zeroes in every fork child (MADV_WIPEONFORK; the setting is
// inherited, so grandchildren are told too). The first sampling point sets
// it to 1; a point that finds it 0 again is in a child that nobody has
// noticed yet, and moves the generation on, so that every thread still
// holding the parent's draws sees a change, whichever thread found the zero.
// Threads born in the child draw afresh anyway. Where the kernel refuses the
// page (before 4.14), a changed gettid tells, as before.
constexpr std::size_t kMarkerPageBytes = 4096;
std::atomic<std::atomic<int>*> g_fork_marker{nullptr};
std::atomic<bool> g_fork_marker_refused{false};
std::atomic<std::uint32_t> g_fork_generation{0};

// The marker, set up by the first caller (two threads may race: one page
// is kept, the other given back); nullptr when the kernel refuses.
std::atomic<int>* fork_marker() noexcept {
  std::atomic<int>* marker = g_fork_marker.load(std::memory_order_acquire);
  if (marker != nullptr || g_fork_marker_refused.load(std::memory_order_relaxed)) return marker;
  void* page = os_map(kMarkerPageBytes, kMarkerPageBytes);
  if (page == nullptr || !os_advise_wipe_on_fork(page, kMarkerPageBytes)) {
    if (page != nullptr) os_unmap(page, kMarkerPageBytes);
    g_fork_marker_refused.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  auto* mine = static_cast<std::atomic<int>*>(page);
  mine->store(1, std::memory_order_relaxed);
  if (g_fork_marker.compare_exchange_strong(marker, mine, std::memory_order_acq_rel)) return mine;
  os_unmap(page, kMarkerPageBytes);
  return marker;  // the winner's
}

// True once in every thread that still holds the draws of a fork's parent
// (its cached thread id is then the parent's too, and is dropped).
bool holds_parents_draws(SamplerThread& self) noexcept {
  std::atomic<int>* marker = fork_marker();
  if (marker == nullptr) {
    const int id = kernel_thread_id();
    if (id == self.thread_id) return false;
    bool parents = self.thread_id != 0;
    self.thread_id = id;
    return parents;
  }
  if (marker->load(std::memory_order_relaxed) == 0) {
    g_fork_generation.fetch_add(1, std::memory_order_relaxed);
    marker->store(1, std::memory_order_relaxed);
  }
  std::uint32_t generation = g_fork_generation.load(std::memory_order_relaxed);
  if (generation == self.fork_generation) return false;
  self.fork_generation = generation;
  self.thread_id = 0;  // current_thread_id asks again
  return true;
}

void leave_parents_draws(SamplerThread& self) noexcept {
  if (holds_parents_draws(self)) self.state.random = 0;
}

}  // namespace

bool sampling_point_reached(std::size_t size) noexcept {
  SamplerThread& self = t_sampler;
  if (self.inside_profiler) return false;  // stays below zero: the next allocation tries again
  std::uint64_t mean = sampling_interval();
  if (mean == 0 || g_options.check) {
    t_bytes_until_sample = kRecheckWhileOffBytes;
    return false;
  }
  leave_parents_draws(self);
  if (self.state.random == 0) {
    // A new thread: its first point lies one fresh interval after its start.
    t_bytes_until_sample = next_interval(self.state, mean) - static_cast<std::int64_t>(size);
    if (t_bytes_until_sample >= 0) return false;
  }
  t_bytes_until_sample = next_interval(self.state, mean);
  if (g_interval_of_samples.load(std::memory_order_relaxed) != mean)
    g_interval_of_samples.store(mean, std::memory_order_relaxed);
  return true;
}

ProfilerReentryGuard::ProfilerReentryGuard() noexcept : nested_(t_sampler.inside_profiler) {
  t_sampler.inside_profiler = true;
}

ProfilerReentryGuard::~ProfilerReentryGuard() {
  if (!nested_) t_sampler.inside_profiler = false;
}

int current_thread_id() noexcept {
  int id = t_sampler.thread_id;
  if (id == 0) {
    id = kernel_thread_id();
    t_sampler.thread_id = id;
  }
  return id;
}

void sampler_after_fork_child() noexcept {
  t_sampler.thread_id = 0;
  t_sampler.state.random = 0;  // the child must not replay the parent's draws
  t_sampler.inside_profiler = false;
}

}  // namespace strata::detail
