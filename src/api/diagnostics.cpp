#include "api/diagnostics.h"

#include "api/options.h"
#include "core/free_list.h"
#include "core/page_map.h"
#include "core/size_classes.h"
#include "core/span.h"
#include "frontend/thread_cache.h"
#include "platform/os.h"

namespace strata::detail {

namespace {

[[noreturn]] void report_and_abort(const void* block, const char* what, std::size_t cls) noexcept {
  os_write_stderr("strata: error: ");
  os_write_stderr(what);
  os_write_stderr(": address ");
  os_write_stderr_u64(reinterpret_cast<std::uintptr_t>(block), 16);
  if (cls != 0) {
    os_write_stderr(", size class ");
    os_write_stderr_u64(cls, 10);
    os_write_stderr(" (");
    os_write_stderr_u64(class_size(cls), 10);
    os_write_stderr(" bytes)");
  }
  os_write_stderr("\n");
  os_fatal("heap misuse detected in checking mode; aborting");
}

}  // namespace

void report_bad_free(const void* block, const char* what) noexcept {
  Span* span = g_page_map.lookup(block);
  std::size_t cls = span != nullptr && span->contains(block) ? span->size_class : 0;
  if (g_options.check) report_and_abort(block, what, cls);
  if (g_options.verbose) {
    os_write_stderr("strata: warning: ignored ");
    os_write_stderr(what);
    os_write_stderr(": address ");
    os_write_stderr_u64(reinterpret_cast<std::uintptr_t>(block), 16);
    os_write_stderr("\n");
  }
}

bool check_small_free(void* block, Span* span) noexcept {
  ThreadCache* cache = current_cache();
  if (cache == nullptr) return true;
  if (span->owner.load(std::memory_order_relaxed) == cache) {
    // Blocks other threads freed for us may be waiting in the inbox: bring
    // them home first (the drain checks each of them the same way).
    drain_inbox(cache);
    // Checking mode keeps thread lists empty, so a free block of an owned
    // span is on the span's free list, or beyond the carving point.
    auto address = reinterpret_cast<std::uintptr_t>(block);
    if (address >= span->carve_next)
      report_and_abort(block, "free of a block that was never allocated", span->size_class);
    for (void* b = span->free_list; b != nullptr; b = list_next(b))
      if (b == block) report_and_abort(block, "double free", span->size_class);
  }
  // Blocks this thread freed and has not yet sent to their owner.
  for (const OutboxSlot& slot : cache->outbox.slots) {
    if (slot.parcel == nullptr) continue;
    for (std::uint32_t i = 0; i < slot.parcel->count; ++i)
      if (slot.parcel->blocks[i] == block) report_and_abort(block, "double free", span->size_class);
  }
  return true;
}

}  // namespace strata::detail
