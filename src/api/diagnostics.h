// Reports of misuse: invalid and double frees. In checking mode
// (STRATA_CHECK=1) every report prints the address, the size class and what
// was wrong, then aborts. In the default mode a pointer strata does not know
// is ignored (warned about with STRATA_VERBOSE=1) rather than corrupting
// the heap.
#pragma once

#include <cstddef>

namespace strata::detail {

struct Span;

void report_bad_free(const void* block, const char* what) noexcept;

// Checking mode: true when freeing `block` (a well-formed block address of a
// small span) is legal; reports and aborts otherwise.
bool check_small_free(void* block, Span* span) noexcept;

}  // namespace strata::detail
