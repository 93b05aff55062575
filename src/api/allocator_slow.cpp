// Large, aligned, zeroed and resized allocations.
#include <cerrno>
#include <cstring>

#include "api/allocator.h"
#include "api/checked.h"
#include "backend/page_heap.h"
#include "core/diagnostics.h"
#include "core/free_list.h"
#include "core/page_map.h"
#include "platform/options.h"
#include "profile/sampled_block.h"
#include "profile/sampler.h"

namespace strata::detail {

std::uintptr_t g_list_key = 0;  // set once, before the first list exists

namespace {

// Larger than any address space we can map: rejected before any arithmetic
// can overflow.
constexpr std::size_t kMaxRequest = std::size_t{1} << (kAddressBits - 1);

void* out_of_memory() noexcept {
  errno = ENOMEM;
  return nullptr;
}

std::size_t pages_for(std::size_t bytes) noexcept { return (bytes + kPageSize - 1) >> kPageShift; }

// Spans start on pages and every class size is a multiple of kMinAlignment,
// so every block is aligned to it.
constexpr bool every_class_min_aligned() noexcept {
  for (std::size_t cls = 1; cls < kNumClasses; ++cls)
    if (class_size(cls) % kMinAlignment != 0) return false;
  return true;
}
static_assert(every_class_min_aligned() && kPageSize % kMinAlignment == 0, "blocks are kMinAlignment-aligned");

}  // namespace

void* allocate_general(std::size_t size, CallSite site) noexcept {
  // A nonzero fast size limit says the process is set up and not in
  // checking mode, the common case here: the hot line answers both, without
  // the set-up flag and the options (two more lines, often cold).
  if (racy_load(g_hot.fast_size_limit) == 0) {
    ensure_initialized();
    if (__builtin_expect(g_options.check, 0) && checking()) return checked_allocate(0, size);
  }
  if (size <= kMaxSmallSize) return allocate_at(size, word_offset(size_to_class(size)), site);
  return allocate_large(size, site);
}

__attribute__((noinline)) void* allocate_general_from_entry(std::size_t size) noexcept {
  return allocate_general(size, STRATA_CALL_SITE);
}

void* allocate_large(std::size_t size, CallSite site, bool zeroed) noexcept {
  if (size > kMaxRequest) return out_of_memory();
  ensure_initialized();
  std::size_t pages = pages_for(size);
  if (sampling_point_in(size)) {  // page heap requests count their own bytes
    if (void* block = allocate_sampled(size, 0, pages << kPageShift, size, site, zeroed)) return block;
  }
  Span* span = g_page_heap.allocate(pages);
  if (span == nullptr) return out_of_memory();
  // Fresh or decommitted pages read as zero: no need to touch them.
  if (zeroed && !span->pages_zero) std::memset(span->start(), 0, size);
  span->pages_zero = false;
  return span->start();
}

void* allocate_aligned(std::size_t alignment, std::size_t size, CallSite site) noexcept {
  ensure_initialized();
  if (g_options.check && checking()) return checked_allocate(alignment, size);
  // Every block is aligned to kMinAlignment (below): the request itself
  // picks the class, and heap profiling records the size the program asked.
  if (alignment <= kMinAlignment) return allocate_from(size, site);
  if (size > kMaxRequest || alignment > kMaxRequest) return out_of_memory();
  if (alignment <= kPageSize && size <= kMaxSmallSize) {
    if (std::size_t cls = aligned_size_to_class(size, alignment); cls != 0) {
      void* block = allocate_at(size, word_offset(cls), site, alignment);
      return block != nullptr ? block : out_of_memory();
    }
  }
  std::size_t pages = pages_for(size) > 0 ? pages_for(size) : 1;
  if (sampling_point_in(size)) {  // page heap requests count their own bytes
    if (void* block = allocate_sampled(size, alignment, pages << kPageShift, size, site)) return block;
  }
  std::size_t align_pages = alignment > kPageSize ? alignment >> kPageShift : 1;
  Span* span = g_page_heap.allocate(pages, align_pages);
  if (span == nullptr) return out_of_memory();
  return span->start();
}

void* allocate_zeroed(std::size_t count, std::size_t size, CallSite site) noexcept {
  ensure_initialized();
  if (g_options.check && checking()) return checked_allocate_zeroed(count, size);
  std::size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return out_of_memory();
  if (total <= kMaxSmallSize) {
    void* block = allocate_at(total, word_offset(size_to_class(total)), site);
    if (block == nullptr) return out_of_memory();
    std::memset(block, 0, total);
    return block;
  }
  return allocate_large(total, site, true);
}

std::size_t usable_size(const void* block) noexcept {
  if (block == nullptr) return 0;
  ensure_initialized();
  if (g_options.check) return checked_usable_size(block);
  Span* span = g_page_map.lookup(block);
  if (span == nullptr || !span->contains(block)) return 0;
  if (span->state == SpanState::kSmall) return class_size(span->size_class);
  if (span->state == SpanState::kLarge && block == span->start())
    return span->sample != nullptr ? sampled_usable_size(span) : span->bytes();
  return 0;
}

void* reallocate(void* block, std::size_t size, CallSite site) noexcept {
  ensure_initialized();
  if (g_options.check) return checked_reallocate(block, size);
  if (block == nullptr) return allocate_from(size, site);
  Span* span = g_page_map.lookup(block);
  if (span == nullptr || !span->contains(block) ||
      (span->state != SpanState::kSmall && span->state != SpanState::kLarge) ||
      (span->state == SpanState::kLarge && block != span->start())) {
    report_misuse(block, "realloc of a pointer strata never returned");
  }
  if (size > kMaxRequest) return out_of_memory();
  std::size_t old_size;
  if (span->sample != nullptr && sampled_usable_size(span) <= kMaxSmallSize) {
    // A sampled small block (a span of its own) stays exactly when the
    // block it stands for would have; otherwise it moves. A sampled large
    // block is a large span like any other: it grows and shrinks below.
    old_size = sampled_usable_size(span);
    if (size <= old_size && size >= old_size / 2) return block;
  } else if (span->state == SpanState::kSmall) {
    old_size = class_size(span->size_class);
    // Stays when it fits and would not waste more than half the block.
    if (size <= old_size && size >= old_size / 2) return block;
  } else {
    old_size = span->bytes();
    std::size_t pages = pages_for(size);
    if (size <= old_size) {
      if (size > kMaxSmallSize) {
        // Shrinking: give back the tail when it is worth a page heap visit.
        if (span->page_count - pages >= span->page_count / 4 + 1) {
          g_page_heap.shrink(span, pages);
          if (span->sample != nullptr) sampled_block_resized(span);
        }
        return block;
      }
      if (size >= old_size / 2) return block;  // small enough to move, not worth it
    } else if (g_page_heap.try_grow(span, pages)) {
      if (span->sample != nullptr) sampled_block_resized(span);
      return block;  // the free pages right after the block were enough
    }
  }
  void* moved = allocate_from(size, site);  // size 0: the smallest class, as malloc(0)
  if (moved == nullptr) return out_of_memory();
  std::memcpy(moved, block, size < old_size ? size : old_size);
  release(block);
  return moved;
}

}  // namespace strata::detail
