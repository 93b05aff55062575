// How the fuzzer reads a byte string: a sequence of allocator operations, each
// naming the simulated thread that performs it and the model slot it uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata_fuzz {

constexpr int kThreads = 4;   // thread 0 is the fuzzing thread itself
constexpr int kSlots = 48;    // live blocks the model tracks at once

// Largest alignment the fuzzer asks for, as a power of two (1 MiB). A build
// with a smaller value isolates failures that only large alignments cause.
#ifndef STRATA_FUZZ_MAX_ALIGNMENT_LOG2
#define STRATA_FUZZ_MAX_ALIGNMENT_LOG2 20
#endif

enum class Kind : std::uint8_t {
  Malloc,
  Calloc,
  Realloc,       // resize a live block (or allocate into an empty slot)
  ReallocZero,   // realloc(p, 0): strata returns a fresh minimum block
  AlignedAlloc,
  Free,
  FreeSized,     // free_sized with any size between request and usable size
  Touch,         // re-check a live block's contents and usable size
  PoolAllocate,  // allocate from one of strata's pools (pmr resources and fixed-size pools)
  CheckStats,    // compare strata_stats with the model (stats_check.hpp)
  ReleaseMemory, // strata_release_free_memory (when `extra` < 64: it is costly)
  ThreadExit,    // the simulated thread exits, a new one takes its place (when `extra` is 0: it resets
                 // the thread to a young one, which then needs hundreds of operations to get a cache)
  Count
};

struct Operation {
  Kind kind;
  std::uint8_t thread;
  std::uint8_t slot;
  std::size_t size;       // bytes (Calloc: per element)
  std::size_t count;      // Calloc elements
  std::size_t alignment;  // AlignedAlloc
  std::uint8_t extra;     // FreeSized: where between request and usable size; PoolAllocate: resource;
                          // ReleaseMemory, ThreadExit: whether it happens (see Kind)
};

// Cursor over the input; reads zeros past the end so every input decodes.
class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint16_t word() { return static_cast<std::uint16_t>(byte() | (byte() << 8)); }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// A size in one of five ranges, so that every tier is reached: tiny, small
// classes, medium classes up to ~300 KiB, large spans, and power-of-two edges.
// Large sizes are rare: they cost most of the time of an execution.
inline std::size_t decode_size(ByteReader& in) {
  std::uint8_t range = in.byte() % 32;
  std::uint16_t w = in.word();
  if (range < 14) return w % 129;                                        // 0..128
  if (range < 23) return w % 4097;                                       // ..4 KiB
  if (range < 28) return (static_cast<std::size_t>(w) * 5) % 300001;     // ..~300 KiB
  if (range < 29) return (256u << 10) + static_cast<std::size_t>(w) * 16;  // 256 KiB..1.3 MiB
  std::size_t power = std::size_t{1} << (w % 23);                        // 1 B .. 4 MiB
  return power - 1 + (w >> 8) % 3;                                       // power - 1, power, power + 1
}

inline std::vector<Operation> decode(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  std::vector<Operation> ops;
  std::uint8_t thread = 0;
  while (!in.done() && ops.size() < 4096) {
    // Head byte: bits 0-3 the kind, bit 7 "switch thread", bits 4-5 the new
    // thread. Switches are costly (a hand-off), so they are explicit.
    std::uint8_t head = in.byte();
    Operation op{};
    op.kind = static_cast<Kind>((head & 0x0F) % static_cast<std::uint8_t>(Kind::Count));
    if (head & 0x80) thread = static_cast<std::uint8_t>((head >> 4) % kThreads);
    op.thread = thread;
    op.slot = static_cast<std::uint8_t>(in.byte() % kSlots);
    switch (op.kind) {
      case Kind::Malloc:
      case Kind::Realloc:
        op.size = decode_size(in);
        break;
      case Kind::Calloc:
        op.count = 1 + in.byte() % 16;
        op.size = decode_size(in) / op.count;
        break;
      case Kind::AlignedAlloc:
        op.alignment = std::size_t{1} << (in.byte() % (STRATA_FUZZ_MAX_ALIGNMENT_LOG2 + 1));
        op.size = decode_size(in);
        break;
      case Kind::FreeSized:
      case Kind::ReleaseMemory:
      case Kind::ThreadExit:
        op.extra = in.byte();
        break;
      case Kind::PoolAllocate:
        op.extra = in.byte();                               // which resource
        op.alignment = std::size_t{1} << (in.byte() % 13);  // 1 B .. 4 KiB
        op.size = decode_size(in);
        break;
      default:
        break;
    }
    ops.push_back(op);
  }
  return ops;
}

}  // namespace strata_fuzz
