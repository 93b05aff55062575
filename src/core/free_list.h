// Intrusive singly linked lists threaded through free blocks, and the mark
// that tells a free block from one in use.
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

// Build option STRATA_CHECK_DOUBLE_FREE (on with STRATA_HARDENED): the free
// mark below and its checks. Off, double frees are caught only in checking
// mode (STRATA_CHECK=1).
#ifndef STRATA_CHECK_DOUBLE_FREE
#define STRATA_CHECK_DOUBLE_FREE STRATA_ENCODE_FREE_LISTS
#endif

extern STRATA_INTERNAL std::uintptr_t g_list_key;

// A free block's first two words. Every block is at least 16 bytes.
//   encoded_next: the link, XOR the secret;
//   free_mark:    the secret itself while the block is free: written by
//                 every free and every carve, checked and cleared by every
//                 malloc that hands the block out.
// Every block on any free list carries the mark, so a block that reaches the
// head of a list without it was freed twice (its first copy was handed out
// and the mark cleared) or written after it was freed: malloc reports it
// before handing it out a second time (frontend/misuse.h). The check sits
// in malloc, not in free, because malloc reads the block's first line
// anyway (the link), while free only writes to it: a check in free would
// make every free of a cold block wait for a cache miss (measured: +50% on
// 100,000 blocks freed in random order). Frees of other threads' blocks are
// checked when they reach their owner, and a span whose counts say it is
// empty is scanned for a block without the mark before it is reused.
// Cost: one store per free; per malloc one `sub` of the key from the mark
// (compare and clear at once) and its branch: 3 instructions a pair. The mark is
// the list key itself, so the fast paths load no second secret; a program
// that can read freed memory learns the key from it, which the encoded
// links already leak to such a reader (they are next XOR key, and next is a
// neighbouring heap address).
struct FreeBlock {
  std::uintptr_t encoded_next;
  std::uintptr_t free_mark;
};
static_assert(sizeof(FreeBlock) == 16, "the smallest size class is 16 bytes");

inline bool has_free_mark(const void* block, std::uintptr_t key) noexcept {
  return STRATA_CHECK_DOUBLE_FREE && static_cast<const FreeBlock*>(block)->free_mark == key;
}
// Relaxed atomic stores compile to plain moves; unlike plain stores, GCC
// does not merge them with the link's store into a vector store (which
// takes four instructions to build where two moves do).
inline void set_free_mark(void* block, std::uintptr_t key) noexcept {
  if (STRATA_CHECK_DOUBLE_FREE) __atomic_store_n(&static_cast<FreeBlock*>(block)->free_mark, key, __ATOMIC_RELAXED);
}
inline void clear_free_mark(void* block) noexcept {
  if (STRATA_CHECK_DOUBLE_FREE) __atomic_store_n(&static_cast<FreeBlock*>(block)->free_mark, 0, __ATOMIC_RELAXED);
}

// Checks that a block leaving a list carries the mark and clears it: true
// when it did. A missing mark is left as it was (for the report). On x86-64
// one `sub` of the key from memory and one `jne`: the compare and the clear
// in two instructions where C gives three.
inline bool take_free_mark(void* block, std::uintptr_t key) noexcept {
  if (!STRATA_CHECK_DOUBLE_FREE) return true;
  std::uintptr_t& mark = static_cast<FreeBlock*>(block)->free_mark;
#if defined(__x86_64__)
  asm goto("subq %1, %0\n\tjne %l[unmarked]" : "+m"(mark) : "r"(key) : "cc" : unmarked);
  return true;
unmarked:
  mark += key;
  return false;
#else
  if (mark != key) return false;
  clear_free_mark(block);
  return true;
#endif
}

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

}  // namespace strata::detail
