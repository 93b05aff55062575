// Large, aligned, zeroed and resized allocations.
#include <cerrno>
#include <cstring>

#include "api/allocator.h"
#include "api/checked.h"
#include "api/diagnostics.h"
#include "api/options.h"
#include "backend/page_heap.h"
#include "core/free_list.h"
#include "core/page_map.h"

namespace strata::detail {

std::uintptr_t g_list_key = 0;  // set once, before the first list exists
// 0 until the options are read (load_options sets 1025, or keeps 0 in
// checking mode): the process's first malloc must reach allocate_above_1k
// with its size (see there).
std::size_t g_fast_size_limit = 0;

namespace {

// Larger than any address space we can map: rejected before any arithmetic
// can overflow.
constexpr std::size_t kMaxRequest = std::size_t{1} << (kAddressBits - 1);

void* out_of_memory() noexcept {
  errno = ENOMEM;
  return nullptr;
}

std::size_t pages_for(std::size_t bytes) noexcept { return (bytes + kPageSize - 1) >> kPageShift; }

}  // namespace

void* allocate_above_1k(std::size_t size) noexcept {
  // Before the options are read, or in checking mode. Read them first: in
  // checking mode even the process's first block needs a trailer for the
  // size asked for (the inline path would only pass on its class).
  if (__builtin_expect(g_fast_size_limit == 0, 0)) {
    ensure_initialized();
    if (g_options.check && checking()) return checked_allocate(0, size);
  }
  if (size <= kMaxSmallSize) return allocate_small(size_to_class(size));
  return allocate_large(size);
}

void* allocate_large(std::size_t size) noexcept {
  if (size > kMaxRequest) return out_of_memory();
  ensure_initialized();
  Span* span = g_page_heap.allocate(pages_for(size));
  if (span == nullptr) return out_of_memory();
  return span->start();
}

void* allocate_aligned(std::size_t alignment, std::size_t size) noexcept {
  if (g_options.check && checking()) return checked_allocate(alignment, size);
  if (alignment <= kMinAlignment) return allocate(size < alignment ? alignment : size);
  if (size > kMaxRequest || alignment > kMaxRequest) return out_of_memory();
  if (alignment <= kPageSize && size <= kMaxSmallSize) {
    if (std::size_t cls = aligned_size_to_class(size, alignment); cls != 0) {
      void* block = allocate_small(cls);
      return block != nullptr ? block : out_of_memory();
    }
  }
  ensure_initialized();
  std::size_t align_pages = alignment > kPageSize ? alignment >> kPageShift : 1;
  Span* span = g_page_heap.allocate(pages_for(size), align_pages);
  if (span == nullptr) return out_of_memory();
  return span->start();
}

void* allocate_zeroed(std::size_t count, std::size_t size) noexcept {
  if (g_options.check && checking()) return checked_allocate_zeroed(count, size);
  std::size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return out_of_memory();
  if (total <= kMaxSmallSize) {
    void* block = allocate_small(size_to_class(total));
    if (block == nullptr) return out_of_memory();
    std::memset(block, 0, total);
    return block;
  }
  if (total > kMaxRequest) return out_of_memory();
  ensure_initialized();
  Span* span = g_page_heap.allocate(pages_for(total));
  if (span == nullptr) return out_of_memory();
  // Fresh or decommitted pages read as zero: no need to touch them.
  if (!span->pages_zero) std::memset(span->start(), 0, total);
  span->pages_zero = false;
  return span->start();
}

std::size_t usable_size(const void* block) noexcept {
  if (block == nullptr) return 0;
  if (g_options.check) return checked_usable_size(block);
  Span* span = g_page_map.lookup(block);
  if (span == nullptr || !span->contains(block)) return 0;
  if (span->state == SpanState::kSmall) return class_size(span->size_class);
  if (span->state == SpanState::kLarge && block == span->start()) return span->bytes();
  return 0;
}

void* reallocate(void* block, std::size_t size) noexcept {
  if (g_options.check) return checked_reallocate(block, size);
  if (block == nullptr) return allocate(size);
  Span* span = g_page_map.lookup(block);
  if (span == nullptr || !span->contains(block) ||
      (span->state != SpanState::kSmall && span->state != SpanState::kLarge) ||
      (span->state == SpanState::kLarge && block != span->start())) {
    report_bad_free(block, "realloc of a pointer strata never returned");
    errno = EINVAL;
    return nullptr;
  }
  if (size > kMaxRequest) return out_of_memory();
  std::size_t old_size;
  if (span->state == SpanState::kSmall) {
    old_size = class_size(span->size_class);
    // Stays when it fits and would not waste more than half the block.
    if (size <= old_size && size >= old_size / 2) return block;
  } else {
    old_size = span->bytes();
    std::size_t pages = pages_for(size);
    if (size <= old_size) {
      if (size > kMaxSmallSize) {
        // Shrinking: give back the tail when it is worth a page heap visit.
        if (span->page_count - pages >= span->page_count / 4 + 1) g_page_heap.shrink(span, pages);
        return block;
      }
      if (size >= old_size / 2) return block;  // small enough to move, not worth it
    } else if (g_page_heap.try_grow(span, pages)) {
      return block;  // the free pages right after the block were enough
    }
  }
  void* moved = allocate(size == 0 ? 1 : size);
  if (moved == nullptr) return out_of_memory();
  std::memcpy(moved, block, size < old_size ? size : old_size);
  release(block);
  return moved;
}

}  // namespace strata::detail
