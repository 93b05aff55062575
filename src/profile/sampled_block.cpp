#include "profile/sampled_block.h"

#include <cstring>

#include "backend/page_heap.h"
#include "core/span.h"
#include "profile/sample_store.h"
#include "profile/sampler.h"
#include "profile/stack_capture.h"

namespace strata::detail {

void* allocate_sampled(std::size_t requested_size, std::size_t alignment, std::size_t usable_size,
                       std::size_t counted_bytes, CallSite site, bool zeroed) noexcept {
  ProfilerReentryGuard guard;
  void* frames[kMaxStackFrames];
  std::uint32_t depth = capture_stack(site, frames, kMaxStackFrames);

  std::size_t bytes = usable_size > requested_size ? usable_size : requested_size;
  std::size_t pages = (bytes + kPageSize - 1) >> kPageShift;
  std::size_t align_pages = alignment > kPageSize ? alignment >> kPageShift : 1;
  Span* span = g_page_heap.allocate(pages, align_pages);
  if (span == nullptr) return nullptr;
  void* block = span->start();
  if (zeroed && !span->pages_zero) std::memset(block, 0, requested_size);
  span->pages_zero = false;

  Sample* sample = g_sample_store.record(frames, depth, block, requested_size, alignment, usable_size,
                                         sample_weight(counted_bytes), current_thread_id());
  if (sample == nullptr) {  // no memory for the record: the block is simply not sampled
    g_page_heap.deallocate(span);
    return nullptr;
  }
  span->sample = sample;
  return block;
}

void release_sampled(Span* span) noexcept {
  Sample* sample = span->sample;
  span->sample = nullptr;
  g_sample_store.forget(sample);
}

std::size_t sampled_usable_size(const Span* span) noexcept { return span->sample->usable_size; }

void sampled_block_resized(Span* span) noexcept { span->sample->usable_size = span->bytes(); }

}  // namespace strata::detail
