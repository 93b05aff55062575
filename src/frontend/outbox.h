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
  // What a thread may hold back from the rest of the process is bounded
  // twice. Blocks of at most kUncountedSize (every class the inline malloc
  // serves) are bounded by the slots themselves: a parcel leaves when it is
  // full (Parcel::kCapacity), so the outbox never holds more than kSlots x
  // 63 of them (at most 2 MiB), and adding one costs no byte count: the
  // common remote free is a store and an increment. Larger blocks are
  // counted, and all parcels leave when those reach kTotalBytes: at most
  // 3 MiB in all. (Counting blocks of 513 B to 1 KiB too, as before
  // 2026-11-27, cost the cross-thread shape with mixed sizes 6-8 % of its
  // time and the 2-thread server 9 % of its throughput, though the bound
  // was never reached there: docs/design.md. A per-parcel byte bound,
  // 256 KiB, cost two more additions and a compare on every remote free
  // and bounded nothing the total does not.)
  static constexpr std::size_t kUncountedSize = 1024;
  static constexpr std::size_t kTotalBytes = std::size_t{1} << 20;
  static constexpr std::size_t kUncountedBound = kSlots * 63 * kUncountedSize;
  static_assert(kUncountedBound <= 2 * kTotalBytes, "what the slots hold stays within 2 MiB");

  OutboxSlot slots[kSlots];
  // The slot the rare path last put a block in (0: none, or its parcel
  // left): most remote frees go where the one before went, and this spares
  // them the hash and the slot's two loads.
  Destination last_destination = 0;
  Parcel* last_parcel = nullptr;
  std::size_t counted_bytes = 0;  // of blocks larger than kUncountedSize
  std::uint32_t open_parcels = 0;  // slots holding a parcel

  static std::size_t slot_index(Destination d) noexcept {
    return static_cast<std::size_t>((d * 0x9e3779b97f4a7c15ull) >> 59);  // top 5 bits
  }

  // The class of the largest blocks added without a byte count.
  static constexpr std::size_t kLastUncountedClass = size_to_class(kUncountedSize);

  // The parcel open for `destination` when one more block does not fill
  // it, else nullptr (the caller takes its slow path). An outbox that never
  // opens a parcel (those of the shared empty and dead caches) always says
  // nullptr.
  Parcel* open_parcel_with_room(Destination destination) const noexcept {
    Parcel* parcel;
    if (__builtin_expect(destination == last_destination, 1)) {
      parcel = last_parcel;
    } else {
      const OutboxSlot& slot = slots[slot_index(destination)];
      parcel = slot.parcel;
      if (parcel == nullptr || slot.destination != destination) return nullptr;
    }
    if (parcel->count + 1 >= Parcel::kCapacity) return nullptr;
    return parcel;
  }

  // The common remote free, inline in its callers: the slot already holds a
  // parcel for `destination`, this block does not fill it, and it is small
  // enough to need no byte count: a store and an increment. False for
  // anything else (the caller takes its slow path; the byte count stays
  // there, out of the way of the common case's registers: measured, 6
  // instructions more per remote free of a 64 B block with it inline).
  bool add_to_open_parcel(void* block, std::size_t size_class, Destination destination) noexcept {
    if (size_class > kLastUncountedClass) return false;
    Parcel* parcel = open_parcel_with_room(destination);
    if (parcel == nullptr) return false;
    parcel->blocks[parcel->count++] = block;
    return true;
  }

  // Adds a block over kUncountedSize to `parcel` (open, with room), counting
  // its bytes; false when they would reach kTotalBytes.
  bool add_counted(Parcel* parcel, void* block, std::size_t size_class) noexcept {
    const std::size_t size = class_size(size_class);
    if (counted_bytes + size >= kTotalBytes) return false;
    parcel->counted_bytes += static_cast<std::uint32_t>(size);
    counted_bytes += size;
    parcel->blocks[parcel->count++] = block;
    return true;
  }
};

static_assert(class_size(Outbox::kLastUncountedClass) == Outbox::kUncountedSize);

}  // namespace strata::detail
