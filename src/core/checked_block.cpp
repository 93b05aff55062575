#include "core/checked_block.h"

#include <cstring>

#include "core/free_list.h"
#include "core/size_classes.h"

namespace strata::detail {

namespace {
constexpr unsigned char kPoison = 0xdf;
constexpr std::size_t kPoisonLimit = 256;  // bytes checked per block
}  // namespace

std::size_t checked_block_usable(const Span* span) noexcept {
  return span->state == SpanState::kSmall ? class_size(span->size_class) : span->bytes();
}

std::uint64_t* checked_trailer(void* block, std::size_t usable) noexcept {
  return reinterpret_cast<std::uint64_t*>(static_cast<char*>(block) + usable - kCheckedTrailer);
}

std::uint64_t checked_trailer_key() noexcept { return g_list_key * 0x9e3779b97f4a7c15ull; }

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
