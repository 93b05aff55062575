#include "backend/metadata_pool.h"

#include <cstring>

#include "core/constants.h"
#include "platform/os.h"

namespace strata::detail {

void* RawPool::allocate() noexcept {
  LockGuard guard(mutex_);
  void* result;
  if (free_ != nullptr) {
    result = free_;
    free_ = free_->next;
    std::memset(result, 0, object_size_);  // reused: make it look fresh
  } else {
    if (bump_ == nullptr || bump_ + object_size_ > bump_end_) {
      auto* chunk = static_cast<char*>(os_map(chunk_bytes_, kPageSize));
      if (chunk == nullptr) return nullptr;
      mapped_bytes_ += chunk_bytes_;
      bump_ = chunk;
      bump_end_ = chunk + chunk_bytes_;
    }
    result = bump_;  // fresh mapping: already zero
    bump_ += (object_size_ + 63) & ~std::size_t{63};  // cache-line aligned objects
  }
  ++in_use_;
  return result;
}

void RawPool::deallocate(void* object) noexcept {
  LockGuard guard(mutex_);
  auto* node = static_cast<Node*>(object);
  node->next = free_;
  free_ = node;
  --in_use_;
}

}  // namespace strata::detail
