// Test helper: blocks handed from thread to thread, so that frees are often
// remote and objects outlive the thread that took them. Shared by the pools'
// concurrency tests.
#pragma once

#include <mutex>
#include <vector>

namespace strata_test {

template <class Item>
class mailbox {
 public:
  void put(Item item) {
    std::lock_guard g(lock_);
    items_.push_back(item);
  }
  bool get(Item& item) {
    std::lock_guard g(lock_);
    if (items_.empty()) return false;
    item = items_.back();
    items_.pop_back();
    return true;
  }

 private:
  std::mutex lock_;
  std::vector<Item> items_;
};

}  // namespace strata_test
