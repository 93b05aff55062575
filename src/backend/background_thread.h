// The optional background thread (STRATA_BACKGROUND_THREAD=1): wakes four
// times per decay period and gives free pages back to the OS, so memory
// returns even when no thread touches the allocator.
#pragma once

namespace strata::detail {

void start_background_thread_if_wanted() noexcept;
void background_thread_after_fork_child() noexcept;

}  // namespace strata::detail
