// Test helper: which thread holds each block a pool handed out, so that a
// block handed out twice (or given back by a thread that does not hold it)
// is seen at once. Shared by the pools' concurrency tests.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace strata_test {

// Address -> holder (0: nobody). Lock-free open addressing; keys stay.
class ownership_table {
 public:
  explicit ownership_table(std::size_t capacity_log2)
      : mask_((std::size_t{1} << capacity_log2) - 1),
        keys_(new std::atomic<std::uintptr_t>[mask_ + 1]),
        holders_(new std::atomic<std::uint64_t>[mask_ + 1]) {
    for (std::size_t i = 0; i <= mask_; ++i) {
      keys_[i].store(0, std::memory_order_relaxed);
      holders_[i].store(0, std::memory_order_relaxed);
    }
  }
  // Both return the previous holder.
  std::uint64_t take(const void* p, std::uint64_t holder) { return entry(p).exchange(holder); }
  std::uint64_t give_back(const void* p) { return entry(p).exchange(0); }

 private:
  std::atomic<std::uint64_t>& entry(const void* p) {
    auto key = reinterpret_cast<std::uintptr_t>(p);
    std::size_t i = (key * 0x9E3779B97F4A7C15ull >> 20) & mask_;
    for (std::size_t probes = 0; probes <= mask_; ++probes, i = (i + 1) & mask_) {
      std::uintptr_t k = keys_[i].load();
      if (k == key) return holders_[i];
      if (k == 0 && (keys_[i].compare_exchange_strong(k, key) || k == key)) return holders_[i];
    }
    std::fprintf(stderr, "ownership table full\n");
    std::abort();
  }

  std::size_t mask_;
  std::unique_ptr<std::atomic<std::uintptr_t>[]> keys_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> holders_;
};

}  // namespace strata_test
