// Intrusive singly linked lists threaded through free blocks.
//
// The link stored in a free block is encoded: next XOR a per-process secret
// (g_list_key). A heap overflow that overwrites a free block's first word
// cannot aim the next allocation at an address of the attacker's choosing
// without knowing the secret (the idea of mimalloc's secure mode), and a
// stray write shows up as a wild pointer in checking mode instead of a
// silent reuse. Cost: one load and one XOR per push or pop.
#pragma once

#include "core/constants.h"

#include <cstdint>

namespace strata::detail {

// Build option STRATA_ENCODE_FREE_LISTS (CMake STRATA_HARDENED, on by
// default): off, links are stored plainly; the benchmark suite builds both
// to show what the encoding costs.
#ifndef STRATA_ENCODE_FREE_LISTS
#define STRATA_ENCODE_FREE_LISTS 1
#endif

extern STRATA_INTERNAL std::uintptr_t g_list_key;

struct FreeBlock {
  std::uintptr_t encoded_next;
};

// `key` is g_list_key (or the copy a ThreadCache keeps next to its lists).
inline std::uintptr_t encode_link(std::uintptr_t link, std::uintptr_t key) noexcept {
  return STRATA_ENCODE_FREE_LISTS ? link ^ key : link;
}

inline void* list_next(void* block) noexcept {
  return reinterpret_cast<void*>(encode_link(static_cast<FreeBlock*>(block)->encoded_next, g_list_key));
}

inline void list_set_next(void* block, void* next) noexcept {
  static_cast<FreeBlock*>(block)->encoded_next = encode_link(reinterpret_cast<std::uintptr_t>(next), g_list_key);
}

// A chain of blocks known by both ends, so chains splice in O(1).
struct BlockChain {
  void* head = nullptr;
  void* tail = nullptr;
  std::uint32_t count = 0;

  void push(void* block) noexcept {
    list_set_next(block, head);
    if (head == nullptr) tail = block;
    head = block;
    ++count;
  }
  bool empty() const noexcept { return head == nullptr; }
};

}  // namespace strata::detail
