// Is this free legal? The checks that need to know where a free block can
// be (its span's list, its owner's allocation list), so they live with the
// thread caches. Reports go through core/diagnostics.h and abort.
//
// Default mode (the free mark of core/free_list.h): a block on a free list
// without its mark is reported when malloc meets it; a block freed by
// another thread that arrives with the mark already set is confirmed here
// before anything is reported (looked for on its span's list, on the
// owner's allocation list, past the carving point), so a block in use whose
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

// A block at the head of a free list without its mark: its mark was cleared
// by the malloc that handed out its first copy (double free), or something
// wrote into it after it was freed. Reports and aborts.
[[noreturn]] void report_unmarked_free_block(void* block) noexcept;

// Checking mode: the checks of a free of `block`, a well-formed block of
// `span`; aborts on misuse, poisons the block otherwise.
void checked_free(void* block, Span* span) noexcept;

}  // namespace strata::detail
