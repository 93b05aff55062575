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

bool SampleStore::ensure_tables_locked() noexcept {
  if (sites_ != nullptr) return true;
  if (stack_slots_ == nullptr) {
    stack_slots_ = static_cast<StackTrace**>(os_map(kStackSlots * sizeof(StackTrace*), kPageSize));
    if (stack_slots_ == nullptr) return false;
  }
  sites_ = static_cast<SiteCounters*>(os_map(kSiteSlots * sizeof(SiteCounters), kPageSize));
  if (sites_ == nullptr) return false;
  overflow_stack_.depth = 1;
  overflow_stack_.frames[0] = reinterpret_cast<void*>(
      reinterpret_cast<std::uintptr_t>(&strata_profile_tables_full) + 1);
  overflow_site_.stack = &overflow_stack_;
  return true;
}

StackTrace* SampleStore::intern_locked(void* const* frames, std::uint32_t depth) noexcept {
  std::uint64_t hash = hash_frames(frames, depth);
  std::size_t mask = kStackSlots - 1;
  for (std::size_t i = hash & mask, probes = 0; probes < kStackSlots; i = (i + 1) & mask, ++probes) {
    StackTrace* slot = stack_slots_[i];
    if (slot == nullptr) {
      if (stack_count_ >= kStackSlots / 4 * 3) return nullptr;  // keep probes short
      StackTrace* stack = g_stack_pool.create();
      if (stack == nullptr) return nullptr;
      stack->hash = hash;
      stack->depth = depth;
      for (std::uint32_t f = 0; f < depth; ++f) stack->frames[f] = frames[f];
      stack_slots_[i] = stack;
      ++stack_count_;
      return stack;
    }
    if (slot->hash == hash && slot->depth == depth) {
      bool same = true;
      for (std::uint32_t f = 0; f < depth && same; ++f) same = slot->frames[f] == frames[f];
      if (same) return slot;
    }
  }
  return nullptr;
}

SiteCounters* SampleStore::site_locked(const StackTrace* stack, std::uint32_t size_range) noexcept {
  std::uint64_t hash = (stack->hash ^ (size_range * 0xff51afd7ed558ccdull)) * 0xc4ceb9fe1a85ec53ull;
  std::size_t mask = kSiteSlots - 1;
  for (std::size_t i = (hash >> 17) & mask, probes = 0; probes < kSiteSlots; i = (i + 1) & mask, ++probes) {
    SiteCounters& site = sites_[i];
    if (site.stack == nullptr) {
      if (site_count_ >= kSiteSlots / 4 * 3) return nullptr;
      site.stack = stack;
      site.size_range = size_range;
      ++site_count_;
      return &site;
    }
    if (site.stack == stack && site.size_range == size_range) return &site;
  }
  return nullptr;
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
  if (ensure_tables_locked()) {
    if (const StackTrace* stack = intern_locked(frames, depth))
      site = site_locked(stack, size_range_of(requested_size));
  }
  if (site == nullptr) {
    ++dropped_;
    overflow_site_.stack = &overflow_stack_;  // visible even when the tables never mapped
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
  s.stacks = stack_count_;
  s.sites = site_count_;
  s.dropped_stacks = dropped_;
  s.metadata_bytes = g_sample_pool.raw().mapped_bytes() + g_stack_pool.raw().mapped_bytes() +
                     (stack_slots_ != nullptr ? kStackSlots * sizeof(StackTrace*) : 0) +
                     (sites_ != nullptr ? kSiteSlots * sizeof(SiteCounters) : 0);
  return s;
}

// Order: the store's lock, then the pools' (record and forget take a pool
// lock only outside the store's lock, intern takes the stack pool's inside).
void SampleStore::lock_for_fork() noexcept {
  mutex_.lock();
  g_stack_pool.raw().mutex().lock();
  g_sample_pool.raw().mutex().lock();
}

void SampleStore::unlock_after_fork_parent() noexcept {
  g_sample_pool.raw().mutex().unlock();
  g_stack_pool.raw().mutex().unlock();
  mutex_.unlock();
}

void SampleStore::reset_after_fork_child() noexcept {
  g_sample_pool.raw().mutex().reset_after_fork();
  g_stack_pool.raw().mutex().reset_after_fork();
  mutex_.reset_after_fork();
}

}  // namespace strata::detail
