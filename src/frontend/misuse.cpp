#include "frontend/misuse.h"

#include "central/central_cache.h"
#include "core/checked_block.h"
#include "core/diagnostics.h"
#include "core/page_map.h"
#include "core/span_blocks.h"
#include "frontend/thread_cache.h"

namespace strata::detail {

namespace {

bool on_allocation_list(ThreadCache* cache, const Span* span, const void* block) noexcept {
  if (cache->current[span->size_class] != span) return false;
  std::uint32_t budget = span->capacity;
  for (void* b = cache->lists[span->size_class].head; b != nullptr && budget-- != 0; b = list_next(b))
    if (b == block) return true;
  return false;
}

}  // namespace

void confirm_not_free(ThreadCache* cache, Span* span, void* block) noexcept {
  // Past the carving point: never handed out since the span (re)started.
  if (reinterpret_cast<std::uintptr_t>(block) >= span->carve_next || span_list_contains(span, block, cache->key) ||
      on_allocation_list(cache, span, block))
    report_misuse(block, "double free");
}

void report_unmarked_free_block(void* block) noexcept {
  // Carved again from a recycled span without being freed since it was last
  // handed out: another block of its span was freed twice.
  const Span* span = g_page_map.lookup(block);
  if (span != nullptr && span->state == SpanState::kSmall && reinterpret_cast<std::uintptr_t>(block) < span->marked_end)
    report_block_in_use_of_empty_span(block);
  if (static_cast<FreeBlock*>(block)->free_mark == 0)
    report_misuse(block, "double free (the block was handed out already and is on a free list again)");
  report_misuse(block, "write after free (a free block's mark was overwritten)");
}

void checked_free(void* block, Span* span) noexcept {
  std::size_t usable = checked_block_usable(span);
  if (span->state == SpanState::kSmall && poison_intact(block, usable) &&
      g_central[span->size_class].holds_free_block(span, block))
    report_misuse(block, "double free");
  std::uint64_t size = *checked_trailer(block, usable) ^ checked_trailer_key();
  if (size > usable - kCheckedTrailer)
    report_misuse(block, "write past the end of a block (its size trailer was overwritten)");
  auto* bytes = static_cast<const unsigned char*>(block);
  for (std::size_t i = size; i < usable - kCheckedTrailer; ++i)
    if (bytes[i] != kCheckedCanary) report_misuse(block, "write past the end of a block (its canary was overwritten)");
  if (span->state == SpanState::kSmall) poison_block(block, usable);
}

}  // namespace strata::detail
