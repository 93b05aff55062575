#include "core/diagnostics.h"

#include "core/page_map.h"
#include "core/size_classes.h"
#include "core/span.h"
#include "platform/os.h"

namespace strata::detail {

void report_misuse(const void* block, const char* what) noexcept {
  Span* span = g_page_map.lookup(block);
  std::size_t cls = span != nullptr && span->contains(block) && span->state == SpanState::kSmall
                        ? span->size_class : 0;
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
  os_fatal("heap misuse detected; aborting");
}

}  // namespace strata::detail
