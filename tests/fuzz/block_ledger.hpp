// The ledger: every block strata's C API has handed out and not taken back,
// whoever asked for it: the fuzzer's own operations, and the chunks, rows
// and caches that the pools take from strata_malloc behind the model's back.
//
// It is fed by wrappers around the C API's allocation functions
// (block_ledger.cpp), which the link puts between every caller and strata
// with `--wrap=strata_malloc` and the like (tests/fuzz/CMakeLists.txt). The
// statistics check (stats_check.hpp) compares strata_stats with it: it is the
// truth about "blocks the program holds". The engine never calls its own C
// API, so the ledger sees exactly the program's calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace strata_fuzz {

struct LedgerEntry {
  std::size_t request = 0;  // bytes the program asked for (realloc: the last size)
  // What heap profiling records as the request if the block is a sample:
  // the request of the call that created the block at this address (a
  // realloc that keeps the block in place keeps the record, as documented
  // in src/profile/sampled_block.h).
  std::size_t recorded_request = 0;
};

class BlockLedger {
 public:
  void add(const void* p, std::size_t request);
  void resized_in_place(const void* p, std::size_t request);
  void remove(const void* p);
  bool contains(const void* p) const;

  // Calls `visit(pointer, entry)` for every live block, under the lock.
  template <class Visit>
  void for_each(Visit&& visit) const {
    std::lock_guard<std::mutex> guard(mutex_);
    for (const auto& [p, entry] : blocks_) visit(p, entry);
  }
  std::size_t size() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return blocks_.size();
  }

 private:
  // The worker threads take turns, but a lock costs nothing here and keeps
  // the ledger correct whoever calls.
  mutable std::mutex mutex_;
  std::unordered_map<const void*, LedgerEntry> blocks_;  // system malloc: never counted by strata
};

// The process's ledger: never destroyed, since pools and threads may free
// into it during static destruction.
BlockLedger& ledger();

}  // namespace strata_fuzz
