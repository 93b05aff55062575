#include "profile/sample_store.h"

#include "profile/fast_math.h"
#include "profile/sampler.h"

#include "backend/metadata_pool.h"
#include "core/constants.h"
#include "platform/os.h"

namespace strata::detail {

constinit SampleStore g_sample_store;

namespace {

constinit MetadataPool<Sample> g_sample_pool;
constinit MetadataPool<StackTrace> g_stack_pool;
constinit MetadataPool<SiteCounters> g_site_pool;

std::uint64_t hash_frames(void* const* frames, std::uint32_t depth) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull ^ depth;
  for (std::uint32_t i = 0; i < depth; ++i) {
    h ^= reinterpret_cast<std::uintptr_t>(frames[i]);
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h * 0x9e3779b97f4a7c15ull;
}

std::uint32_t size_range_of(std::size_t size) noexcept {
  return size == 0 ? 0 : 63 - static_cast<std::uint32_t>(__builtin_clzll(size));
}

// Samples counted here when the tables are full: their stack is this one
// function, so a profile names the reason.
__attribute__((noinline)) void strata_profile_tables_full() noexcept { asm volatile(""); }

}  // namespace

StackTrace* SampleStore::intern_locked(void* const* frames, std::uint32_t depth) noexcept {
  std::uint64_t hash = hash_frames(frames, depth);
  StackTrace* found = stacks_.find(hash, [&](const StackTrace& stack) {
    if (stack.depth != depth) return false;
    for (std::uint32_t f = 0; f < depth; ++f)
      if (stack.frames[f] != frames[f]) return false;
    return true;
  });
  if (found != nullptr || !stacks_.reserve_one()) return found;
  StackTrace* stack = g_stack_pool.create();
  if (stack == nullptr) return nullptr;
  stack->hash = hash;
  stack->depth = depth;
  for (std::uint32_t f = 0; f < depth; ++f) stack->frames[f] = frames[f];
  stacks_.insert(stack);
  return stack;
}

SiteCounters* SampleStore::site_locked(const StackTrace* stack, std::uint32_t size_range) noexcept {
  std::uint64_t hash = (stack->hash ^ (size_range * 0xff51afd7ed558ccdull)) * 0xc4ceb9fe1a85ec53ull;
  SiteCounters* found = sites_.find(hash, [&](const SiteCounters& site) {
    return site.stack == stack && site.size_range == size_range;
  });
  if (found != nullptr || !sites_.reserve_one()) return found;
  SiteCounters* site = g_site_pool.create();
  if (site == nullptr) return nullptr;
  site->hash = hash;
  site->stack = stack;
  site->size_range = size_range;
  sites_.insert(site);
  return site;
}

double sample_weight(std::size_t counted_bytes) noexcept {
  return unsampling_factor(static_cast<double>(counted_bytes), static_cast<double>(sampling_interval()));
}

Sample* SampleStore::record(void* const* frames, std::uint32_t depth, void* block,
                            std::size_t requested_size, std::size_t alignment,
                            std::size_t usable_size, double weight, int thread_id) noexcept {
  Sample* sample = g_sample_pool.create();  // its own lock, never taken inside ours
  if (sample == nullptr) return nullptr;
  sample->block = block;
  sample->requested_size = requested_size;
  sample->alignment = alignment;
  sample->usable_size = usable_size;
  sample->weight = weight;
  sample->thread_id = thread_id;

  LockGuard guard(mutex_);
  SiteCounters* site = nullptr;
  if (const StackTrace* stack = intern_locked(frames, depth))
    site = site_locked(stack, size_range_of(requested_size));
  if (site == nullptr) {
    ++dropped_;
    overflow_site_.stack = &overflow_stack_;  // set up on first use
    overflow_stack_.depth = 1;
    overflow_stack_.frames[0] = reinterpret_cast<void*>(
        reinterpret_cast<std::uintptr_t>(&strata_profile_tables_full) + 1);
    site = &overflow_site_;
  }
  sample->site = site;
  ++site->live_count;
  site->live_bytes += requested_size;
  ++site->total_count;
  site->total_bytes += requested_size;
  site->live_objects += weight;
  site->live_estimate += weight * static_cast<double>(requested_size);
  site->total_objects += weight;
  site->total_estimate += weight * static_cast<double>(requested_size);

  sample->prev = nullptr;
  sample->next = live_;
  if (live_ != nullptr) live_->prev = sample;
  live_ = sample;
  ++live_count_;
  live_bytes_ += requested_size;
  ++total_samples_;
  return sample;
}

void SampleStore::forget(Sample* sample) noexcept {
  {
    LockGuard guard(mutex_);
    SiteCounters* site = sample->site;
    --site->live_count;
    site->live_bytes -= sample->requested_size;
    site->live_objects -= sample->weight;
    site->live_estimate -= sample->weight * static_cast<double>(sample->requested_size);
    if (site->live_count == 0) site->live_objects = site->live_estimate = 0;  // no rounding drift
    if (sample->prev != nullptr) sample->prev->next = sample->next;
    else live_ = sample->next;
    if (sample->next != nullptr) sample->next->prev = sample->prev;
    --live_count_;
    live_bytes_ -= sample->requested_size;
  }
  g_sample_pool.destroy(sample);
}

SampleStoreStats SampleStore::stats() noexcept {
  LockGuard guard(mutex_);
  SampleStoreStats s;
  s.live_samples = live_count_;
  s.live_requested_bytes = live_bytes_;
  s.total_samples = total_samples_;
  s.stacks = stacks_.size();
  s.sites = sites_.size();
  s.dropped_stacks = dropped_;
  s.metadata_bytes = g_sample_pool.raw().mapped_bytes() + g_stack_pool.raw().mapped_bytes() +
                     g_site_pool.raw().mapped_bytes() + stacks_.table_bytes() + sites_.table_bytes();
  return s;
}

// Order: the store's lock, then the pools' (record and forget take the
// sample pool's lock only outside the store's lock; intern and site take
// the stack and site pools' inside).
void SampleStore::lock_for_fork() noexcept {
  mutex_.lock();
  g_stack_pool.raw().mutex().lock();
  g_site_pool.raw().mutex().lock();
  g_sample_pool.raw().mutex().lock();
}

void SampleStore::unlock_after_fork_parent() noexcept {
  g_sample_pool.raw().mutex().unlock();
  g_site_pool.raw().mutex().unlock();
  g_stack_pool.raw().mutex().unlock();
  mutex_.unlock();
}

void SampleStore::reset_after_fork_child() noexcept {
  g_sample_pool.raw().mutex().reset_after_fork();
  g_site_pool.raw().mutex().reset_after_fork();
  g_stack_pool.raw().mutex().reset_after_fork();
  mutex_.reset_after_fork();
}

}  // namespace strata::detail
