#include "api/checked.h"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "api/allocator.h"
#include "api/diagnostics.h"
#include "api/options.h"
#include "core/free_list.h"
#include "core/page_map.h"
#include "core/span.h"
#include "platform/os.h"

namespace strata::detail {

namespace {

constexpr unsigned char kCanary = 0xcb;
constexpr unsigned char kPoison = 0xdf;
constexpr std::size_t kPoisonLimit = 256;  // bytes checked per block
constexpr std::size_t kTrailer = sizeof(std::uint64_t);

thread_local bool t_inner __attribute__((tls_model("initial-exec"))) = false;

// The inner allocation of a checked block must not be checked again.
struct InnerAllocation {
  InnerAllocation() noexcept { t_inner = true; }
  ~InnerAllocation() { t_inner = false; }
};

std::uint64_t trailer_key() noexcept { return g_list_key * 0x9e3779b97f4a7c15ull; }

std::size_t block_usable(Span* span) noexcept {
  return span->state == SpanState::kSmall ? class_size(span->size_class) : span->bytes();
}

std::uint64_t* trailer_of(void* block, std::size_t usable) noexcept {
  return reinterpret_cast<std::uint64_t*>(static_cast<char*>(block) + usable - kTrailer);
}

[[noreturn]] void misuse(const void* block, const char* what) noexcept {
  report_bad_free(block, what);  // checking mode: prints and aborts
  os_fatal(what);
}

}  // namespace

bool checking() noexcept { return g_options.check && !t_inner; }

void poison_block(void* block, std::size_t block_size) noexcept {
  if (block_size <= sizeof(FreeBlock)) return;
  std::size_t end = block_size < kPoisonLimit ? block_size : kPoisonLimit;
  std::memset(static_cast<char*>(block) + sizeof(FreeBlock), kPoison, end - sizeof(FreeBlock));
}

bool poison_intact(const void* block, std::size_t block_size) noexcept {
  std::size_t end = block_size < kPoisonLimit ? block_size : kPoisonLimit;
  auto* bytes = static_cast<const unsigned char*>(block);
  for (std::size_t i = sizeof(FreeBlock); i < end; ++i)
    if (bytes[i] != kPoison) return false;
  return true;
}

void* checked_allocate(std::size_t alignment, std::size_t size) noexcept {
  if (size > (std::size_t{1} << 46)) {
    errno = ENOMEM;
    return nullptr;
  }
  void* block;
  {
    InnerAllocation inner;
    block = alignment == 0 ? allocate(size + kTrailer) : allocate_aligned(alignment, size + kTrailer);
  }
  if (block == nullptr) return nullptr;
  Span* span = g_page_map.lookup(block);
  std::size_t usable = block_usable(span);
  if (span->state == SpanState::kSmall && !poison_intact(block, usable))
    misuse(block, "write after free (the poison of a free block was overwritten)");
  std::memset(static_cast<char*>(block) + size, kCanary, usable - kTrailer - size);
  *trailer_of(block, usable) = size ^ trailer_key();
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
  std::size_t usable = block_usable(span);
  std::uint64_t size = *trailer_of(const_cast<void*>(block), usable) ^ trailer_key();
  return size <= usable - kTrailer ? size : 0;
}

void checked_release(void* block, Span* span) noexcept {
  std::size_t usable = block_usable(span);
  if (span->state == SpanState::kSmall && poison_intact(block, usable)) {
    // Looks free already: confirm where a free block of this span can be.
    if (!check_small_free(block, span)) return;
  }
  std::uint64_t size = *trailer_of(block, usable) ^ trailer_key();
  if (size > usable - kTrailer)
    misuse(block, "write past the end of a block (its size trailer was overwritten)");
  auto* bytes = static_cast<const unsigned char*>(block);
  for (std::size_t i = size; i < usable - kTrailer; ++i)
    if (bytes[i] != kCanary) misuse(block, "write past the end of a block (its canary was overwritten)");
  if (span->state == SpanState::kSmall) poison_block(block, usable);
}

void* checked_reallocate(void* block, std::size_t size) noexcept {
  if (block == nullptr) return checked_allocate(0, size);
  Span* span = g_page_map.lookup(block);
  std::size_t old_size = checked_usable_size(block);
  if (span == nullptr || !span->contains(block)) misuse(block, "realloc of a pointer strata never returned");
  void* moved = checked_allocate(0, size == 0 ? 1 : size);
  if (moved == nullptr) return nullptr;
  std::memcpy(moved, block, old_size < size ? old_size : size);
  release(block);  // the checked free path
  return moved;
}

}  // namespace strata::detail
