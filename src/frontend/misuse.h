// Is this free legal? The checks that need to know where a free block can
// be (its span's list, its owner's allocation list), so they live with the
// thread caches. Reports go through core/diagnostics.h and abort.
//
// Default mode: a free that finds the free mark in the block (core/free_list.h)
// is confirmed here before anything is reported: the block is looked for on
// its span's list and on the owner's allocation list. A block in use whose
// second word happens to hold the key is freed normally.
//
// Checking mode (STRATA_CHECK=1): every free of a small block is checked for
// a write past its end (canary, size trailer: core/checked_block.h) and, when
// its poison is intact, for a double free.
#pragma once

namespace strata::detail {

class ThreadCache;
struct Span;

// Aborts with "double free" when `block` (of `span`, owned by `cache`) is
// already free.
void confirm_not_free(ThreadCache* cache, Span* span, void* block) noexcept;

// Checking mode: the checks of a free of `block`, a well-formed block of
// `span`; aborts on misuse, poisons the block otherwise.
void checked_free(void* block, Span* span) noexcept;

}  // namespace strata::detail
