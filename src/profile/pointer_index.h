// An open-addressing index of pointers to records that carry their own
// `hash` (StackTrace, SiteCounters), for the sample store's lookups.
//
// Why it grows instead of being mapped at full size once: the slots a
// lookup touches are spread over the table by the hash, so a fixed table of
// 2^16 entries makes every new record fault in a page of its own (two
// tables, 16 samples in a short program: about 128 KiB of resident memory,
// most of what heap profiling added to `python3 -c pass`). It starts at one
// OS page and doubles when three quarters full, up to `MaxSlots`; the records
// themselves live in metadata pools and never move, so pointers to them
// (a Sample's site) stay valid across a rehash.
//
// Linear probing; no removal (records name totals and are never freed).
// Not thread-safe: the sample store's mutex guards it. Nothing here calls
// malloc: tables come from os_map.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/os.h"

namespace strata::detail {

template <class Record, std::size_t MaxSlots>
class PointerIndex {
  static_assert((MaxSlots & (MaxSlots - 1)) == 0, "MaxSlots must be a power of two");

 public:
  static constexpr std::size_t kInitialSlots = 4096 / sizeof(Record*);
  static constexpr std::size_t kMaxRecords = MaxSlots / 4 * 3;

  // The record with this hash for which `same(record)` holds, or nullptr.
  template <class Same>
  Record* find(std::uint64_t hash, Same&& same) const noexcept {
    if (slots_ == nullptr) return nullptr;
    for (std::size_t i = hash & (capacity_ - 1);; i = (i + 1) & (capacity_ - 1)) {
      Record* record = slots_[i];
      if (record == nullptr) return nullptr;  // the load limit keeps an empty slot
      if (record->hash == hash && same(*record)) return record;
    }
  }

  // Room for one more record: grows the table when it is three quarters
  // full. False when the index holds kMaxRecords or the OS refuses memory.
  bool reserve_one() noexcept {
    if (count_ >= kMaxRecords) return false;
    if (slots_ != nullptr && (count_ + 1) * 4 <= capacity_ * 3) return true;
    std::size_t capacity = slots_ == nullptr ? kInitialSlots : capacity_ * 2;
    if (capacity > MaxSlots) capacity = MaxSlots;
    auto** slots = static_cast<Record**>(os_map(capacity * sizeof(Record*), 4096));
    if (slots == nullptr) return false;
    for (std::size_t i = 0; i < capacity_; ++i)
      if (slots_[i] != nullptr) place(slots, capacity, slots_[i]);
    if (slots_ != nullptr) os_unmap(slots_, capacity_ * sizeof(Record*));
    slots_ = slots;
    capacity_ = capacity;
    return true;
  }

  // Adds a record find() did not find; reserve_one() must have said yes.
  void insert(Record* record) noexcept {
    place(slots_, capacity_, record);
    ++count_;
  }

  template <class Visit>
  void for_each(Visit&& visit) const noexcept {
    for (std::size_t i = 0; i < capacity_; ++i)
      if (slots_[i] != nullptr) visit(*slots_[i]);
  }

  std::size_t size() const noexcept { return count_; }
  std::size_t table_bytes() const noexcept { return capacity_ * sizeof(Record*); }

 private:
  static void place(Record** slots, std::size_t capacity, Record* record) noexcept {
    std::size_t i = record->hash & (capacity - 1);
    while (slots[i] != nullptr) i = (i + 1) & (capacity - 1);
    slots[i] = record;
  }

  Record** slots_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t count_ = 0;
};

}  // namespace strata::detail
