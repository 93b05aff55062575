#include "core/size_classes.h"

namespace strata::detail {

std::size_t aligned_size_to_class(std::size_t size, std::size_t alignment) noexcept {
  if (size > kMaxSmallSize || alignment > kPageSize) return 0;
  if (size < alignment) size = alignment;
  // Spans start on page boundaries, so a class whose size is a multiple of
  // the alignment has every block aligned. Powers of two are classes, so the
  // walk ends at the latest at the next power of two.
  for (std::size_t cls = size_to_class(size); cls < kNumClasses; ++cls)
    if (class_size(cls) % alignment == 0) return cls;
  return 0;
}

}  // namespace strata::detail
