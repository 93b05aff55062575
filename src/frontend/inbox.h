// A thread's inbox: blocks of spans it owns, freed by other threads.
// Multi-producer, single-consumer: senders push one item with one CAS (it
// retries only while another sender pushes at the same instant), the owner
// takes everything with one exchange. No ABA: the consumer never pops
// single items, it takes the whole list.
//
// An item is a Parcel* (low bit 0: up to 64 blocks, frontend/parcel.h) or a
// single block (low bit 1; its link lives in its first word, encoded like a
// free-list link). Single blocks come from threads without a cache (during
// their own exit) or without memory for a parcel.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/free_list.h"
#include "frontend/parcel.h"

namespace strata::detail {

using InboxItem = std::uintptr_t;

inline bool item_is_block(InboxItem item) noexcept { return (item & 1) != 0; }
inline void* item_block(InboxItem item) noexcept { return reinterpret_cast<void*>(item & ~std::uintptr_t{1}); }
inline Parcel* item_parcel(InboxItem item) noexcept { return reinterpret_cast<Parcel*>(item); }

inline InboxItem item_next(InboxItem item) noexcept {
  if (item_is_block(item)) return reinterpret_cast<InboxItem>(list_next(item_block(item)));
  return item_parcel(item)->next;
}

inline void item_set_next(InboxItem item, InboxItem next) noexcept {
  if (item_is_block(item)) list_set_next(item_block(item), reinterpret_cast<void*>(next));
  else item_parcel(item)->next = next;
}

class Inbox {
 public:
  void push_parcel(Parcel* parcel) noexcept { push(reinterpret_cast<InboxItem>(parcel)); }
  void push_block(void* block) noexcept { push(reinterpret_cast<InboxItem>(block) | 1); }

  // The whole list of items (0-terminated), or 0. The plain load first keeps
  // an empty inbox free of atomic read-modify-writes.
  InboxItem take_all() noexcept {
    if (head_.load(std::memory_order_relaxed) == 0) return 0;
    return head_.exchange(0, std::memory_order_acquire);
  }

  bool empty() const noexcept { return head_.load(std::memory_order_relaxed) == 0; }

  // The first item, for statistics (which walk the list without taking it).
  InboxItem peek_head() const noexcept { return head_.load(std::memory_order_acquire); }

 private:
  void push(InboxItem item) noexcept {
    InboxItem old = head_.load(std::memory_order_relaxed);
    do {
      item_set_next(item, old);
    } while (!head_.compare_exchange_weak(old, item, std::memory_order_release, std::memory_order_relaxed));
  }

  alignas(64) std::atomic<InboxItem> head_{0};  // own cache line: senders write it
  [[maybe_unused]] char pad_[64 - sizeof(std::atomic<InboxItem>)] = {};
};

}  // namespace strata::detail
