// Checking mode's checks of a free. (The default mode's double-free checks
// are a block's bit in its span, core/span_blocks.h, and the owner's
// allocation word, frontend/thread_cache.cpp.) Reports go through
// core/diagnostics.h and abort.
//
// Checking mode (STRATA_CHECK=1): every free of a small block is checked for
// a write past its end (canary, size trailer: core/checked_block.h) and, when
// its poison is intact, for a double free.
#pragma once

namespace strata::detail {

struct Span;

// Checking mode: the checks of a free of `block`, a well-formed block of
// `span`; aborts on misuse, poisons the block otherwise.
void checked_free(void* block, Span* span) noexcept;

}  // namespace strata::detail
