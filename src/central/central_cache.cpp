#include "central/central_cache.h"

#include "backend/page_heap.h"
#include "core/checked_block.h"
#include "core/diagnostics.h"
#include "core/ownership.h"
#include "core/page_map.h"
#include "core/span_blocks.h"
#include "platform/options.h"

namespace strata::detail {

constinit CentralCache g_central[kNumClasses];

void init_small_span(Span* span, std::size_t cls, ThreadCache* owner) noexcept {
  format_small_span(span, cls);
  // Checking mode: every block a span hands out is checked for the poison
  // its free wrote (a write after free), so blocks never handed out carry
  // it too.
  if (g_options.check) {
    for (std::uint32_t i = 0; i < span->capacity; ++i) poison_block(block_at(span, i), class_size(cls));
  }
  set_owner(span, owner);
}

// The lock, publishing partial_listed_ as it lets go.
class CentralCache::Locked {
 public:
  explicit Locked(CentralCache& central) noexcept : central_(central) { central_.mutex_.lock(); }
  ~Locked() {
    central_.publish_listed();
    central_.mutex_.unlock();
  }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

 private:
  CentralCache& central_;
};

Span* CentralCache::adopt(ThreadCache* owner) noexcept {
  if (!partial_listed_.load(std::memory_order_relaxed)) return nullptr;
  Locked guard(*this);
  Span* span = partial_.pop();
  if (span == nullptr) return nullptr;
  if (span == kept_empty_) kept_empty_ = nullptr;
  --spans_;
  blocks_out_ -= span->countdown;
  set_owner(span, owner);
  return span;
}

void CentralCache::abandon(SpanList& spans) noexcept {
  SpanList empty;
  {
    Locked guard(*this);
    while (Span* span = spans.pop()) {
      set_owner(span, nullptr);
      if (span->countdown == 0) {
        empty.push(span);
      } else {
        ++spans_;
        blocks_out_ += span->countdown;
        if (span_has_free_blocks(span)) partial_.push(span);
      }
    }
  }
  while (Span* span = empty.pop()) {
    verify_empty_span(span);
    g_page_heap.deallocate(span);
  }
}

void CentralCache::return_block_locked(Span* span, void* block, SpanList& empty) noexcept {
  bool was_full = !span_has_free_blocks(span);
  --blocks_out_;
  bool emptied = free_block(span, block);  // a bit set already: a double free, reported
  if (was_full) partial_.push(span);
  if (!emptied) return;
  verify_empty_span(span);
  if (kept_empty_ == nullptr && span->page_count <= kMaxKeptPages) {
    kept_empty_ = span;
    span->idle_since = monotonic_ns();
    return;
  }
  partial_.remove(span);
  --spans_;
  empty.push(span);
}

std::uint32_t CentralCache::receive(void** blocks, std::uint32_t count) noexcept {
  SpanList empty;
  std::uint32_t forwarded = 0;
  {
    Locked guard(*this);
    for (std::uint32_t i = 0; i < count; ++i) {
      void* block = blocks[i];
      Span* span = g_page_map.lookup(block);
      if (span->owner.load(std::memory_order_acquire) != nullptr) {
        blocks[forwarded++] = block;  // adopted since the sender looked: goes to the new owner
        continue;
      }
      return_block_locked(span, block, empty);
    }
  }
  while (Span* span = empty.pop()) g_page_heap.deallocate(span);
  return forwarded;
}

void* CentralCache::take_one_locked(Span* span) noexcept {
  void* block = take_one_block(span);
  if (span == kept_empty_) kept_empty_ = nullptr;
  ++blocks_out_;
  return block;
}

void* CentralCache::allocate_one(std::size_t cls) noexcept {
  {
    Locked guard(*this);
    if (Span* span = partial_.head) {
      void* block = take_one_locked(span);
      if (!span_has_free_blocks(span)) partial_.remove(span);
      return block;
    }
  }
  Span* span = g_page_heap.allocate(class_info(cls).span_pages, 1, SpanState::kSmall);
  if (span == nullptr) return nullptr;
  init_small_span(span, cls, nullptr);
  // The block comes out before the span is filed: once filed, another
  // thread could adopt it before this one takes its block.
  Locked guard(*this);
  ++spans_;
  void* block = take_one_locked(span);
  if (span_has_free_blocks(span)) partial_.push(span);
  return block;
}

bool CentralCache::holds_free_block(Span* span, const void* block) noexcept {
  Locked guard(*this);
  if (span->owner.load(std::memory_order_relaxed) != nullptr) return false;
  return block_is_free(span, block);
}

std::size_t CentralCache::park_free_units() noexcept {
  Span* kept = nullptr;
  std::size_t released = 0;
  if (g_options.check) return 0;  // checking mode keeps every free block's poison
  {
    Locked guard(*this);
    if ((kept = kept_empty_) != nullptr) {
      kept_empty_ = nullptr;
      partial_.remove(kept);
      --spans_;
    }
    for (Span* span = partial_.head; span != nullptr; span = span->next)
      released += detail::park_free_units(span);
  }
  if (kept != nullptr) g_page_heap.deallocate(kept);
  return released;
}

void CentralCache::release_kept_if_idle(std::uint64_t now_ns, std::uint64_t period_ns) noexcept {
  if (!mutex_.try_lock()) return;
  Span* kept = kept_empty_;
  if (kept != nullptr && now_ns - kept->idle_since >= period_ns) {
    kept_empty_ = nullptr;
    partial_.remove(kept);
    --spans_;
  } else {
    kept = nullptr;
  }
  publish_listed();
  mutex_.unlock();
  if (kept != nullptr) g_page_heap.deallocate(kept);
}

CentralStats CentralCache::stats() noexcept {
  Locked guard(*this);
  CentralStats s;
  s.spans = spans_;
  s.blocks_out = blocks_out_;
  for (Span* span = partial_.head; span != nullptr; span = span->next)
    s.free_blocks += span->capacity - span->countdown;
  s.lock_contended = mutex_.contended_count();
  return s;
}

}  // namespace strata::detail
