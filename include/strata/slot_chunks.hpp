// strata/slot_chunks.hpp — the chunks behind a depot of equal slots.
//
// Both depots (batch_depot, magazine_depot) cut chunks from an upstream
// memory_resource (or the general allocator when there is none) into slots
// of one size. slot_chunks keeps those chunks linked (each starts with a
// chunk_link header, the slots follow, aligned) so that release_all() can
// free them, and a bump range of the newest chunk's untouched slots, handed
// out lowest address first, so a new chunk is never walked or written
// before its slots are used.
//
// Not synchronised: the owning depot calls it under its own lock.
// constexpr-constructible and trivially destructible, because the per-type
// depots are constinit and never destroyed (per_type_pool.hpp).
#ifndef STRATA_SLOT_CHUNKS_HPP
#define STRATA_SLOT_CHUNKS_HPP

#include <strata/general_memory.hpp>

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <new>

namespace strata::detail {

struct chunk_link {
  chunk_link* next;
};

class slot_chunks {
 public:
  // Bytes before a chunk's first slot.
  static constexpr std::size_t header_bytes(std::size_t slot_align) noexcept {
    return round_up(sizeof(chunk_link), slot_align);
  }

  // chunk_bytes is raised to hold at least one slot.
  constexpr slot_chunks(std::size_t slot_size, std::size_t slot_align, std::size_t chunk_bytes,
                        std::pmr::memory_resource* upstream) noexcept
      : slot_size_(slot_size),
        chunk_align_(slot_align < alignof(chunk_link) ? alignof(chunk_link) : slot_align),
        header_bytes_(header_bytes(slot_align)),
        chunk_bytes_(chunk_bytes < header_bytes_ + slot_size ? header_bytes_ + slot_size : chunk_bytes),
        upstream_(upstream) {}

  slot_chunks(const slot_chunks&) = delete;
  slot_chunks& operator=(const slot_chunks&) = delete;

  // Untouched slots left in the newest chunk.
  std::size_t fresh_slots() const noexcept {
    return static_cast<std::size_t>(end_ - cursor_) / slot_size_;
  }

  // The first of `count` <= fresh_slots() untouched slots, `slot_size` apart.
  char* take_fresh(std::size_t count) noexcept {
    char* first = cursor_;
    cursor_ += count * slot_size_;
    return first;
  }

  // A new chunk; its slots become the fresh ones (what was left of the
  // previous chunk is less than a slot when callers ask only then).
  // Throws std::bad_alloc (or what the upstream throws).
  void add_chunk() {
    void* memory = get_block(chunk_bytes_, chunk_align_);
    chunks_ = ::new (memory) chunk_link{chunks_};
    ++chunk_count_;
    cursor_ = static_cast<char*>(memory) + header_bytes_;
    end_ = cursor_ + (chunk_bytes_ - header_bytes_) / slot_size_ * slot_size_;
  }

  // Frees every chunk. Only when no slot is in use or cached anywhere.
  void release_all() noexcept {
    while (chunks_ != nullptr) {
      chunk_link* next = chunks_->next;
      free_block(chunks_, chunk_bytes_, chunk_align_);
      chunks_ = next;
    }
    cursor_ = end_ = nullptr;
    chunk_count_ = 0;
  }

  // True when `p` is a slot boundary inside one of the chunks.
  bool holds_slot(const void* p) const noexcept {
    auto addr = reinterpret_cast<std::uintptr_t>(p);
    for (const chunk_link* c = chunks_; c != nullptr; c = c->next) {
      auto begin = reinterpret_cast<std::uintptr_t>(c) + header_bytes_;
      auto end = reinterpret_cast<std::uintptr_t>(c) + chunk_bytes_;
      if (addr >= begin && addr < end) return (addr - begin) % slot_size_ == 0;
    }
    return false;
  }

  std::size_t chunk_count() const noexcept { return chunk_count_; }
  std::size_t chunk_bytes() const noexcept { return chunk_bytes_; }
  std::pmr::memory_resource* upstream() const noexcept { return upstream_; }

  // Other memory of the depot from the same source (magazine arrays).
  void* get_block(std::size_t bytes, std::size_t align) {
    return upstream_ != nullptr ? upstream_->allocate(bytes, align) : allocate_bytes(bytes, align);
  }
  void free_block(void* p, std::size_t bytes, std::size_t align) noexcept {
    if (upstream_ != nullptr)
      upstream_->deallocate(p, bytes, align);
    else
      deallocate_bytes(p, bytes, align);
  }

 private:
  std::size_t slot_size_;
  std::size_t chunk_align_;
  std::size_t header_bytes_;
  std::size_t chunk_bytes_;
  std::pmr::memory_resource* upstream_;
  char* cursor_ = nullptr;  // untouched slots of the newest chunk: [cursor_, end_)
  char* end_ = nullptr;
  chunk_link* chunks_ = nullptr;
  std::size_t chunk_count_ = 0;
};

}  // namespace strata::detail

#endif
