#include "core/span_blocks.h"

#include "core/diagnostics.h"
#include "platform/os.h"

namespace strata::detail {

namespace {

constexpr std::size_t kOsPageShift = 12;  // MADV_DONTNEED granularity
constexpr std::size_t kMaxUnits = 64;     // one bit each in parked_units

std::uintptr_t span_base(const Span* span) noexcept { return reinterpret_cast<std::uintptr_t>(span->start()); }

std::size_t unit_count(const Span* span) noexcept {
  std::size_t unit = std::size_t{1} << span->unit_shift;
  return (span->bytes() + unit - 1) >> span->unit_shift;
}

// Bits of the blocks [first, last) that fall in word `w`.
std::uint64_t bits_of_range(std::uint32_t w, std::uint64_t first, std::uint64_t last) noexcept {
  std::uint64_t lo = std::uint64_t{w} * 64, hi = lo + 64;
  if (first < lo) first = lo;
  if (last > hi) last = hi;
  if (first >= last) return 0;
  std::uint64_t count = last - first;
  std::uint64_t mask = count == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << count) - 1);
  return mask << (first - lo);
}

}  // namespace

void format_small_span(Span* span, std::size_t cls) noexcept {
  const SizeClassInfo& info = class_info(cls);
  span->size_class = static_cast<std::uint8_t>(cls);
  span->owner_class = static_cast<std::uint8_t>(cls);
  const std::uint32_t blocks = blocks_in_span(cls, span->page_count);
  span->capacity = static_cast<std::uint16_t>(blocks);
  span->countdown = 0;
  span->sleeping = kAwake;
  span->kept_empty = false;
  span->parked_units = 0;
  span->any_parked = false;
  span->idle_since = 0;
  span->used_epoch = 0;
  span->fresh_from = 0;
  span->block_base = span_base(span);
  span->index_multiplier = info.reciprocal << kIndexShift;
  for (std::uint32_t w = 0; w < kFreeWords; ++w) span->free_bits[w] = bits_of_range(w, 0, blocks);
  // Units of at least an OS page, at most 64 per span.
  std::size_t shift = kOsPageShift;
  while ((span->bytes() >> shift) > kMaxUnits) ++shift;
  span->unit_shift = static_cast<std::uint8_t>(shift);
}

bool return_free_bits(Span* span, std::uint32_t word, std::uint64_t bits) noexcept {
  if (bits == 0) return false;
  std::uint64_t& slot = span->free_bits[word];
  if ((slot & bits) != 0) {
    std::uint64_t index = std::uint64_t{word} * 64 + static_cast<std::uint64_t>(__builtin_ctzll(slot & bits));
    block_freed_twice(block_at(span, index));
  }
  slot |= bits;
  span->countdown -= count_bits(bits);
  return span->countdown == 0;
}

void* take_one_block(Span* span) noexcept {
  TakenWord taken;
  if (!choose_free_word(span, false, taken)) return nullptr;
  const std::uint64_t index = static_cast<std::uint64_t>(__builtin_ctzll(taken.bits));
  taken.bits &= ~taken.bits + 1;  // its lowest block alone
  take_word(span, taken, 1);
  return reinterpret_cast<void*>(taken.base + index * class_size(span->owner_class));
}

void countdown_wrapped(const Span* span) noexcept {
  report_misuse(span->start(), "double free (all blocks of this span had come back already)");
}

void block_freed_twice(const void* block) noexcept { report_misuse(block, "double free"); }

void verify_empty_span(const Span* span) noexcept {
  const std::uint32_t words = span_words(span);
  std::uint32_t free = 0;
  for (std::uint32_t w = 0; w < words; ++w) free += count_bits(span->free_bits[w]);
  if (free == span->capacity) return;
  // The first block still in use.
  for (std::uint32_t w = 0; w < words; ++w) {
    std::uint64_t in_use = ~span->free_bits[w] & bits_of_range(w, 0, span->capacity);
    if (in_use != 0)
      report_misuse(block_at(span, std::uint64_t{w} * 64 + static_cast<std::uint64_t>(__builtin_ctzll(in_use))),
                    "double free (a span whose blocks all came back still holds this one in use: "
                    "another block of it was freed twice)");
  }
}

void unpark_blocks(Span* span, std::uint64_t first, std::uint64_t last) noexcept {
  const std::size_t size = class_size(span->owner_class);
  if (first >= last) return;
  std::size_t lo = (first * size) >> span->unit_shift;
  std::size_t hi = ((last * size) - 1) >> span->unit_shift;
  for (std::size_t u = lo; u <= hi && u < kMaxUnits; ++u) span->parked_units &= ~(std::uint64_t{1} << u);
  span->any_parked = span->parked_units != 0;
}

std::size_t park_free_units(Span* span) noexcept {
  if (!span_has_free_blocks(span)) return 0;
  const std::size_t size = class_size(span->size_class);
  const std::uintptr_t base = span_base(span);
  const std::uintptr_t end = base + span->bytes();
  const std::size_t units = unit_count(span);
  std::uint64_t newly = 0;
  for (std::size_t u = 0; u < units && u < kMaxUnits; ++u) {
    if ((span->parked_units >> u) & 1) continue;
    // Blocks overlapping unit u: [first, last); past the last block the
    // unit holds only the span's tail, which nothing uses.
    std::uint64_t lo = std::uint64_t{u} << span->unit_shift, hi = std::uint64_t{u + 1} << span->unit_shift;
    std::uint64_t first = lo / size;
    std::uint64_t last = (hi + size - 1) / size;
    if (last > span->capacity) last = span->capacity;
    if (first >= last) continue;  // only the span's tail: never touched
    bool all_free = true;
    for (std::uint32_t w = static_cast<std::uint32_t>(first / 64); all_free && w <= (last - 1) / 64; ++w) {
      std::uint64_t need = bits_of_range(w, first, last);
      all_free = (span->free_bits[w] & need) == need;
    }
    if (all_free) newly |= std::uint64_t{1} << u;
  }
  if (newly == 0) return 0;
  span->parked_units |= newly;
  span->any_parked = true;
  std::size_t released = 0;
  for (std::size_t u = 0; u < kMaxUnits;) {
    if (!((newly >> u) & 1)) { ++u; continue; }
    std::size_t run = u;
    while (run < kMaxUnits && ((newly >> run) & 1)) ++run;
    std::uintptr_t lo = base + (std::uintptr_t{u} << span->unit_shift);
    std::uintptr_t hi = base + (std::uintptr_t{run} << span->unit_shift);
    if (hi > end) hi = end;
    if (hi > lo) {
      os_decommit(reinterpret_cast<void*>(lo), hi - lo);
      released += hi - lo;
    }
    u = run;
  }
  return released;
}

}  // namespace strata::detail
