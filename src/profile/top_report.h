// STRATA_PROFILE_TOP=N: the N call sites holding the most live bytes, as
// text, with no tool: estimated bytes and objects (unsampled) and the call
// stack symbolized with dladdr (functions exported in the dynamic symbol
// table get names; others show as module+offset, which addr2line resolves).
#pragma once

#include <cstdint>

namespace strata::detail {

// At most this many sites are listed.
inline constexpr std::uint32_t kMaxTopSites = 100;

// Prints the report to file descriptor `fd`. Never allocates; symbolizes
// after the store's lock is released (dladdr takes the loader's lock).
void print_top_sites(int fd, std::uint32_t count) noexcept;

}  // namespace strata::detail
