#include "core/checked_block.h"

#include <cstring>

#include "core/free_list.h"
#include "core/size_classes.h"

namespace strata::detail {

namespace {
constexpr unsigned char kPoison = 0xdf;
constexpr std::size_t kPoisonLimit = 256;  // bytes checked per block

std::uint64_t trailer_key() noexcept { return g_list_key * 0x9e3779b97f4a7c15ull; }

// The trailer word: the block's last kCheckedTrailer bytes.
const char* trailer_of(const void* block, std::size_t usable) noexcept {
  return static_cast<const char*>(block) + usable - kCheckedTrailer;
}
}  // namespace

std::size_t checked_block_usable(const Span* span) noexcept {
  return span->state == SpanState::kSmall ? class_size(span->size_class) : span->bytes();
}

void write_checked_size(void* block, std::size_t usable, std::uint64_t size) noexcept {
  const std::uint64_t word = size ^ trailer_key();
  std::memcpy(const_cast<char*>(trailer_of(block, usable)), &word, sizeof word);
}

std::uint64_t read_checked_size(const void* block, std::size_t usable) noexcept {
  std::uint64_t word;
  std::memcpy(&word, trailer_of(block, usable), sizeof word);
  return word ^ trailer_key();
}

void poison_block(void* block, std::size_t block_size) noexcept {
  std::size_t end = block_size < kPoisonLimit ? block_size : kPoisonLimit;
  std::memset(block, kPoison, end);
}

bool poison_intact(const void* block, std::size_t block_size) noexcept {
  std::size_t end = block_size < kPoisonLimit ? block_size : kPoisonLimit;
  auto* bytes = static_cast<const unsigned char*>(block);
  for (std::size_t i = 0; i < end; ++i)
    if (bytes[i] != kPoison) return false;
  return true;
}

}  // namespace strata::detail
