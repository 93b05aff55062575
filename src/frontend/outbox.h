// A thread's outbox: blocks it freed that belong to other owners, gathered
// per destination in parcels (frontend/parcel.h), so that each destination
// receives them in batches, with one atomic operation (thread) or one lock
// acquisition (central cache) per parcel. Direct-mapped by destination; a
// collision sends the older parcel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/size_classes.h"
#include "frontend/parcel.h"

namespace strata::detail {

// A destination: a ThreadCache*, or a size class of the central cache
// (tagged with the low bit; ThreadCache objects are 64-byte aligned).
using Destination = std::uintptr_t;

inline Destination central_destination(std::size_t cls) noexcept { return (cls << 1) | 1; }
inline bool is_central(Destination d) noexcept { return (d & 1) != 0; }

// A slot holds a parcel only while the parcel holds blocks.
struct OutboxSlot {
  Destination destination = 0;
  Parcel* parcel = nullptr;
};

struct Outbox {
  static constexpr std::size_t kSlots = 32;
  // A parcel leaves when it is full (Parcel::kCapacity); all of them leave
  // when the outbox would hold kTotalBytes, which caps what a thread may
  // hold back from the rest of the process. (A per-parcel byte bound, 256
  // KiB, cost two more additions and a compare on every remote free and
  // bounded nothing the total does not.)
  static constexpr std::size_t kTotalBytes = std::size_t{1} << 20;

  OutboxSlot slots[kSlots];
  std::size_t pending_bytes = 0;
  std::uint32_t pending_blocks[kNumClasses] = {};  // per size class, for statistics

  static std::size_t slot_index(Destination d) noexcept {
    return static_cast<std::size_t>((d * 0x9e3779b97f4a7c15ull) >> 59);  // top 5 bits
  }
};

}  // namespace strata::detail
