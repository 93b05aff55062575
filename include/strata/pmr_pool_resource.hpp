// strata/pmr_pool_resource.hpp — strata::pmr::pool_resource, a drop-in for
// std::pmr::unsynchronized_pool_resource (single thread, or external locking).
//
// Semantics follow the standard's pool resources:
//  - constructible with pool_options and/or an upstream resource; the
//    default upstream is strata::pmr::general_resource() (the standard's is
//    get_default_resource(); strata's pools never reach the system malloc);
//  - requests up to options().largest_required_pool_block (and alignments up
//    to it) are pooled, larger ones go to the upstream directly;
//  - pools grow by chunks of at most options().max_blocks_per_chunk blocks,
//    starting small (about 4 KiB) and doubling;
//  - release() gives all memory back to the upstream, also memory not yet
//    deallocated; the destructor calls release();
//  - is_equal only with itself.
//
// A pool is an intrusive free list plus a bump-pointer range in its newest
// chunk: allocate and deallocate are a size-class computation (a few bit
// operations) and a pop or a push.
#ifndef STRATA_PMR_POOL_RESOURCE_HPP
#define STRATA_PMR_POOL_RESOURCE_HPP

#include <strata/general_memory.hpp>
#include <strata/pmr_general_resource.hpp>
#include <strata/pmr_oversize_list.hpp>
#include <strata/pmr_pool_options.hpp>

#include <cstddef>
#include <memory_resource>
#include <new>

namespace strata::pmr {

class pool_resource : public std::pmr::memory_resource {
 public:
  pool_resource() : pool_resource(std::pmr::pool_options{}, general_resource()) {}
  explicit pool_resource(std::pmr::memory_resource* upstream) : pool_resource(std::pmr::pool_options{}, upstream) {}
  explicit pool_resource(const std::pmr::pool_options& options) : pool_resource(options, general_resource()) {}
  pool_resource(const std::pmr::pool_options& options, std::pmr::memory_resource* upstream)
      : upstream_(upstream),
        options_(detail_pmr::effective_options(options)),
        class_count_(detail_pmr::class_count(options_)) {}

  pool_resource(const pool_resource&) = delete;
  pool_resource& operator=(const pool_resource&) = delete;
  ~pool_resource() override { release(); }

  void release() {
    while (chunks_ != nullptr) {
      chunk_footer* c = chunks_;
      chunks_ = c->next;
      upstream_->deallocate(c->start, c->bytes, c->alignment);
    }
    oversize_.release(upstream_);
    for (auto& p : pools_) p = pool{};
  }

  std::pmr::memory_resource* upstream_resource() const noexcept { return upstream_; }
  std::pmr::pool_options options() const noexcept { return options_; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    std::size_t index = detail_pmr::class_index(bytes, alignment);
    if (index < class_count_) [[likely]] {
      pool& p = pools_[index];
      if (free_block* b = p.free) [[likely]] {
        p.free = b->next;
        return b;
      }
      if (p.cursor != p.end) {
        void* b = p.cursor;
        p.cursor += detail_pmr::class_block_size(index);
        return b;
      }
      return refill(index);
    }
    return oversize_.allocate(upstream_, bytes, alignment);
  }

  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment) override {
    std::size_t index = detail_pmr::class_index(bytes, alignment);
    if (index < class_count_) [[likely]] {
      auto* b = static_cast<free_block*>(ptr);
      pool& p = pools_[index];
      b->next = p.free;
      p.free = b;
      return;
    }
    oversize_.deallocate(upstream_, ptr, bytes, alignment);
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

 private:
  struct free_block {
    free_block* next;
  };
  struct pool {
    free_block* free = nullptr;
    char* cursor = nullptr;  // fresh blocks of the newest chunk: [cursor, end)
    char* end = nullptr;
    std::size_t next_chunk_blocks = 0;
  };
  struct chunk_footer {
    chunk_footer* next;
    void* start;
    std::size_t bytes;
    std::size_t alignment;
  };

  [[gnu::noinline]] void* refill(std::size_t index) {
    const std::size_t block = detail_pmr::class_block_size(index);
    pool& p = pools_[index];
    std::size_t blocks = p.next_chunk_blocks;
    if (blocks == 0) blocks = block >= 4096 ? 1 : 4096 / block;
    if (blocks > options_.max_blocks_per_chunk) blocks = options_.max_blocks_per_chunk;
    // Blocks at multiples of `block` from a chunk aligned to `block`; the
    // footer after the last block.
    const std::size_t bytes = blocks * block + sizeof(chunk_footer);
    const std::size_t alignment = block > alignof(chunk_footer) ? block : alignof(chunk_footer);
    char* start = static_cast<char*>(upstream_->allocate(bytes, alignment));
    auto* footer = ::new (start + blocks * block) chunk_footer{chunks_, start, bytes, alignment};
    chunks_ = footer;
    // Double the next chunk, up to the option and to 1 MiB of blocks.
    if (blocks * 2 <= options_.max_blocks_per_chunk && blocks * 2 * block <= (std::size_t{1} << 20))
      p.next_chunk_blocks = blocks * 2;
    else
      p.next_chunk_blocks = blocks;
    p.cursor = start + block;
    p.end = start + blocks * block;
    return start;
  }

  std::pmr::memory_resource* upstream_;
  std::pmr::pool_options options_;
  std::size_t class_count_;
  pool pools_[detail_pmr::class_count_limit] = {};
  chunk_footer* chunks_ = nullptr;
  detail_pmr::oversize_list oversize_;
};

}  // namespace strata::pmr

#endif
