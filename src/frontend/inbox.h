// A thread's inbox: blocks of spans it owns, freed by other threads.
// Multi-producer, single-consumer: senders push a whole chain with one CAS
// (it retries only while another sender pushes at the same instant), the
// owner takes everything with one exchange. No ABA: the consumer never pops
// single nodes, it takes the whole list.
#pragma once

#include <atomic>

#include "core/free_list.h"

namespace strata::detail {

class Inbox {
 public:
  void push_chain(void* first, void* last) noexcept {
    void* old = head_.load(std::memory_order_relaxed);
    do {
      list_set_next(last, old);
    } while (!head_.compare_exchange_weak(old, first, std::memory_order_release,
                                          std::memory_order_relaxed));
  }

  // The whole chain (nullptr-terminated, encoded links), or nullptr. The
  // plain load first keeps an empty inbox free of atomic read-modify-writes.
  void* take_all() noexcept {
    if (head_.load(std::memory_order_relaxed) == nullptr) return nullptr;
    return head_.exchange(nullptr, std::memory_order_acquire);
  }

  bool empty() const noexcept { return head_.load(std::memory_order_relaxed) == nullptr; }

 private:
  alignas(64) std::atomic<void*> head_{nullptr};  // own cache line: senders write it
  [[maybe_unused]] char pad_[64 - sizeof(std::atomic<void*>)] = {};
};

}  // namespace strata::detail
