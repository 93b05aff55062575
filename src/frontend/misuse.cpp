#include "frontend/misuse.h"

#include "central/central_cache.h"
#include "core/checked_block.h"
#include "core/diagnostics.h"
#include "core/page_map.h"
#include "frontend/thread_cache.h"

namespace strata::detail {

void checked_free(void* block, Span* span) noexcept {
  std::size_t usable = checked_block_usable(span);
  if (span->state == SpanState::kSmall && poison_intact(block, usable) &&
      g_central[span->size_class].holds_free_block(span, block))
    report_misuse(block, "double free");
  std::uint64_t size = read_checked_size(block, usable);
  if (size > max_checked_size(usable))
    report_misuse(block, "write past the end of a block (its size trailer was overwritten)");
  auto* bytes = static_cast<const unsigned char*>(block);
  for (std::size_t i = size; i < usable - kCheckedTrailer; ++i)
    if (bytes[i] != kCheckedCanary) report_misuse(block, "write past the end of a block (its canary was overwritten)");
  if (span->state == SpanState::kSmall) poison_block(block, usable);
}

}  // namespace strata::detail
