// Checking mode (STRATA_CHECK=1): every malloc and free takes a checked slow
// path that catches misuse and aborts with a clear message. The block layout
// (canary, size trailer, poison) is in core/checked_block.h; the checks on
// free in frontend/misuse.h; this file hands checked blocks out.
//
// The fast paths pay nothing for this: in checking mode the fast size limit
// is 0 and no thread gets a cache of its own, so every call falls into a
// slow path that looks at g_options.check.
#pragma once

#include <cstddef>

namespace strata::detail {

// True while checking mode is on and the caller is not the checked
// allocator's own inner allocation.
bool checking() noexcept;

void* checked_allocate(std::size_t alignment, std::size_t size) noexcept;
void* checked_allocate_zeroed(std::size_t count, std::size_t size) noexcept;
void* checked_reallocate(void* block, std::size_t size) noexcept;
std::size_t checked_usable_size(const void* block) noexcept;

}  // namespace strata::detail
