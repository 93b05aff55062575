#include "central/central_cache.h"

#include "api/checked.h"
#include "api/options.h"
#include "backend/page_heap.h"
#include "core/page_map.h"
#include "frontend/thread_cache.h"

namespace strata::detail {

constinit CentralCache g_central[kNumClasses];

std::uint32_t take_blocks(Span* span, std::uint32_t count, BlockChain& out) noexcept {
  std::uint32_t taken = 0;
  while (taken < count && span->free_list != nullptr) {
    void* block = span->free_list;
    span->free_list = list_next(block);
    out.push(block);
    ++taken;
  }
  std::size_t size = class_size(span->size_class);
  while (taken < count && span->carve_next < span->carve_end) {
    // Checking mode: never-used blocks carry the free poison too, so that
    // the poison check at allocation holds for every block.
    if (g_options.check) poison_block(reinterpret_cast<void*>(span->carve_next), size);
    out.push(reinterpret_cast<void*>(span->carve_next));
    span->carve_next += size;
    ++taken;
  }
  span->allocated += taken;
  return taken;
}

bool return_block(Span* span, void* block) noexcept {
  bool was_full = !span->has_free_blocks();
  list_set_next(block, span->free_list);
  span->free_list = block;
  --span->allocated;
  return was_full;
}

void init_small_span(Span* span, std::size_t cls, ThreadCache* owner) noexcept {
  const SizeClassInfo& info = class_info(cls);
  span->size_class = static_cast<std::uint8_t>(cls);
  span->capacity = info.span_objects;
  span->allocated = 0;
  span->free_list = nullptr;
  span->carve_next = reinterpret_cast<std::uintptr_t>(span->start());
  span->carve_end = span->carve_next + std::uintptr_t{info.span_objects} * info.size;
  g_page_heap.note_small_span(span);
  set_owner(span, owner);
}

void set_owner(Span* span, ThreadCache* owner) noexcept {
  span->owner.store(owner, std::memory_order_release);
  g_page_map.set_owner_tag(span->first_page, span->page_count, owner_tag_for(owner, span->size_class));
}

Span* CentralCache::adopt(ThreadCache* owner) noexcept {
  LockGuard guard(mutex_);
  Span* span = partial_.pop();
  if (span == nullptr) return nullptr;
  --spans_;
  blocks_out_ -= span->allocated;
  set_owner(span, owner);
  return span;
}

void CentralCache::abandon(SpanList& spans) noexcept {
  SpanList empty;
  {
    LockGuard guard(mutex_);
    while (Span* span = spans.pop()) {
      set_owner(span, nullptr);
      if (span->allocated == 0) {
        empty.push(span);
      } else {
        ++spans_;
        blocks_out_ += span->allocated;
        if (span->has_free_blocks()) partial_.push(span);
      }
    }
  }
  while (Span* span = empty.pop()) g_page_heap.deallocate(span);
}

std::uint32_t CentralCache::receive(void** blocks, std::uint32_t count) noexcept {
  SpanList empty;
  std::uint32_t forwarded = 0;
  {
    LockGuard guard(mutex_);
    for (std::uint32_t i = 0; i < count; ++i) {
      void* block = blocks[i];
      Span* span = g_page_map.lookup(block);
      if (span->owner.load(std::memory_order_acquire) != nullptr) {
        blocks[forwarded++] = block;  // adopted since the sender looked: goes to the new owner
        continue;
      }
      bool was_full = return_block(span, block);
      --blocks_out_;
      if (span->allocated == 0) {
        if (span->in_list) partial_.remove(span);
        --spans_;
        empty.push(span);
      } else if (was_full) {
        partial_.push(span);
      }
    }
  }
  while (Span* span = empty.pop()) g_page_heap.deallocate(span);
  return forwarded;
}

void* CentralCache::allocate_one(std::size_t cls) noexcept {
  {
    LockGuard guard(mutex_);
    if (Span* span = partial_.head) {
      BlockChain one;
      blocks_out_ += take_blocks(span, 1, one);
      if (!span->has_free_blocks()) partial_.remove(span);
      return one.head;
    }
  }
  Span* span = g_page_heap.allocate(class_info(cls).span_pages, 1, SpanState::kSmall);
  if (span == nullptr) return nullptr;
  init_small_span(span, cls, nullptr);
  LockGuard guard(mutex_);
  BlockChain one;
  blocks_out_ += take_blocks(span, 1, one);
  ++spans_;
  if (span->has_free_blocks()) partial_.push(span);
  return one.head;
}

CentralStats CentralCache::stats() noexcept {
  LockGuard guard(mutex_);
  CentralStats s;
  s.spans = spans_;
  s.blocks_out = blocks_out_;
  for (Span* span = partial_.head; span != nullptr; span = span->next)
    s.free_blocks += span->capacity - span->allocated;
  s.lock_contended = mutex_.contended_count();
  return s;
}

}  // namespace strata::detail
