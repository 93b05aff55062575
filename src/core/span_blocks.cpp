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

// Blocks whose first byte lies in unit `u`: indexes [first, last).
void blocks_starting_in(const Span* span, std::size_t u, std::size_t size, std::size_t carved,
                        std::size_t& first, std::size_t& last) noexcept {
  std::size_t lo = u << span->unit_shift, hi = (u + 1) << span->unit_shift;
  first = (lo + size - 1) / size;
  last = (hi + size - 1) / size;
  if (first > carved) first = carved;
  if (last > carved) last = carved;
}

}  // namespace

void format_small_span(Span* span, std::size_t cls) noexcept {
  const SizeClassInfo& info = class_info(cls);
  span->size_class = static_cast<std::uint8_t>(cls);
  span->capacity = info.span_objects;
  span->countdown = 0;
  span->listed_mark = 0;
  span->free_list = nullptr;
  span->sleeping = false;
  span->kept_empty = false;
  span->parked_units = 0;
  span->parked_blocks = 0;
  span->idle_since = 0;
  span->used_epoch = 0;
  span->tail_released = false;
  span->marked_end = 0;
  span->carve_next = span_base(span);
  span->carve_end = span->carve_next + std::uintptr_t{info.span_objects} * info.size;
  // Units of at least an OS page, at most 64 per span.
  std::size_t shift = kOsPageShift;
  while ((span->bytes() >> shift) > kMaxUnits) ++shift;
  span->unit_shift = static_cast<std::uint8_t>(shift);
}

void* carve_blocks(Span* span, std::uint32_t max, std::uintptr_t key, std::uint32_t& count, void* then) noexcept {
  std::size_t size = class_size(span->size_class);
  std::uintptr_t available = (span->carve_end - span->carve_next) / size;
  std::uint32_t n = available < max ? static_cast<std::uint32_t>(available) : max;
  count = n;
  if (n == 0) return nullptr;
  std::uintptr_t first = span->carve_next;
  std::uintptr_t last = first + std::uintptr_t{n - 1} * size;
  // Blocks below marked_end keep the mark their free wrote (recycle_empty_span).
  const std::uintptr_t marked_end = span->marked_end;
  for (std::uintptr_t b = first; b < last; b += size) {
    reinterpret_cast<FreeBlock*>(b)->encoded_next = encode_link(b + size, key);
    if (b >= marked_end) set_free_mark(reinterpret_cast<void*>(b), key);
  }
  reinterpret_cast<FreeBlock*>(last)->encoded_next = encode_link(reinterpret_cast<std::uintptr_t>(then), key);
  if (last >= marked_end) set_free_mark(reinterpret_cast<void*>(last), key);
  span->carve_next = last + size;
  span->tail_released = false;
  span->countdown += n;
  span->listed_mark += n;
  return reinterpret_cast<void*>(first);
}

namespace {

// The end of the blocks that were ever carved: carved ones, and the ones a
// recycled span will carve again (they still hold their marks).
std::uintptr_t ever_carved_end(const Span* span) noexcept {
  return span->marked_end > span->carve_next ? span->marked_end : span->carve_next;
}

// Calls visit(block) for every block of `span` ever carved that does not
// start in a parked unit (parked units read as zero: no mark, no link), in
// address order; stops early when visit returns false.
template <class Visit>
void for_each_unparked_carved_block(const Span* span, Visit&& visit) noexcept {
  const std::size_t size = class_size(span->size_class);
  const std::uintptr_t base = span_base(span);
  const std::uintptr_t end = ever_carved_end(span);
  if (span->parked_units == 0) {
    for (std::uintptr_t b = base; b < end; b += size)
      if (!visit(b)) return;
    return;
  }
  const std::uintptr_t unit = std::uintptr_t{1} << span->unit_shift;
  for (std::uintptr_t b = base; b < end; b += size) {
    std::size_t u = (b - base) >> span->unit_shift;
    if (u < kMaxUnits && ((span->parked_units >> u) & 1)) {
      // Skip to the first block that starts past this unit.
      std::uintptr_t unit_end = base + (u + 1) * unit;
      b = base + ((unit_end - base + size - 1) / size) * size - size;
      continue;
    }
    if (!visit(b)) return;
  }
}

}  // namespace

const void* unmarked_carved_block(const Span* span, std::uintptr_t key) noexcept {
  if (!STRATA_CHECK_DOUBLE_FREE) return nullptr;
  const void* found = nullptr;
  for_each_unparked_carved_block(span, [&](std::uintptr_t b) {
    if (reinterpret_cast<const FreeBlock*>(b)->free_mark == key) return true;
    found = reinterpret_cast<const void*>(b);
    return false;
  });
  return found;
}

void relist_empty_span(Span* span, std::uintptr_t key) noexcept {
  FreeBlock* last = nullptr;
  void* head = nullptr;
  std::uint32_t listed = 0;
  for_each_unparked_carved_block(span, [&](std::uintptr_t b) {
    auto* block = reinterpret_cast<FreeBlock*>(b);
    if (STRATA_CHECK_DOUBLE_FREE && block->free_mark != key)
      report_misuse(block, "double free (a span whose blocks all came back still holds this one in use: "
                           "another block of it was freed twice)");
    if (last != nullptr) last->encoded_next = encode_link(b, key);
    else head = block;
    last = block;
    ++listed;
    return true;
  });
  if (last != nullptr) last->encoded_next = encode_link(0, key);
  span->carve_next = ever_carved_end(span);  // recycled blocks are listed now
  span->marked_end = 0;
  span->free_list = head;
  span->listed_mark = listed;  // countdown is 0: every listed block is free
}

void recycle_empty_span(Span* span, std::uintptr_t key) noexcept {
  if (span->parked_units != 0) return relist_empty_span(span, key);
  span->marked_end = ever_carved_end(span);
  span->carve_next = span_base(span);
  span->free_list = nullptr;
  span->listed_mark = 0;  // countdown is 0 too: nothing listed, nothing out
}

void countdown_wrapped(const void* block) noexcept {
  report_misuse(block, "double free (all blocks of its span had come back already)");
}

void report_block_in_use_of_empty_span(const void* block) noexcept {
  report_misuse(block, "double free (a span whose blocks all came back still holds this one in use: "
                       "another block of it was freed twice)");
}

void verify_empty_span(const Span* span, std::uintptr_t key) noexcept {
  if (const void* live = unmarked_carved_block(span, key)) report_block_in_use_of_empty_span(live);
}

void forget_recycled_marks(Span* span, std::uintptr_t key) noexcept {
  if (span->marked_end <= span->carve_next) return;
  // Recycling needs no parked unit, and parking forgets first: no unit of
  // this range is parked.
  const std::size_t size = class_size(span->size_class);
  if (STRATA_CHECK_DOUBLE_FREE)
    for (std::uintptr_t b = span->carve_next; b < span->marked_end; b += size)
      if (reinterpret_cast<const FreeBlock*>(b)->free_mark != key)
        report_block_in_use_of_empty_span(reinterpret_cast<const void*>(b));
  span->marked_end = 0;
}

bool span_list_contains(const Span* span, const void* block, std::uintptr_t key) noexcept {
  std::uint32_t budget = span->capacity;
  for (void* b = span->free_list; b != nullptr && budget-- != 0;
       b = reinterpret_cast<void*>(encode_link(static_cast<FreeBlock*>(b)->encoded_next, key)))
    if (b == block) return true;
  return false;
}

std::size_t park_free_units(Span* span, std::uintptr_t key) noexcept {
  // Recycled blocks become plain never-used memory (checked first): the
  // tail below goes back with them.
  forget_recycled_marks(span, key);
  if (span->free_list == nullptr && span->carve_next >= span->carve_end) return 0;
  const std::size_t size = class_size(span->size_class);
  const std::uintptr_t base = span_base(span);
  const std::size_t units = unit_count(span);
  std::size_t released = 0;

  // Never-used memory past the carving point holds nothing: its whole OS
  // pages can go back without any bookkeeping (carving faults them in again).
  std::uintptr_t tail = (span->carve_next + (std::uintptr_t{1} << kOsPageShift) - 1) &
                        ~((std::uintptr_t{1} << kOsPageShift) - 1);
  std::uintptr_t end = base + span->bytes();
  if (tail < end && !span->pages_zero && !span->tail_released) {
    os_decommit(reinterpret_cast<void*>(tail), end - tail);
    released += end - tail;
    span->tail_released = true;
  }
  if (span->free_list == nullptr) return released;

  // Which carved blocks are free: a bit each (a span has at most 512 blocks).
  std::uint64_t free_bits[8] = {};
  static_assert(kPageSize / 16 <= 8 * 64, "a one-page span of 16-byte blocks fits the bitmap");
  std::uint32_t budget = span->capacity;
  for (void* b = span->free_list; b != nullptr && budget-- != 0;
       b = reinterpret_cast<void*>(encode_link(static_cast<FreeBlock*>(b)->encoded_next, key))) {
    std::size_t index = (reinterpret_cast<std::uintptr_t>(b) - base) / size;
    if (index < 512) free_bits[index >> 6] |= std::uint64_t{1} << (index & 63);
  }
  auto is_free = [&](std::size_t index) { return index < 512 && ((free_bits[index >> 6] >> (index & 63)) & 1); };

  // A unit may go when every carved block that overlaps it is free and no
  // block will ever be carved into it: it lies below the carving point, or
  // the span is carved to its end (the unit's rest is the tail the last
  // block leaves, which most spans have: without this, the last unit of
  // such a span never went back).
  const bool fully_carved = span->carve_next >= span->carve_end;
  std::uint64_t newly = 0;
  for (std::size_t u = 0; u < units && u < kMaxUnits; ++u) {
    if ((span->parked_units >> u) & 1) continue;
    std::uintptr_t lo = std::uintptr_t{u} << span->unit_shift, hi = std::uintptr_t{u + 1} << span->unit_shift;
    if (base + lo >= span->carve_next) break;
    if (base + hi > span->carve_next && !fully_carved) break;
    bool all_free = true;
    for (std::size_t i = lo / size; i * size < hi && base + i * size < span->carve_next && all_free; ++i)
      all_free = is_free(i);
    if (all_free) newly |= std::uint64_t{1} << u;
  }
  if (newly == 0) return released;

  // Unlink the blocks that start in those units; their pages go back.
  auto parked_start = [&](std::uintptr_t b) {
    std::size_t u = (b - base) >> span->unit_shift;
    return u < kMaxUnits && ((newly >> u) & 1);
  };
  void* kept_head = nullptr;
  FreeBlock* kept_tail = nullptr;
  std::uint32_t dropped = 0;
  budget = span->capacity;
  for (void* b = span->free_list; b != nullptr && budget-- != 0;) {
    void* next = reinterpret_cast<void*>(encode_link(static_cast<FreeBlock*>(b)->encoded_next, key));
    if (parked_start(reinterpret_cast<std::uintptr_t>(b))) {
      ++dropped;
    } else {
      if (kept_tail) kept_tail->encoded_next = encode_link(reinterpret_cast<std::uintptr_t>(b), key);
      else kept_head = b;
      kept_tail = static_cast<FreeBlock*>(b);
    }
    b = next;
  }
  if (kept_tail) kept_tail->encoded_next = encode_link(0, key);
  span->free_list = kept_head;
  span->listed_mark -= dropped;
  span->parked_blocks += dropped;
  span->parked_units |= newly;
  for (std::size_t u = 0; u < kMaxUnits;) {
    if (!((newly >> u) & 1)) { ++u; continue; }
    std::size_t run = u;
    while (run < kMaxUnits && ((newly >> run) & 1)) ++run;
    std::uintptr_t lo = base + (std::uintptr_t{u} << span->unit_shift);
    std::uintptr_t hi = base + (std::uintptr_t{run} << span->unit_shift);
    if (hi > end) hi = end;
    if (span->tail_released && hi > tail) hi = tail;  // that part went back already
    if (hi <= lo) { u = run; continue; }
    os_decommit(reinterpret_cast<void*>(lo), hi - lo);
    released += hi - lo;
    u = run;
  }
  return released;
}

std::uint32_t unpark_blocks(Span* span, std::uintptr_t key) noexcept {
  if (span->parked_units == 0) return 0;
  const std::size_t size = class_size(span->size_class);
  const std::uintptr_t base = span_base(span);
  const std::size_t carved = (span->carve_next - base) / size;
  std::uint32_t count = 0;
  for (std::uint64_t units = span->parked_units; units != 0; units &= units - 1) {
    std::size_t u = static_cast<std::size_t>(__builtin_ctzll(units));
    std::size_t first, last;
    blocks_starting_in(span, u, size, carved, first, last);
    for (std::size_t i = first; i < last; ++i) {
      void* block = reinterpret_cast<void*>(base + i * size);
      static_cast<FreeBlock*>(block)->encoded_next =
          encode_link(reinterpret_cast<std::uintptr_t>(span->free_list), key);
      set_free_mark(block, key);
      span->free_list = block;
      ++count;
    }
  }
  span->parked_units = 0;
  span->parked_blocks = 0;
  span->listed_mark += count;
  return count;
}

}  // namespace strata::detail
