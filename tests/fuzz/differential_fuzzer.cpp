// The differential fuzzer: decodes an input into allocator operations, runs
// them on strata (thread 0 here, threads 1..3 on turn-taking workers) and
// checks every result against the block model. Entry point for libFuzzer;
// standalone_driver.cpp calls the same function in g++ builds.
#include "block_ledger.hpp"
#include "block_model.hpp"
#include "operations.hpp"
#include "simulated_threads.hpp"
#include "stats_check.hpp"

#include <strata/concurrent_pool.hpp>
#include <strata/object_pool.hpp>
#include <strata/pmr.hpp>
#include <strata/pool_allocator.hpp>
#include <strata/strata.h>
#include <strata/thread_cached_pool.hpp>

#include <cerrno>
#include <cstdint>
#include <functional>

namespace strata_fuzz {
namespace {

class Execution {
 public:
  void apply(const Operation& op) {
    Block& slot = slots_[op.slot];
    switch (op.kind) {
      case Kind::Malloc:
        replace(slot, strata_malloc(op.size), op.size, 0);
        break;
      case Kind::Calloc: {
        auto* p = static_cast<unsigned char*>(strata_calloc(op.count, op.size));
        std::size_t bytes = op.count * op.size;
        if (p)
          for (std::size_t i = 0; i < bytes; ++i)
            if (p[i] != 0) model_violation("calloc memory not zero", p, bytes, i);
        replace(slot, p, bytes, 0);
        break;
      }
      case Kind::AlignedAlloc:
        replace(slot, strata_aligned_alloc(op.alignment, op.size), op.size, op.alignment);
        break;
      case Kind::Realloc:
        if (slot.p && slot.pool < 0) resize(slot, op.size);
        else replace(slot, strata_realloc(nullptr, op.size), op.size, 0);
        break;
      case Kind::ReallocZero:
        if (slot.p && slot.pool < 0) resize(slot, 0);
        break;
      case Kind::Free:
        release(slot, false, 0);
        break;
      case Kind::FreeSized:
        release(slot, true, op.extra);
        break;
      case Kind::PoolAllocate:
        allocate_from_pool(slot, op.extra % kPools, op.size, op.alignment);
        break;
      case Kind::Touch:
        if (slot.p && slot.pool < 0) {
          check_contents(slot, slot.size, "contents changed while the block was live");
          if (strata_usable_size(slot.p) != slot.usable)
            model_violation("usable size changed while the block was live", slot.p, slot.size, slot.usable);
        }
        break;
      case Kind::CheckStats:
        check_statistics();  // the other threads wait for their turn: strata is quiet
        break;
      case Kind::ReleaseMemory:
        if (op.extra < 64) strata_release_free_memory();
        break;
      case Kind::ThreadExit:  // run_input handles it: a thread cannot replace itself
        break;
      case Kind::Count:
        break;
    }
  }

  void release_all() {
    for (Block& b : slots_) release(b, false, 0);
    if (!live_.empty()) model_violation("live ranges left after freeing every block", nullptr, 0, 0);
  }

 private:
  // The pools of issue 3. As std::pmr resources (any size and alignment): a
  // thread-safe one (used from every simulated thread), the single-threaded
  // one (safe here because the threads take turns), and the general resource
  // over strata_*. Then the fixed-size pools, for objects of up to 64 bytes
  // aligned to up to 16: the lock-free and the spinlock concurrent pools, the
  // per-thread-cached pool, object_pool (single-threaded, as above) and
  // pool_allocator (per-thread pools; frees from other threads travel home).
  static constexpr int kPmrPools = 3;
  static constexpr int kPools = 8;
  static constexpr std::size_t kFixedSize = 64, kFixedAlignment = 16;
  struct alignas(kFixedAlignment) Object64 {
    unsigned char bytes[kFixedSize];
  };

  std::pmr::memory_resource* pool(int index) {
    switch (index) {
      case 0: return &synchronized_;
      case 1: return &unsynchronized_;
      default: return strata::pmr::general_resource();
    }
  }

  void* fixed_allocate(int index) {
    switch (index) {
      case 3: return lock_free_.allocate();
      case 4: return spinlock_.allocate();
      case 5: return thread_cached_.allocate();
      case 6: return objects_.allocate();
      default: return node_allocator_.allocate(1);
    }
  }

  void fixed_deallocate(int index, void* p) {
    switch (index) {
      case 3: return lock_free_.deallocate(p);
      case 4: return spinlock_.deallocate(p);
      case 5: return thread_cached_.deallocate(p);
      case 6: return objects_.deallocate(static_cast<Object64*>(p));
      default: return node_allocator_.deallocate(static_cast<Object64*>(p), 1);
    }
  }

  void allocate_from_pool(Block& slot, int index, std::size_t size, std::size_t alignment) {
    if (index >= kPmrPools) {
      size = size < kFixedSize ? size : kFixedSize;
      alignment = alignment < kFixedAlignment ? alignment : kFixedAlignment;
    }
    // Both throw on failure: the fuzzer stops.
    void* p = index < kPmrPools ? pool(index)->allocate(size, alignment) : fixed_allocate(index);
    release(slot, false, 0);
    slot.p = static_cast<unsigned char*>(p);
    slot.size = size;
    slot.alignment = alignment;
    slot.usable = size;
    slot.seed = next_seed_++;
    slot.pool = index;
    check_pool_placement(slot);
    live_.insert(slot);
    fill_contents(slot);
  }

  // A new block for `slot`; whatever the slot held before is freed first.
  void replace(Block& slot, void* p, std::size_t size, std::size_t alignment) {
    if (p == nullptr) model_violation("allocation of a servable size returned NULL", nullptr, size, errno);
    release(slot, false, 0);
    slot.p = static_cast<unsigned char*>(p);
    slot.size = size;
    slot.alignment = alignment;
    slot.usable = strata_usable_size(p);
    slot.seed = next_seed_++;
    check_placement(slot);
    check_in_ledger(slot);
    live_.insert(slot);
    fill_contents(slot);
  }

  // The statistics check counts blocks through the ledger: it must see
  // every block the fuzzer holds (a link without --wrap would not).
  static void check_in_ledger(const Block& b) {
    if (!ledger().contains(b.p)) model_violation("the ledger missed a block (linked without --wrap?)", b.p, b.size, 0);
  }

  void resize(Block& slot, std::size_t size) {
    live_.erase(slot);
    void* old = slot.p;
    auto* p = static_cast<unsigned char*>(strata_realloc(slot.p, size));
    if (p == nullptr) model_violation("realloc of a servable size returned NULL", old, size, errno);
    // The header's promise: a new size that fits the block and is at least
    // half its usable size stays put (smaller ones may move to a smaller block).
    if (size != 0 && size <= slot.usable && 2 * size >= slot.usable && p != old)
      model_violation("realloc within the usable size moved the block", old, size, slot.usable);
    Block moved = slot;
    moved.p = p;
    std::size_t kept = size < slot.size ? size : slot.size;
    check_contents(moved, kept, "realloc lost contents");
    slot.p = p;
    slot.size = size;
    slot.alignment = 0;
    slot.usable = strata_usable_size(p);
    slot.seed = next_seed_++;
    check_placement(slot);
    check_in_ledger(slot);
    live_.insert(slot);
    fill_contents(slot);
  }

  void release(Block& slot, bool sized, std::uint8_t where) {
    if (!slot.p) return;
    check_contents(slot, slot.size, "contents changed before free");
    live_.erase(slot);
    if (slot.pool >= kPmrPools) {
      fixed_deallocate(slot.pool, slot.p);
    } else if (slot.pool >= 0) {
      pool(slot.pool)->deallocate(slot.p, slot.size, slot.alignment);
    } else if (sized) {
      std::size_t span = slot.usable - slot.size;
      strata_free_sized(slot.p, slot.size + (span ? where % (span + 1) : 0));
    } else {
      strata_free(slot.p);
    }
    slot = Block{};
  }

  // Declared before the slots: destroyed after every block went back.
  strata::pmr::synchronized_pool_resource synchronized_;
  strata::pmr::pool_resource unsynchronized_;
  strata::concurrent_pool<strata::lock_free_policy> lock_free_{kFixedSize, kFixedAlignment};
  strata::concurrent_pool<strata::spinlock_policy> spinlock_{kFixedSize, kFixedAlignment};
  strata::thread_cached_pool thread_cached_{kFixedSize, kFixedAlignment};
  strata::object_pool<Object64> objects_;
  strata::pool_allocator<Object64> node_allocator_;
  Block slots_[kSlots];
  LiveRanges live_;
  std::uint64_t next_seed_ = 1;
};

}  // namespace

// One fuzz input: operations grouped in runs per thread, run in input order;
// a thread exit ends a run.
int run_input(const std::uint8_t* data, std::size_t size) {
  static TurnTakingThreads workers(kThreads - 1);
  std::vector<Operation> ops = decode(data, size);
  {
    Execution execution;
    std::size_t i = 0;
    while (i < ops.size()) {
      if (ops[i].kind == Kind::ThreadExit) {
        if (ops[i].thread != 0 && ops[i].extra == 0) workers.restart(ops[i].thread - 1u);
        ++i;
        continue;
      }
      std::size_t end = i;
      while (end < ops.size() && ops[end].thread == ops[i].thread && ops[end].kind != Kind::ThreadExit) ++end;
      auto run = [&, begin = i, end] {
        for (std::size_t k = begin; k < end; ++k) execution.apply(ops[k]);
      };
      if (ops[i].thread == 0) run();
      else workers.run_on(ops[i].thread - 1u, std::function<void()>(run));
      i = end;
    }
    execution.release_all();
  }
  // Every block and pool is gone (but what the immortal pools keep, which
  // the ledger holds): the statistics must say so.
  check_statistics();
  return 0;
}

}  // namespace strata_fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return strata_fuzz::run_input(data, size);
}
