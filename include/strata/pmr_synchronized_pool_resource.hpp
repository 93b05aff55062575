// strata/pmr_synchronized_pool_resource.hpp — strata::pmr::
// synchronized_pool_resource, a drop-in for std::pmr::synchronized_pool_resource.
//
// Same classes, options, upstream and release() semantics as pool_resource
// (pmr_pool_resource.hpp), safe to use from many threads at once. Instead of
// one lock around shared pools (which is why the standard one loses to
// malloc, seed 000), each pooled size class is a batch_depot with a
// per-thread magazine cache, like thread_cached_pool: allocate and
// deallocate touch only the calling thread's cache; a thread trades whole
// batches with the depot under a spinlock. The per-thread caches (one row
// of magazines per thread, allocated from the upstream on a thread's first
// use) are indexed by the thread's slot (thread_slots.hpp), so threads may
// come and go. Oversize blocks go to the upstream under a mutex.
//
// release() and the destructor must not run concurrently with other calls.
#ifndef STRATA_PMR_SYNCHRONIZED_POOL_RESOURCE_HPP
#define STRATA_PMR_SYNCHRONIZED_POOL_RESOURCE_HPP

#include <strata/batch_depot.hpp>
#include <strata/pmr_general_resource.hpp>
#include <strata/pmr_oversize_list.hpp>
#include <strata/pmr_pool_options.hpp>
#include <strata/thread_slots.hpp>

#include <atomic>
#include <cstddef>
#include <memory_resource>
#include <mutex>
#include <new>
#include <optional>

namespace strata::pmr {

class synchronized_pool_resource : public std::pmr::memory_resource {
 public:
  synchronized_pool_resource() : synchronized_pool_resource(std::pmr::pool_options{}, general_resource()) {}
  explicit synchronized_pool_resource(std::pmr::memory_resource* upstream)
      : synchronized_pool_resource(std::pmr::pool_options{}, upstream) {}
  explicit synchronized_pool_resource(const std::pmr::pool_options& options)
      : synchronized_pool_resource(options, general_resource()) {}
  synchronized_pool_resource(const std::pmr::pool_options& options, std::pmr::memory_resource* upstream)
      : upstream_(upstream),
        options_(detail_pmr::effective_options(options)),
        class_count_(detail_pmr::class_count(options_)) {
    for (std::size_t i = 0; i < class_count_; ++i) {
      const std::size_t block = detail_pmr::class_block_size(i);
      const std::size_t max_blocks = options_.max_blocks_per_chunk;
      std::size_t blocks = (std::size_t{64} << 10) / block;  // about 64 KiB chunks
      if (blocks > max_blocks) blocks = max_blocks;
      if (blocks == 0) blocks = 1;
      const auto max_batch = static_cast<std::uint32_t>(max_blocks < 1024 ? max_blocks : 1024);
      depots_[i].emplace(block, block, block * (blocks + 1), upstream_, max_batch);
    }
    for (auto& r : rows_) r.store(nullptr, std::memory_order_relaxed);
  }

  synchronized_pool_resource(const synchronized_pool_resource&) = delete;
  synchronized_pool_resource& operator=(const synchronized_pool_resource&) = delete;
  ~synchronized_pool_resource() override { release(); }

  void release() {
    for (auto& slot : rows_) {
      row* r = slot.exchange(nullptr, std::memory_order_relaxed);
      if (r != nullptr) upstream_->deallocate(r, sizeof(row), alignof(row));
    }
    for (std::size_t i = 0; i < class_count_; ++i) depots_[i]->release_all();
    std::lock_guard guard(oversize_lock_);
    oversize_.release(upstream_);
  }

  std::pmr::memory_resource* upstream_resource() const noexcept { return upstream_; }
  std::pmr::pool_options options() const noexcept { return options_; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    std::size_t index = detail_pmr::class_index(bytes, alignment);
    if (index < class_count_) [[likely]] {
      std::uint32_t slot = strata::detail::current_thread_slot();
      if (slot < strata::detail::max_thread_slots) [[likely]] {
        row* r = rows_[slot].load(std::memory_order_relaxed);
        if (r == nullptr) [[unlikely]] r = make_row(slot);
        strata::detail::magazine_cache& m = r->magazines[index];
        if (strata::detail::free_node* n = m.try_pop()) [[likely]] return n;
        return m.pop_refill(*depots_[index]);
      }
      return depots_[index]->take_one();
    }
    std::lock_guard guard(oversize_lock_);
    return oversize_.allocate(upstream_, bytes, alignment);
  }

  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    std::size_t index = detail_pmr::class_index(bytes, alignment);
    if (index < class_count_) [[likely]] {
      std::uint32_t slot = strata::detail::current_thread_slot();
      if (slot < strata::detail::max_thread_slots) [[likely]] {
        if (row* r = rows_[slot].load(std::memory_order_relaxed)) [[likely]] {
          strata::detail::magazine_cache& m = r->magazines[index];
          if (m.try_push(p)) [[likely]] return;
          return m.push_spill(*depots_[index], p);
        }
      }
      return depots_[index]->give_one(static_cast<strata::detail::free_node*>(p));
    }
    std::lock_guard guard(oversize_lock_);
    oversize_.deallocate(upstream_, p, bytes, alignment);
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

 private:
  struct alignas(64) row {
    strata::detail::magazine_cache magazines[detail_pmr::class_count_limit];
  };

  [[gnu::noinline]] row* make_row(std::uint32_t slot) {
    row* r = ::new (upstream_->allocate(sizeof(row), alignof(row))) row{};
    for (std::size_t i = 0; i < class_count_; ++i) r->magazines[i].room = depots_[i]->batch_size();
    rows_[slot].store(r, std::memory_order_relaxed);
    return r;
  }

  std::pmr::memory_resource* upstream_;
  std::pmr::pool_options options_;
  std::size_t class_count_;
  std::optional<strata::detail::batch_depot> depots_[detail_pmr::class_count_limit];
  // Written only by the slot's owner thread (see thread_cached_pool.hpp).
  std::atomic<row*> rows_[strata::detail::max_thread_slots];
  std::mutex oversize_lock_;
  detail_pmr::oversize_list oversize_;
};

}  // namespace strata::pmr

#endif
