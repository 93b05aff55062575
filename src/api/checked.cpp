#include "api/checked.h"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "api/allocator.h"
#include "core/checked_block.h"
#include "core/diagnostics.h"
#include "core/page_map.h"
#include "core/span.h"
#include "platform/options.h"

namespace strata::detail {

namespace {

thread_local bool t_inner __attribute__((tls_model("initial-exec"))) = false;

// The inner allocation of a checked block must not be checked again.
struct InnerAllocation {
  InnerAllocation() noexcept { t_inner = true; }
  ~InnerAllocation() { t_inner = false; }
};

}  // namespace

bool checking() noexcept { return g_options.check && !t_inner; }

void* checked_allocate(std::size_t alignment, std::size_t size) noexcept {
  if (size > (std::size_t{1} << 46)) {
    errno = ENOMEM;
    return nullptr;
  }
  void* block;
  {
    InnerAllocation inner;
    block = alignment == 0 ? allocate(size + kCheckedOverhead) : allocate_aligned(alignment, size + kCheckedOverhead);
  }
  if (block == nullptr) return nullptr;
  Span* span = g_page_map.lookup(block);
  std::size_t usable = checked_block_usable(span);
  if (span->state == SpanState::kSmall && !poison_intact(block, usable))
    report_misuse(block, "write after free (the poison of a free block was overwritten)");
  std::memset(static_cast<char*>(block) + size, kCheckedCanary, usable - kCheckedTrailer - size);
  write_checked_size(block, usable, size);
  return block;
}

void* checked_allocate_zeroed(std::size_t count, std::size_t size) noexcept {
  std::size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  void* block = checked_allocate(0, total);
  if (block != nullptr) std::memset(block, 0, total);
  return block;
}

std::size_t checked_usable_size(const void* block) noexcept {
  Span* span = g_page_map.lookup(block);
  if (span == nullptr || !span->contains(block)) return 0;
  if (span->state != SpanState::kSmall && span->state != SpanState::kLarge) return 0;
  std::size_t usable = checked_block_usable(span);
  std::uint64_t size = read_checked_size(block, usable);
  return size <= max_checked_size(usable) ? size : 0;
}

void* checked_reallocate(void* block, std::size_t size) noexcept {
  if (block == nullptr) return checked_allocate(0, size);
  Span* span = g_page_map.lookup(block);
  if (span == nullptr || !span->contains(block)) report_misuse(block, "realloc of a pointer strata never returned");
  std::size_t old_size = checked_usable_size(block);
  void* moved = checked_allocate(0, size == 0 ? 1 : size);
  if (moved == nullptr) return nullptr;
  std::memcpy(moved, block, old_size < size ? old_size : size);
  release(block);  // the checked free path
  return moved;
}

}  // namespace strata::detail
