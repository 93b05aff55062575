// Fork handlers and the profile written at exit.
#include "profile/profile.h"

#include "profile/profile_writer.h"
#include "profile/sample_store.h"

namespace strata::detail {

void profile_fork_prepare() noexcept { g_sample_store.lock_for_fork(); }

void profile_fork_parent() noexcept { g_sample_store.unlock_after_fork_parent(); }

void profile_fork_child() noexcept {
  g_sample_store.reset_after_fork_child();
  sampler_after_fork_child();
}

namespace {

// STRATA_PROFILE=1 and STRATA_PROFILE_TOP=N act when the process exits
// (exit() or a return from main; not _exit or a fatal signal). Lives in the
// same object as the fork handlers, which the allocator always links.
__attribute__((destructor)) void profile_at_exit() { write_profile_at_exit(); }

}  // namespace

}  // namespace strata::detail
