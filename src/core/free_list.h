// Links threaded through blocks: the single blocks that wait in an inbox
// (a thread without a cache frees another thread's block, frontend/inbox.h)
// and a listing thread's recent lists (frontend/recent_blocks.h). Free
// blocks in spans are bits (core/span_blocks.h) and are never written.
//
// The link stored in such a block is encoded: next XOR a per-process secret
// (g_list_key), so that a stray write into a block in transit shows up as a
// wild pointer instead of aiming the owner's drain at an address of the
// writer's choosing.
#pragma once

#include "core/constants.h"

#include <cstdint>

namespace strata::detail {

// Build option STRATA_ENCODE_FREE_LISTS (CMake STRATA_HARDENED, on by
// default): off, links are stored plainly.
#ifndef STRATA_ENCODE_FREE_LISTS
#define STRATA_ENCODE_FREE_LISTS 1
#endif

extern STRATA_INTERNAL std::uintptr_t g_list_key;

inline std::uintptr_t encode_link(std::uintptr_t link, std::uintptr_t key) noexcept {
  return STRATA_ENCODE_FREE_LISTS ? link ^ key : link;
}

inline void* list_next(void* block) noexcept {
  return reinterpret_cast<void*>(encode_link(*static_cast<std::uintptr_t*>(block), g_list_key));
}

inline void list_set_next(void* block, void* next) noexcept {
  *static_cast<std::uintptr_t*>(block) = encode_link(reinterpret_cast<std::uintptr_t>(next), g_list_key);
}

}  // namespace strata::detail
